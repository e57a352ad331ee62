import { providerUnavailable } from "../errors/openapi";
import { apiRoute } from "../lib/route";
import { dataResponse, pageEnvelope, WorkspaceParams } from "../lib/schemas";
import {
  ConfirmationSchema,
  CreateSubscriberBatchBody,
  CreateSubscriberBody,
  SUBSCRIBER_BATCH_MAX,
  SubscriberBatchSchema,
  RequestConfirmationBody,
  ListSubscribersQuery,
  SubscriberParams,
  SubscriberSchema,
  UpdateSubscriberBody,
} from "./subscribers.schemas";

const one = (description: string) => dataResponse(description, SubscriberSchema);

export const createSubscriber = apiRoute({
  errorCodes: { 409: ["subscriber_exists"] },
  method: "post",
  path: "/workspaces/{workspace_id}/subscribers",
  tags: ["Subscribers"],
  summary: "Create a subscriber",
  description: "Adds a subscriber. The email is unique per workspace, case-insensitively (409 `subscriber_exists`).",
  scope: "subscribers:write",
  idempotent: true,
  request: {
    params: WorkspaceParams,
    body: { required: true, content: { "application/json": { schema: CreateSubscriberBody } } },
  },
  responses: { 201: one("The new subscriber") },
});

/** Up to 1,000 subscribers with tags and names: about 350 KiB at most in practice; room to spare. */
const SUBSCRIBER_BATCH_BYTES = 1024 * 1024;

export const createSubscriberBatch = apiRoute({
  method: "post",
  path: "/workspaces/{workspace_id}/subscribers/batch",
  tags: ["Subscribers"],
  summary: "Create subscribers in a batch",
  description: `Creates up to ${SUBSCRIBER_BATCH_MAX} subscribers in one atomic write: each item as \`POST /subscribers\` takes it. An address that is a subscriber already is left as it is and answered as \`existing\` with that subscriber's id; every other item is \`created\` (with its \`subscriber.created\` event). All of it or nothing is written; a bad item is a 400 naming it (\`subscribers[3].email\`), and nothing is written. With an \`Idempotency-Key\`, a retry gets the first answer, so an interrupted import resumes safely.`,
  scope: "subscribers:write",
  idempotent: true,
  maxBodyBytes: SUBSCRIBER_BATCH_BYTES,
  request: {
    params: WorkspaceParams,
    body: { required: true, content: { "application/json": { schema: CreateSubscriberBatchBody } } },
  },
  responses: {
    200: dataResponse("What became of each item", SubscriberBatchSchema),
  },
});

export const getSubscriber = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/subscribers/{subscriber_id}",
  tags: ["Subscribers"],
  summary: "Retrieve a subscriber",
  scope: "subscribers:read",
  request: { params: SubscriberParams },
  responses: { 200: one("The subscriber") },
});

export const updateSubscriber = apiRoute({
  errorCodes: { 409: ["subscriber_exists"] },
  method: "patch",
  path: "/workspaces/{workspace_id}/subscribers/{subscriber_id}",
  tags: ["Subscribers"],
  summary: "Update a subscriber",
  description:
    "Changes the given fields, including the consent `status`. `null` clears name, location and source; `tags` replaces the whole list.",
  scope: "subscribers:write",
  idempotent: true,
  request: {
    params: SubscriberParams,
    body: { required: true, content: { "application/json": { schema: UpdateSubscriberBody } } },
  },
  responses: { 200: one("The updated subscriber") },
});

export const listSubscribers = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/subscribers",
  tags: ["Subscribers"],
  summary: "List subscribers",
  description: "Newest first. Filters combine with each other and with the cursor.",
  scope: "subscribers:read",
  request: { params: WorkspaceParams, query: ListSubscribersQuery },
  responses: {
    200: {
      description: "A page of subscribers",
      content: { "application/json": { schema: pageEnvelope(SubscriberSchema) } },
    },
  },
});

export const requestConfirmation = apiRoute({
  errorCodes: { 400: ["resource_missing", "unknown_integration", "integration_not_configured"], 409: ["subscriber_not_pending"] },
  method: "post",
  path: "/workspaces/{workspace_id}/subscribers/{subscriber_id}/confirmation",
  tags: ["Subscribers"],
  summary: "Request a subscriber confirmation",
  description:
    "Double opt-in: mails a `pending` subscriber a link, from the newsletter's sender, whose page confirms the subscription (`pending` → `active`, a `subscriber.updated` event); or, with `send: false`, only makes the link. Any other status is a 409 `subscriber_not_pending`. Test credentials deliver through `sandbox`. When the provider did not take the mail yet, the answer is a 503 `provider_unavailable` with `Retry-After`, not stored: the same request with the same Idempotency-Key tries again under the same provider key, so nobody gets two copies.",
  scope: "subscribers:write",
  idempotent: true,
  request: {
    params: SubscriberParams,
    body: { required: true, content: { "application/json": { schema: RequestConfirmationBody } } },
  },
  responses: {
    200: dataResponse("The link, and what came of mailing it", ConfirmationSchema),
    503: providerUnavailable,
  },
});
