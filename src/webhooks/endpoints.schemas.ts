import { z } from "@hono/zod-openapi";
import { eventTypes, type webhookEndpoints } from "../db/schema";
import { afterQuery, bodyString, idParam, isoDateTime, limitQuery, optionalText, somethingToChange, WorkspaceParams } from "../lib/schemas";
import { iso } from "../lib/time";
import { webhookUrlPattern } from "../lib/text-patterns";
import { URL_MAX_LENGTH, urlShapeProblem } from "./url-rules";

export const MAX_ENDPOINTS_PER_WORKSPACE = 20;

/** What an endpoint can subscribe to (`webhook.test` goes to the endpoint being tested, whatever it lists). */
const subscribableTypes = eventTypes.filter((t) => t !== "webhook.test");

export const EndpointParams = WorkspaceParams.extend({ endpoint_id: idParam("webhook_endpoint", "endpoint_id") });

const endpointUrl = bodyString()
  .max(URL_MAX_LENGTH)
  .regex(new RegExp(webhookUrlPattern), { error: (issue) => urlShapeProblem(issue.input) })
  .openapi({
    format: "uri",
    description:
      "https to a host name, an IPv4 address or a bracketed IPv6 address; `http://localhost` and `http://127.0.0.1` (any port) are accepted for local development (a `PUBLIC_BASE_URL` that is itself local). On a deployed service (a public `PUBLIC_BASE_URL`), `localhost` and private, loopback, link-local, CGNAT, documentation and multicast addresses are rejected for every credential; in local development, a live credential may use loopback addresses but not the other non-public ones (host names are not resolved).",
    example: "https://example.com/webhooks/newsletter",
  });

const eventList = z
  .array(z.enum([...subscribableTypes, "*"], { error: `must be one of: ${[...subscribableTypes, "*"].join(", ")}` }))
  .min(1)
  .max(subscribableTypes.length + 1)
  // "*" anywhere means every type; repeats count once.
  .transform((list) => (list.includes("*") ? ["*"] : [...new Set(list)]))
  .openapi({ description: 'Event types to receive, or `["*"]` for all of them (a list holding `"*"` is stored as `["*"]`; repeats count once).', example: ["subscriber.unsubscribed", "campaign.sent"] });

export const CreateEndpointBody = z
  .strictObject({
    url: endpointUrl,
    events: eventList,
    description: optionalText(500),
    enabled: z.boolean().optional().openapi({ description: "Default `true`." }),
  })
  .openapi("CreateWebhookEndpointRequest", {
    example: { url: "https://example.com/webhooks/newsletter", events: ["subscriber.unsubscribed", "campaign.sent"], description: "CRM sync" },
  });

export const UpdateEndpointBody = somethingToChange(
  z.strictObject({
    url: endpointUrl.optional(),
    events: eventList.optional(),
    description: optionalText(500),
    enabled: z.boolean().optional(),
  }),
).openapi("UpdateWebhookEndpointRequest", { minProperties: 1, example: { enabled: false } });

export const ListEndpointsQuery = z.strictObject({ limit: limitQuery, after: afterQuery });

const endpointFields = {
  id: z.string().openapi({ example: "we_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
  object: z.literal("webhook_endpoint"),
  url: z.string(),
  events: z.array(z.enum([...subscribableTypes, "*"])).openapi({ description: 'The event types it receives, or `["*"]` for all of them.' }),
  description: z.string().nullable(),
  enabled: z.boolean(),
  created_at: isoDateTime,
  updated_at: isoDateTime,
};

export const EndpointSchema = z.object(endpointFields).openapi("WebhookEndpoint");

export const EndpointWithSecretSchema = z
  .object({
    ...endpointFields,
    secret: z.string().openapi({
      description: "`whsec_` + base64 of 32 random bytes: the Standard Webhooks signing secret. Shown only here.",
      example: "whsec_CzBVep/E6Q4zWH2ix+wRNluApcrvFDleg6jN8hc8YYY=",
    }),
  })
  .openapi("WebhookEndpointWithSecret");

export const DeletedEndpointSchema = z
  .object({ id: z.string(), object: z.literal("webhook_endpoint"), deleted: z.literal(true) })
  .openapi("DeletedWebhookEndpoint");

type Row = typeof webhookEndpoints.$inferSelect;

export const serializeEndpoint = (row: Row): z.infer<typeof EndpointSchema> => ({
  id: row.id,
  object: "webhook_endpoint",
  url: row.url,
  events: row.events as z.infer<typeof EndpointSchema>["events"],
  description: row.description,
  enabled: row.enabled,
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
});

export const serializeEndpointWithSecret = (row: Row): z.infer<typeof EndpointWithSecretSchema> => ({
  ...serializeEndpoint(row),
  secret: row.secret,
});

export const serializeDeletedEndpoint = (row: Row): z.infer<typeof DeletedEndpointSchema> => ({
  id: row.id,
  object: "webhook_endpoint",
  deleted: true,
});
