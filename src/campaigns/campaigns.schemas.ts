import { z } from "@hono/zod-openapi";
import { campaignStatuses, type campaigns } from "../db/schema";
import {
  afterQuery,
  bodyString,
  rawText,
  idParam,
  isoDateTime,
  limitQuery,
  optionalText,
  queryEnum,
  requiredText,
  WorkspaceParams,
} from "../lib/schemas";
import { iso } from "../lib/time";
import { integrationSlugs } from "../sending/integrations";

export const CampaignParams = WorkspaceParams.extend({ campaign_id: idParam("campaign", "campaign_id") });

export const CampaignSchema = z
  .object({
    id: z.string().openapi({ example: "cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("campaign"),
    subject: z.string(),
    preheader: z.string().nullable(),
    status: z.enum(campaignStatuses),
    newsletter_id: z.string(),
    segment_id: z.string().nullable(),
    scheduled_at: isoDateTime.nullable(),
    sent_at: isoDateTime.nullable().openapi({ description: "When the send finished, for a `sent` campaign." }),
    created_at: isoDateTime,
    updated_at: isoDateTime,
  })
  .openapi("Campaign");

export type Campaign = z.infer<typeof CampaignSchema>;

/** A referenced id: any text; one that names nothing in the workspace is a 400 resource_missing. */
const reference = (example: string) => rawText(100).openapi({ example });

const dateTime = z.iso.datetime({ offset: true, abort: true });

export const CreateCampaignBody = z
  .strictObject({
    subject: requiredText(255),
    newsletter_id: reference("nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T"),
    preheader: optionalText(255).openapi({ description: "At most 255 characters, trimmed; `null` or blank: none." }),
    segment_id: reference("seg_01JD6Q3Z6W9X8B4N2M5K7P1R3T").nullable().optional(),
    // abort: a value that is not a date-time gets that one message, not "must be in the future" too.
    scheduled_at: dateTime
      .refine((value) => Date.parse(value) > Date.now(), { error: "must be in the future" })
      .nullable()
      .optional()
      .openapi({
        format: "date-time",
        // zod's own expression for what it accepts, so the document's pattern cannot drift from it.
        pattern: dateTime._zod.pattern.source,
        description:
          "When the send starts processing, if later than the send request. ISO 8601 with a time zone, in the future (a rule no schema can state).",
      }),
  })
  .openapi("CreateCampaignRequest");

export const ListCampaignsQuery = z.strictObject({
  limit: limitQuery,
  after: afterQuery,
  status: queryEnum(campaignStatuses).optional().openapi({ description: "Only campaigns with this status." }),
});

export const SendCampaignBody = z
  .strictObject({
    // Matched exactly (case-sensitive, untrimmed) against the configured integrations by the send
    // itself, so that a name it does not know is a 400 unknown_integration rather than a shape error.
    integration_slug: bodyString()
      .min(1)
      .max(64)
      .nullable()
      .optional()
      .openapi({
        enum: [...integrationSlugs, null],
        description:
          "`sandbox` (the default, also for `null`: records messages as sent, no network) or `resend`. Any other value is a 400 `unknown_integration`. Test credentials always deliver through the sandbox; the operation records what was asked.",
        example: "sandbox",
      }),
  })
  .openapi("SendCampaignRequest");

export const serializeCampaign = (row: typeof campaigns.$inferSelect): Campaign => ({
  id: row.id,
  object: "campaign",
  subject: row.subject,
  preheader: row.preheader,
  status: row.status,
  newsletter_id: row.newsletterId,
  segment_id: row.segmentId,
  scheduled_at: iso(row.scheduledAt),
  sent_at: iso(row.sentAt),
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
});
