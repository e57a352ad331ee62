import { z } from "@hono/zod-openapi";
import type { SegmentFilter, segments } from "../db/schema";
import { afterQuery, idParam, isoDateTime, limitQuery, WorkspaceParams } from "../lib/schemas";
import { iso } from "../lib/time";

export const SegmentParams = WorkspaceParams.extend({ segment_id: idParam("segment", "segment_id") });

const tagList = (description: string) =>
  z
    .array(z.string().trim().min(1).max(40))
    .min(1)
    .max(50)
    .transform((list) => [...new Set(list)])
    .optional()
    .openapi({
      type: "array",
      items: { type: "string", minLength: 1, maxLength: 40 },
      minItems: 1,
      maxItems: 50,
      description,
      example: ["weekly"],
    });

const filterKeys = ["tags_any", "tags_all"] as const;

export const SegmentFilterSchema = z
  .strictObject({
    tags_any: tagList("Subscribers having at least one of these tags."),
    tags_all: tagList("Subscribers having every one of these tags."),
  })
  .refine((filter) => filterKeys.some((key) => filter[key] !== undefined), {
    error: `must contain at least one of: ${filterKeys.join(", ")}`,
  })
  .openapi("SegmentFilter", {
    description: "Narrows a campaign's audience (the workspace's active subscribers). Both lists given: both must hold.",
    minProperties: 1,
  });

export const SegmentSchema = z
  .object({
    id: z.string().openapi({ example: "seg_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("segment"),
    name: z.string(),
    filter: z.object({ tags_any: z.array(z.string()).optional(), tags_all: z.array(z.string()).optional() }),
    created_at: isoDateTime,
    updated_at: isoDateTime,
  })
  .openapi("Segment");

export type Segment = z.infer<typeof SegmentSchema>;

export const CreateSegmentBody = z
  .strictObject({ name: z.string().trim().min(1).max(200), filter: SegmentFilterSchema })
  .openapi("CreateSegmentRequest");

export const ListSegmentsQuery = z.strictObject({ limit: limitQuery, after: afterQuery });

/** Only the keys that were given, so the filter reads back exactly as it was written. */
export const normalizeFilter = (filter: SegmentFilter): SegmentFilter => ({
  ...(filter.tags_any !== undefined && { tags_any: filter.tags_any }),
  ...(filter.tags_all !== undefined && { tags_all: filter.tags_all }),
});

export const serializeSegment = (row: typeof segments.$inferSelect): Segment => ({
  id: row.id,
  object: "segment",
  name: row.name,
  filter: normalizeFilter(row.filter),
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
});
