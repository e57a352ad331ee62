import { apiRoute } from "../lib/route";
import { dataResponse, pageEnvelope, WorkspaceParams } from "../lib/schemas";
import { EventParams, EventSchema, ListEventsQuery } from "./events.schemas";

export const listEvents = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/events",
  tags: ["Events"],
  summary: "List events",
  description:
    "The event log, newest first: every change webhook endpoints are told about (and `webhook.test` events), whether or not an endpoint received it, for 30 days (then it and its endpoints' finished attempts are deleted). `type` combines with the cursor.",
  scope: "webhooks:read",
  request: { params: WorkspaceParams, query: ListEventsQuery },
  responses: {
    200: { description: "A page of events", content: { "application/json": { schema: pageEnvelope(EventSchema) } } },
  },
});

export const getEvent = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/events/{event_id}",
  tags: ["Events"],
  summary: "Retrieve an event",
  description: "An event of the last 30 days; an older one is a 404 `not_found`.",
  scope: "webhooks:read",
  request: { params: EventParams },
  responses: { 200: dataResponse("The event", EventSchema) },
});
