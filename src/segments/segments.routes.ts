import { apiRoute } from "../lib/route";
import { dataResponse, pageEnvelope, WorkspaceParams } from "../lib/schemas";
import { CreateSegmentBody, ListSegmentsQuery, SegmentParams, SegmentSchema } from "./segments.schemas";

const one = (description: string) => dataResponse(description, SegmentSchema);

export const createSegment = apiRoute({
  method: "post",
  path: "/workspaces/{workspace_id}/segments",
  tags: ["Segments"],
  summary: "Create a segment",
  description:
    "A segment narrows a campaign's audience by tags. It is evaluated when the send starts processing, so subscribers tagged after the segment was created are included.",
  scope: "campaigns:write",
  idempotent: true,
  request: {
    params: WorkspaceParams,
    body: { required: true, content: { "application/json": { schema: CreateSegmentBody } } },
  },
  responses: { 201: one("The new segment") },
});

export const getSegment = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/segments/{segment_id}",
  tags: ["Segments"],
  summary: "Retrieve a segment",
  scope: "campaigns:read",
  request: { params: SegmentParams },
  responses: { 200: one("The segment") },
});

export const listSegments = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/segments",
  tags: ["Segments"],
  summary: "List segments",
  description: "Newest first.",
  scope: "campaigns:read",
  request: { params: WorkspaceParams, query: ListSegmentsQuery },
  responses: {
    200: {
      description: "A page of segments",
      content: { "application/json": { schema: pageEnvelope(SegmentSchema) } },
    },
  },
});
