import { z } from "@hono/zod-openapi";
import { type deliveries, deliveryStatuses, type operations } from "../db/schema";
import { afterQuery, idParam, idQuery, isoDateTime, limitQuery, queryEnum, WorkspaceParams } from "../lib/schemas";
import { iso } from "../lib/time";
import { type IntegrationSlug, integrationSlugs } from "../sending/integrations/slugs";

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
    integration_slug: z.enum(integrationSlugs).openapi({ description: "The integration the send asked for (with a test credential, the sandbox delivered whatever this says)." }),
    progress: z
      .object({
        total: z.int().openapi({ description: "Deliveries created so far; final once every recipient has been paged." }),
        delivered: z.int().openapi({
          description: "Deliveries handed to the integration (status `sent` or later): not the provider's confirmations, which are `delivered` in the campaign's stats.",
        }),
        failed: z.int(),
      })
      .openapi({
        description:
          "`total` grows while recipients are paged, so delivered + failed can equal it mid-send: the send is over when `status` is `succeeded` or `failed`.",
      }),
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
    status: z.enum(deliveryStatuses).openapi({
      description:
        "`queued` → `sent` (handed to the provider) or `failed`; then, from the provider's feedback, `delivered`, `bounced` or `complained`. A later event never moves a delivery backwards.",
    }),
    attempts: z.int().openapi({
      description:
        "Delivery steps that handed it to the integration (a step asks the provider up to 3 times for its batch, counted once); 0 for one ended without a call of its own (recipient_inactive, recipient_changed, render_failed, send_canceled, send_unscheduled, send_step_exhausted, and outcome_unknown when the send ended while its request was on its way).",
    }),
    provider_message_id: z.string().nullable(),
    bounce_type: z.string().nullable().openapi({ description: "The provider's bounce type (`Permanent`, `Transient`, …) when it reported a bounce." }),
    opened_at: isoDateTime.nullable().openapi({ description: "First open the provider reported." }),
    clicked_at: isoDateTime.nullable().openapi({ description: "First click the provider reported." }),
    unsubscribed_at: isoDateTime.nullable().openapi({ description: "When the recipient used this message's unsubscribe link." }),
    error: ProblemSchema,
    created_at: isoDateTime,
    updated_at: isoDateTime,
  })
  .openapi("Delivery");

export type Delivery = z.infer<typeof DeliverySchema>;

export const ListDeliveriesQuery = z.strictObject({
  limit: limitQuery,
  after: afterQuery,
  status: queryEnum(deliveryStatuses)
    .optional()
    .openapi({ description: "Only deliveries with this status (the failed ones of a large send, say): a range scan, any depth." }),
  subscriber_id: idQuery("subscriber", "Only this subscriber's delivery (a campaign has at most one per subscriber): did this person get it, and what became of it."),
});

export const serializeOperation = (row: typeof operations.$inferSelect): Operation => ({
  id: row.id,
  object: "operation",
  type: row.type,
  status: row.status,
  campaign_id: row.campaignId,
  integration_slug: row.integrationSlug as IntegrationSlug,
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
  bounce_type: row.bounceType,
  opened_at: iso(row.openedAt),
  clicked_at: iso(row.clickedAt),
  unsubscribed_at: iso(row.unsubscribedAt),
  error: row.error ?? null,
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
});

const count = (description: string) => z.int().openapi({ description });

export const CampaignStatsSchema = z
  .object({
    object: z.literal("campaign_stats"),
    campaign_id: z.string(),
    recipients: count("Deliveries the campaign's sends created (one per recipient)."),
    queued: count("Deliveries not handed over yet."),
    sent: count("Handed to the provider, no delivery report yet."),
    delivered: count("Reported delivered by the provider."),
    bounced: count("Reported bounced (any bounce type)."),
    complained: count("Reported as spam by the recipient."),
    failed: count("Ended without a delivery the service knows of: rejected, inactive recipient, retries exhausted, or `outcome_unknown` (in a request the provider may have taken, never sent again)."),
    opened: count("Deliveries opened at least once."),
    clicked: count("Deliveries with at least one click."),
    unsubscribed: count("Recipients who used this campaign's unsubscribe link."),
  })
  .openapi("CampaignStats");

export type CampaignStats = z.infer<typeof CampaignStatsSchema>;
