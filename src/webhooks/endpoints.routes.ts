import { apiRoute } from "../lib/route";
import { dataResponse, noBody, pageEnvelope, WorkspaceParams } from "../lib/schemas";
import { AttemptSchema, ListAttemptsQuery } from "./attempts.schemas";
import {
  CreateEndpointBody,
  DeletedEndpointSchema,
  EndpointParams,
  EndpointSchema,
  EndpointWithSecretSchema,
  ListEndpointsQuery,
  MAX_ENDPOINTS_PER_WORKSPACE,
  UpdateEndpointBody,
} from "./endpoints.schemas";

const base = "/workspaces/{workspace_id}/webhook_endpoints";
const tags = ["Webhooks"];

export const createEndpoint = apiRoute({
  errorCodes: { 409: ["webhook_endpoint_limit_reached"] },
  method: "post",
  path: base,
  tags,
  summary: "Create a webhook endpoint",
  description: `Events of the listed types are POSTed to \`url\`, signed per Standard Webhooks with \`secret\` (shown in this answer and after rotate_secret only). At most ${MAX_ENDPOINTS_PER_WORKSPACE} endpoints per workspace: one more is a 409 \`webhook_endpoint_limit_reached\`.`,
  scope: "webhooks:write",
  idempotent: true,
  request: { params: WorkspaceParams, body: { required: true, content: { "application/json": { schema: CreateEndpointBody } } } },
  responses: { 201: dataResponse("The new endpoint, with its secret", EndpointWithSecretSchema) },
});

export const listEndpoints = apiRoute({
  method: "get",
  path: base,
  tags,
  summary: "List webhook endpoints",
  description: "Newest first.",
  scope: "webhooks:read",
  request: { params: WorkspaceParams, query: ListEndpointsQuery },
  responses: {
    200: { description: "A page of endpoints", content: { "application/json": { schema: pageEnvelope(EndpointSchema) } } },
  },
});

export const getEndpoint = apiRoute({
  method: "get",
  path: `${base}/{endpoint_id}`,
  tags,
  summary: "Retrieve a webhook endpoint",
  scope: "webhooks:read",
  request: { params: EndpointParams },
  responses: { 200: dataResponse("The endpoint", EndpointSchema) },
});

export const updateEndpoint = apiRoute({
  method: "patch",
  path: `${base}/{endpoint_id}`,
  tags,
  summary: "Update a webhook endpoint",
  description: "Any of `url`, `events`, `description`, `enabled`. Disabling stops its pending deliveries at their next try.",
  scope: "webhooks:write",
  idempotent: true,
  request: { params: EndpointParams, body: { required: true, content: { "application/json": { schema: UpdateEndpointBody } } } },
  responses: { 200: dataResponse("The endpoint", EndpointSchema) },
});

export const deleteEndpoint = apiRoute({
  method: "delete",
  path: `${base}/{endpoint_id}`,
  tags,
  summary: "Delete a webhook endpoint",
  description: "It receives nothing more: its pending deliveries end `failed`. It is no longer listed nor counted.",
  scope: "webhooks:write",
  // No parameters, as the actions below: a body that says something is refused, not ignored.
  request: { params: EndpointParams, body: noBody },
  responses: { 200: dataResponse("The deleted endpoint", DeletedEndpointSchema) },
});

/** These actions take no parameters: the body is empty, or `{}` (anything in it is an unknown parameter). */
export const rotateSecret = apiRoute({
  method: "post",
  path: `${base}/{endpoint_id}/rotate_secret`,
  tags,
  summary: "Rotate a webhook endpoint secret",
  description:
    "A new secret signs every try from now on, retries of earlier events included; for 24 hours the replaced one signs beside it (two signatures in `webhook-signature`), so a receiver can switch without dropping a delivery.",
  scope: "webhooks:write",
  idempotent: true,
  request: { params: EndpointParams, body: noBody },
  responses: { 200: dataResponse("The endpoint, with its new secret", EndpointWithSecretSchema) },
});

export const testEndpoint = apiRoute({
  method: "post",
  path: `${base}/{endpoint_id}/test`,
  tags,
  summary: "Send a test event to a webhook endpoint",
  description:
    "Sends a `webhook.test` event (its `data.object` is the endpoint) to this endpoint at once, whatever types it lists, and answers with the attempt (`pending`); its outcome shows in the attempts list.",
  scope: "webhooks:write",
  idempotent: true,
  request: { params: EndpointParams, body: noBody },
  responses: { 200: dataResponse("The attempt, pending: its first try is under way", AttemptSchema) },
});

export const listAttempts = apiRoute({
  method: "get",
  path: `${base}/{endpoint_id}/attempts`,
  tags,
  summary: "List a webhook endpoint attempts",
  description: "The delivery attempts to this endpoint, one per event, newest first.",
  scope: "webhooks:read",
  request: { params: EndpointParams, query: ListAttemptsQuery },
  responses: {
    200: { description: "A page of attempts", content: { "application/json": { schema: pageEnvelope(AttemptSchema) } } },
  },
});
