import { type OpenAPIHono, z } from "@hono/zod-openapi";
import type { AppEnv } from "../lib/types";
import { eventFamilies, familyData } from "./events.schemas";
import { isoDateTime } from "../lib/schemas";

/** What an endpoint receives for an event of `family` (its `type` narrowed to `types`). */
const payloadOf = <F extends (typeof eventFamilies)[number]>(family: F, types: readonly [string, ...string[]] = family.types) =>
  z.object({
    type: z.enum(types).openapi({ description: "The event type." }),
    timestamp: isoDateTime.openapi({ description: "When the change happened (the event's `created_at`)." }),
    data: familyData(family),
  });

/**
 * Every delivery body, told apart by `type` (component `WebhookPayload`): a receiver types what it
 * verified with one name and narrows `data.object` by checking `type`.
 */
const WebhookPayloadSchema = z
  .discriminatedUnion("type", eventFamilies.map((family) => payloadOf(family).openapi(`${family.name}WebhookPayload`)) as unknown as [
    ReturnType<typeof payloadOf>,
    ...ReturnType<typeof payloadOf>[],
  ])
  .openapi("WebhookPayload", {
    description: "The body of every webhook delivery: `{type, timestamp, data: {object}}`, the event id being the `webhook-id` header.",
  });

const DeliveryHeaders = z.object({
  "webhook-id": z.string().openapi({ description: "The event id (`evt_…`): the same on every retry, so a duplicate is recognised.", example: "evt_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
  "webhook-timestamp": z.string().openapi({ description: "Unix seconds when this try was signed.", example: "1732368000" }),
  "webhook-signature": z.string().openapi({
    description:
      "`v1,<base64 HMAC-SHA256 of \"{webhook-id}.{webhook-timestamp}.{body}\">` with the endpoint's secret (Standard Webhooks); for 24 h after a rotation, a second signature with the replaced secret, space-separated.",
  }),
});

/**
 * The document's `webhooks`: what a webhook endpoint receives for each event type, so a generated
 * client types the bodies it verifies as it types `GET /events`.
 */
export const describeWebhooks = (app: OpenAPIHono<AppEnv>) => {
  app.openAPIRegistry.register("WebhookPayload", WebhookPayloadSchema);
  for (const family of eventFamilies) for (const type of family.types) {
    app.openAPIRegistry.registerWebhook({
      method: "post",
      path: type,
      summary: `The ${type} event`,
      operationId: `${type.replace(/\.(\w)/g, (_, ch: string) => ch.toUpperCase())}Webhook`,
      // No credential: the receiver verifies the signature headers.
      security: [],
      description:
        type === "webhook.test"
          ? "Sent by `POST /webhook_endpoints/{endpoint_id}/test` to that endpoint alone; `data.object` is the endpoint."
          : `Sent to every enabled endpoint whose \`events\` include \`${type}\` (or \`*\`); \`data.object\` is the resource as the change left it, as \`GET /events/{event_id}\` shows it.`,
      tags: ["Events"],
      request: {
        headers: DeliveryHeaders,
        body: {
          required: true,
          content: {
            "application/json": {
              schema: payloadOf(family, [type]),
            },
          },
        },
      },
      responses: {
        200: { description: "Any 2xx acknowledges it. Anything else, a redirect, or no answer within 10 s is retried (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), then the attempt is failed." },
      },
    });
  }
};
