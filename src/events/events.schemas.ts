import type { EventType } from "./event-statement";
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

/** The event types of one resource family (`subscriber.`…), as a tuple for z.enum. */
const typesOf = <P extends string>(prefix: P) =>
  eventTypes.filter((type): type is Extract<EventType, `${P}${string}`> => type.startsWith(prefix)) as [
    Extract<EventType, `${P}${string}`>,
    ...Extract<EventType, `${P}${string}`>[],
  ];

/**
 * The resource families events are about: the types of each, the schema of the resource its
 * `data.object` carries, and the component names of its event and of its webhook delivery.
 */
export const eventFamilies = [
  { name: "Subscriber", types: typesOf("subscriber."), resource: SubscriberSchema, what: "The subscriber" },
  { name: "Campaign", types: typesOf("campaign."), resource: CampaignSchema, what: "The campaign" },
  { name: "Delivery", types: typesOf("delivery."), resource: DeliverySchema, what: "The delivery" },
  { name: "WebhookTest", types: typesOf("webhook."), resource: EndpointSchema, what: "The endpoint tested" },
] as const;

type Family = (typeof eventFamilies)[number];

/**
 * `data` of a family's events. (Described on `data`: a description given to the resource's own
 * schema would replace its component's, which the resource routes answer with too.)
 */
export const familyData = (family: Family) =>
  z.object({ object: family.resource }).openapi({ description: `\`object\`: ${family.what.replace(/^The/, "the")} as the API shows it, as the change left it.` });

/** An event of `family` as `GET /events` shows it. */
const eventOf = <F extends Family>(family: F) =>
  z
    .object({
      id: z.string().openapi({ example: "evt_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
      object: z.literal("event"),
      type: z.enum(family.types),
      created_at: isoDateTime,
      data: familyData(family),
    })
    .openapi(`${family.name}Event`);

/**
 * One schema per resource family, told apart by `type`: a generated client narrows an event's
 * `data.object` by checking its `type`.
 */
export const EventSchema = z
  .discriminatedUnion("type", [eventOf(eventFamilies[0]), eventOf(eventFamilies[1]), eventOf(eventFamilies[2]), eventOf(eventFamilies[3])])
  .openapi("Event");

export type EventRow = typeof events.$inferSelect;

/** The resource an event carries, as the API shows it: its snapshot through the resource's serializer. */
export const eventObject = (event: Pick<EventRow, "resource" | "snapshot">): Record<string, unknown> => {
  const kind = event.resource as ResourceKind;
  return serializeResource(kind, rowFromSnapshot(kind, JSON.parse(event.snapshot) as Record<string, unknown>)) as Record<string, unknown>;
};

export const serializeEvent = (row: EventRow): z.infer<typeof EventSchema> =>
  // The row's type names its resource family, so the pair fits one of the union's members.
  ({
    id: row.id,
    object: "event",
    type: row.type,
    created_at: iso(row.createdAt),
    data: { object: eventObject(row) },
  }) as z.infer<typeof EventSchema>;
