import { z } from "@hono/zod-openapi";
import { CampaignSchema } from "../campaigns/campaigns.schemas";
import { eventTypes, type events } from "../db/schema";
import { DeliverySchema } from "../operations/operations.schemas";
import { SubscriberSchema } from "../subscribers/subscribers.schemas";
import { EndpointSchema } from "../webhooks/endpoints.schemas";
import { type ResourceKind, rowFromSnapshot, serializeResource } from "../idempotency/resources";
import { afterQuery, idParam, isoDateTime, limitQuery, queryEnum, WorkspaceParams } from "../lib/schemas";
import { iso } from "../lib/time";

export const EventParams = WorkspaceParams.extend({ event_id: idParam("event", "event_id") });

export const ListEventsQuery = z.strictObject({
  limit: limitQuery,
  after: afterQuery,
  type: queryEnum(eventTypes).optional().openapi({ description: "Only events of this type." }),
});

export const EventSchema = z
  .object({
    id: z.string().openapi({ example: "evt_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("event"),
    type: z.enum(eventTypes),
    created_at: isoDateTime,
    data: z.object({
      object: z.union([SubscriberSchema, CampaignSchema, DeliverySchema, EndpointSchema]).openapi({
        description:
          "The resource as the API shows it, as the change left it: a subscriber (`subscriber.*`), a campaign (`campaign.*`), a delivery (`delivery.*`) or the endpoint (`webhook.test`).",
      }),
    }),
  })
  .openapi("Event");

export type EventRow = typeof events.$inferSelect;

/** The resource an event carries, as the API shows it: its snapshot through the resource's serializer. */
export const eventObject = (event: Pick<EventRow, "resource" | "snapshot">): Record<string, unknown> => {
  const kind = event.resource as ResourceKind;
  return serializeResource(kind, rowFromSnapshot(kind, JSON.parse(event.snapshot) as Record<string, unknown>)) as Record<string, unknown>;
};

export const serializeEvent = (row: EventRow): z.infer<typeof EventSchema> => ({
  id: row.id,
  object: "event",
  type: row.type,
  created_at: iso(row.createdAt),
  data: { object: eventObject(row) as z.infer<typeof EventSchema>["data"]["object"] },
});
