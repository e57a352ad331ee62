import { z } from "@hono/zod-openapi";
import type { deliveries, operations } from "../db/schema";
import { afterQuery, idParam, isoDateTime, limitQuery, WorkspaceParams } from "../lib/schemas";
import { iso } from "../lib/time";

export const OperationParams = WorkspaceParams.extend({ operation_id: idParam("operation", "operation_id") });
export const CampaignDeliveriesParams = WorkspaceParams.extend({ campaign_id: idParam("campaign", "campaign_id") });

const ProblemSchema = z
  .object({ code: z.string(), message: z.string() })
  .nullable()
  .openapi({ description: "Why it failed; null unless it did." });

export const OperationSchema = z
  .object({
    id: z.string().openapi({ example: "op_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("operation"),
    type: z.literal("campaign_send"),
    status: z.enum(["queued", "running", "succeeded", "failed"]),
    campaign_id: z.string(),
    integration_slug: z.string().openapi({ description: "The integration the send asked for." }),
    progress: z
      .object({
        total: z.int().openapi({ description: "Deliveries created so far; final once every recipient has been paged." }),
        delivered: z.int(),
        failed: z.int(),
      })
      .openapi({ description: "`total` grows while recipients are paged; the send is over when delivered + failed = total." }),
    error: ProblemSchema,
    created_at: isoDateTime,
    updated_at: isoDateTime,
    completed_at: isoDateTime.nullable(),
  })
  .openapi("Operation");

export type Operation = z.infer<typeof OperationSchema>;

export const DeliverySchema = z
  .object({
    id: z.string().openapi({ example: "dlv_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("delivery"),
    campaign_id: z.string(),
    subscriber_id: z.string(),
    email: z.string().openapi({ description: "The address at the time the delivery was created." }),
    status: z.enum(["queued", "sent", "failed"]),
    attempts: z.int().openapi({ description: "Calls made to the integration for this delivery." }),
    provider_message_id: z.string().nullable(),
    error: ProblemSchema,
    created_at: isoDateTime,
    updated_at: isoDateTime,
  })
  .openapi("Delivery");

export type Delivery = z.infer<typeof DeliverySchema>;

export const ListDeliveriesQuery = z.strictObject({ limit: limitQuery, after: afterQuery });

export const serializeOperation = (row: typeof operations.$inferSelect): Operation => ({
  id: row.id,
  object: "operation",
  type: row.type,
  status: row.status,
  campaign_id: row.campaignId,
  integration_slug: row.integrationSlug,
  progress: { total: row.total, delivered: row.delivered, failed: row.failed },
  error: row.error ?? null,
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
  completed_at: iso(row.completedAt),
});

export const serializeDelivery = (row: typeof deliveries.$inferSelect): Delivery => ({
  id: row.id,
  object: "delivery",
  campaign_id: row.campaignId,
  subscriber_id: row.subscriberId,
  email: row.email,
  status: row.status,
  attempts: row.attempts,
  provider_message_id: row.providerMessageId,
  error: row.error ?? null,
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
});
