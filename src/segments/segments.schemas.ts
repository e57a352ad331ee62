import { z } from "@hono/zod-openapi";
import type { SegmentFilter, segments } from "../db/schema";
import { afterQuery, idParam, isoDateTime, limitQuery, requiredText, tagList, WorkspaceParams } from "../lib/schemas";
import { iso } from "../lib/time";

export const SegmentParams = WorkspaceParams.extend({ segment_id: idParam("segment", "segment_id") });

const filterKeys = ["tags_any", "tags_all"] as const;
type FilterKey = (typeof filterKeys)[number];

/** A filter's list of tags: one component, which both of the document's filter shapes name. */
export const SegmentFilterTags = tagList({ minItems: 1, description: "Tags a subscriber is matched against." });
const TAGS_REF = { $ref: "#/components/schemas/SegmentFilterTags" };
const filterMeaning: Record<FilterKey, string> = {
  tags_any: "Subscribers having at least one of these tags.",
  tags_all: "Subscribers having every one of these tags.",
};

/**
 * The document states "at least one list given" as two whole objects, each requiring its own list:
 * a client generated from it then types a filter exactly (`{tags_any: string[], tags_all?: string[] |
 * null} | {tags_all: string[], tags_any?: …}`), which a rule written beside the properties would not
 * give it. The service validates with the object and its refine below (its errors name the field).
 */
const filterShape = (required: FilterKey) => ({
  type: "object" as const,
  additionalProperties: false,
  required: [required],
  properties: Object.fromEntries(
    filterKeys.map((key) => [
      key,
      key === required
        ? { ...TAGS_REF, description: filterMeaning[key] }
        : { anyOf: [TAGS_REF, { type: "null" as const }], description: `${filterMeaning[key]} \`null\`: not given.` },
    ]),
  ),
});

// `null` reads as "not given", so a filter read back from a segment can be sent again as it is.
const filterTags = () => SegmentFilterTags.nullable().optional();

const SegmentFilterSchema = z
  .unknown()
  .pipe(
    z
      .strictObject({ tags_any: filterTags(), tags_all: filterTags() })
      .refine((filter) => filterKeys.some((key) => filter[key] != null), {
        error: `must contain at least one of: ${filterKeys.join(", ")}`,
      }),
  )
  .openapi("SegmentFilter", {
    description:
      "Narrows a campaign's audience (the workspace's active subscribers). At least one of the lists must be given (not `null`). Both lists given: both must hold.",
    anyOf: filterKeys.map(filterShape),
  });

export const SegmentSchema = z
  .object({
    id: z.string().openapi({ example: "seg_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("segment"),
    name: z.string(),
    filter: z
      .object({
        tags_any: z.array(z.string()).nullable().openapi({ description: "`null` when the segment was created without it." }),
        tags_all: z.array(z.string()).nullable().openapi({ description: "`null` when the segment was created without it." }),
      })
      .openapi({ description: "Both keys are always present." }),
    created_at: isoDateTime,
    updated_at: isoDateTime,
  })
  .openapi("Segment");

export type Segment = z.infer<typeof SegmentSchema>;

export const CreateSegmentBody = z
  .strictObject({ name: requiredText(200), filter: SegmentFilterSchema })
  .openapi("CreateSegmentRequest", { example: { name: "VIP readers", filter: { tags_any: ["vip"] } } });

type CreateSegmentInput = z.infer<typeof CreateSegmentBody>;

export const ListSegmentsQuery = z.strictObject({ limit: limitQuery, after: afterQuery });

/**
 * The stored form keeps only the lists that were given (src/sending reads it with optional keys),
 * so a `null` list is left out.
 */
export const storedFilter = (filter: CreateSegmentInput["filter"]): SegmentFilter => ({
  ...(filter.tags_any != null && { tags_any: filter.tags_any }),
  ...(filter.tags_all != null && { tags_all: filter.tags_all }),
});

export const serializeSegment = (row: typeof segments.$inferSelect): Segment => ({
  id: row.id,
  object: "segment",
  name: row.name,
  filter: { tags_any: row.filter.tags_any ?? null, tags_all: row.filter.tags_all ?? null },
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
});
