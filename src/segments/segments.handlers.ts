import { commit } from "../db/commit";
import { notFound } from "../errors/api-error";
import { createRouter } from "../lib/create-app";
import { envelope, listPage } from "../lib/http";
import { newId } from "../lib/ids";
import { findSegment, insertSegment, listSegmentsPage } from "./segments.repository";
import { createSegment, getSegment, listSegments } from "./segments.routes";
import { SegmentFilterTags, storedFilter, serializeSegment } from "./segments.schemas";

const router = createRouter();
// The filter's document names this component without a zod schema reaching it (segments.schemas.ts).
router.openAPIRegistry.register("SegmentFilterTags", SegmentFilterTags);

export const segmentsRouter = router
  .openapi(createSegment, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = Date.now();
    const id = newId("segment", now);
    const [[row]] = await commit(c, [insertSegment(c.var.db, {
      id,
      workspaceId: workspace_id,
      name: body.name,
      filter: storedFilter(body.filter),
      createdAt: now,
      updatedAt: now,
    })], { status: 201, resource: "segment", id });
    // The insert is unconditional: no row means the write did not happen at all.
    if (!row) throw new Error("segment insert returned no row");
    return c.json(envelope(serializeSegment(row)), 201);
  })
  .openapi(getSegment, async (c) => {
    const { workspace_id, segment_id } = c.req.valid("param");
    const row = await findSegment(c.var.db, workspace_id, segment_id);
    if (!row) throw notFound("segment", segment_id);
    return c.json(envelope(serializeSegment(row)), 200);
  })
  .openapi(listSegments, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const { limit, after } = c.req.valid("query");
    const request = { list: `segments:${workspace_id}`, after, limit };
    const page = await listPage(c, request, (position, take) => listSegmentsPage(c.var.db, workspace_id, position, take), serializeSegment);
    return c.json(page, 200);
  });
