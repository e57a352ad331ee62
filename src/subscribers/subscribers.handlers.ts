import { AGAIN, commit, writeExplained } from "../db/commit";
import { ApiError, invalidParam, notFound } from "../errors/api-error";
import { createRouter } from "../lib/create-app";
import { envelope, listPage } from "../lib/http";
import { newId } from "../lib/ids";
import { emailKey } from "../lib/email";
import { TAGS_MAX } from "../lib/schemas";
import {
  findSubscriber,
  findSubscriberIdByEmail,
  insertSubscriber,
  listSubscribersPage,
  editedTags,
  givenValues,
  holdsAllChanges,
  subscriberUpdateEvents,
  type SubscriberChanges,
  updateSubscriber,
} from "./subscribers.repository";
import { askToConfirm } from "../consent/confirmation-mail";
import { confirmationMessageRecord } from "../consent/confirmation.repository";
import { createSubscriber, createSubscriberBatch, getSubscriber, listSubscribers, requestConfirmation, updateSubscriber as updateRoute } from "./subscribers.routes";
import { serializeSubscriber, type serializeSubscriberBatch } from "./subscribers.schemas";
import { subscriberBatchStatements } from "./subscribers.batch";
import { enqueueDispatch } from "../events/outbox";
import { serializeComposite } from "../idempotency/resources";

const emailTaken = (email: string, existingId: string | undefined) =>
  new ApiError("subscriber_exists", `A subscriber with email ${email} already exists in this workspace`, {
    param: "email",
    details: [{ param: "email", message: "email is already in use", subscriber_id: existingId }],
  });

export const subscribersRouter = createRouter()
  .openapi(createSubscriber, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = Date.now();
    const id = newId("subscriber", now);
    const [[row]] = await commit(c, [insertSubscriber(c.var.db, {
      id,
      workspaceId: workspace_id,
      email: body.email,
      emailKey: emailKey(body.email),
      name: body.name ?? null,
      status: body.status,
      tags: body.tags ?? [],
      location: body.location ?? null,
      source: body.source ?? null,
      createdAt: now,
      updatedAt: now,
    })], { status: 201, resource: "subscriber", id }, { events: [{ type: "subscriber.created", resource: "subscriber", id }] });
    if (!row) throw emailTaken(body.email, (await findSubscriberIdByEmail(c.var.db, workspace_id, body.email))?.id);
    return c.json(envelope(serializeSubscriber(row)), 201);
  })
  .openapi(createSubscriberBatch, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const batch = subscriberBatchStatements(c.var.db, workspace_id, body.subscribers, Date.now());
    const results = await commit(c, batch.statements, { status: 200, composite: "subscriber_batch", elements: batch.elements });
    const { elements, undispatched } = batch.read(results);
    // Its events are written by the batch's own statement (not commit's list): their dispatch is handed over here.
    if (undispatched.length > 0) c.executionCtx.waitUntil(enqueueDispatch(c.env.WEBHOOK_QUEUE, undispatched));
    return c.json(envelope(serializeComposite("subscriber_batch", elements) as ReturnType<typeof serializeSubscriberBatch>), 200);
  })
  .openapi(getSubscriber, async (c) => {
    const { workspace_id, subscriber_id } = c.req.valid("param");
    const row = await findSubscriber(c.var.db, workspace_id, subscriber_id);
    if (!row) throw notFound("subscriber", subscriber_id);
    return c.json(envelope(serializeSubscriber(row)), 200);
  })
  .openapi(updateRoute, async (c) => {
    const { workspace_id, subscriber_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const changes: SubscriberChanges = { updatedAt: Date.now() };
    if (body.email !== undefined) Object.assign(changes, { email: body.email, emailKey: emailKey(body.email) });
    if (body.name !== undefined) changes.name = body.name;
    if (body.tags !== undefined) changes.tags = body.tags;
    if (body.location !== undefined) changes.location = body.location;
    if (body.source !== undefined) changes.source = body.source;
    if (body.status !== undefined) changes.status = body.status;
    const events = subscriberUpdateEvents(subscriber_id, body.status);
    const tagEdit = body.add_tags !== undefined || body.remove_tags !== undefined ? { add: body.add_tags ?? [], remove: body.remove_tags ?? [] } : undefined;
    const given = givenValues(changes);
    return writeExplained(async () => {
      const [[row]] = await commit(
        c,
        [updateSubscriber(c.var.db, workspace_id, subscriber_id, changes, tagEdit)],
        { status: 200, resource: "subscriber", id: subscriber_id },
        { events },
      );
      if (row) return c.json(envelope(serializeSubscriber(row)), 200);
      // Nothing written: say why (no such subscriber, the email is another's, too many tags), or,
      // when every value given is already there, answer the subscriber as it is.
      const current = await findSubscriber(c.var.db, workspace_id, subscriber_id);
      if (!current) throw notFound("subscriber", subscriber_id);
      if (body.email !== undefined) {
        const owner = (await findSubscriberIdByEmail(c.var.db, workspace_id, body.email))?.id;
        if (owner !== undefined && owner !== subscriber_id) throw emailTaken(body.email, owner);
      }
      const tags = tagEdit && editedTags(current.tags, tagEdit);
      if (tags && tags.length > TAGS_MAX) {
        const message = `add_tags would give the subscriber more than ${TAGS_MAX} tags (it has ${current.tags.length})`;
        throw invalidParam("add_tags", message);
      }
      return holdsAllChanges(current, given, tags) ? c.json(envelope(serializeSubscriber(current)), 200) : AGAIN;
    });
  })
  .openapi(listSubscribers, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const { limit, after, ...filter } = c.req.valid("query");
    const request = { list: `subscribers:${workspace_id}`, filters: filter, after, limit };
    const page = await listPage(c, request, (position, take) => listSubscribersPage(c.var.db, workspace_id, filter, position, take), serializeSubscriber);
    return c.json(page, 200);
  })
  .openapi(requestConfirmation, async (c) => {
    const { workspace_id, subscriber_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const asked = await askToConfirm(c, workspace_id, subscriber_id, {
      newsletterId: body.newsletter_id,
      send: body.send ?? true,
      integrationSlug: body.integration_slug ?? undefined,
    });
    const answer = envelope(asked.answer);
    // A mail Resend took is recorded (its feedback then reaches the subscriber), with the answer a
    // retry with the same Idempotency-Key gets, in one batch.
    const record =
      asked.feedbackId === undefined
        ? []
        : [confirmationMessageRecord(c.var.db, { providerMessageId: asked.feedbackId, workspaceId: workspace_id, subscriberId: subscriber_id, email: asked.answer.email, at: Date.now() })];
    await commit(c, record, { status: 200, body: answer, always: true });
    return c.json(answer, 200);
  });
