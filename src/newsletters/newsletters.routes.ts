import { apiRoute } from "../lib/route";
import { dataResponse, pageEnvelope, WorkspaceParams } from "../lib/schemas";
import { CreateNewsletterBody, ListNewslettersQuery, NewsletterParams, NewsletterSchema, UpdateNewsletterBody } from "./newsletters.schemas";

const one = (description: string) => dataResponse(description, NewsletterSchema);

export const createNewsletter = apiRoute({
  method: "post",
  path: "/workspaces/{workspace_id}/newsletters",
  tags: ["Newsletters"],
  summary: "Create a newsletter",
  description: "A newsletter names the sender (`from_email`, `from_name`, `reply_to`) its campaigns are sent as.",
  scope: "campaigns:write",
  idempotent: true,
  request: {
    params: WorkspaceParams,
    body: { required: true, content: { "application/json": { schema: CreateNewsletterBody } } },
  },
  responses: { 201: one("The new newsletter") },
});

export const getNewsletter = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/newsletters/{newsletter_id}",
  tags: ["Newsletters"],
  summary: "Retrieve a newsletter",
  scope: "campaigns:read",
  request: { params: NewsletterParams },
  responses: { 200: one("The newsletter") },
});

export const listNewsletters = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/newsletters",
  tags: ["Newsletters"],
  summary: "List newsletters",
  description: "Newest first.",
  scope: "campaigns:read",
  request: { params: WorkspaceParams, query: ListNewslettersQuery },
  responses: {
    200: {
      description: "A page of newsletters",
      content: { "application/json": { schema: pageEnvelope(NewsletterSchema) } },
    },
  },
});

export const updateNewsletter = apiRoute({
  method: "patch",
  path: "/workspaces/{workspace_id}/newsletters/{newsletter_id}",
  tags: ["Newsletters"],
  summary: "Update a newsletter",
  description: "Changes any of `name`, `from_name`, `from_email`, `reply_to`, `address` (at least one); campaigns not yet sent use the new values.",
  scope: "campaigns:write",
  idempotent: true,
  request: {
    params: NewsletterParams,
    body: { required: true, content: { "application/json": { schema: UpdateNewsletterBody } } },
  },
  responses: { 200: one("The updated newsletter") },
});
