import { notFound } from "../errors/api-error";
import { createRouter } from "../lib/create-app";
import { envelope, listPage } from "../lib/http";
import { findEvent, listEventsPage } from "./events.repository";
import { getEvent, listEvents } from "./events.routes";
import { serializeEvent } from "./events.schemas";

export const eventsRouter = createRouter()
  .openapi(listEvents, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const { limit, after, type } = c.req.valid("query");
    const request = { list: `events:${workspace_id}`, filters: { type }, after, limit };
    const page = await listPage(c, request, (position, take) => listEventsPage(c.var.db, workspace_id, type, position, take), serializeEvent);
    return c.json(page, 200);
  })
  .openapi(getEvent, async (c) => {
    const { workspace_id, event_id } = c.req.valid("param");
    const row = await findEvent(c.var.db, workspace_id, event_id);
    if (!row) throw notFound("event", event_id);
    return c.json(envelope(serializeEvent(row)), 200);
  });
