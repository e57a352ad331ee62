import { logError } from "../lib/log";
import type { Context } from "hono";
import type { AppEnv } from "../lib/types";
import { createDb } from "../db/client";
import { chunksOf, QUEUE_BATCH_MAX } from "../lib/chunks";
import { newId } from "../lib/ids";
import type { WebhookMessage } from "../webhooks/messages";
import { type EventSpec, type EventStatementSpec, eventStatement, undispatchedIn } from "./event-statement";

// The outbox: an event is a row of `events`, inserted by a statement of the same D1 batch as the
// change it reports, so the two commit together or not at all. Dispatch to webhook endpoints happens
// after the commit (a queue message per event); the cron sweeper dispatches what a crash left behind.

/** Event statements made for raw D1 batches, by event id: `dispatchWritten` dispatches those that inserted. */
const preparedEvents = new WeakMap<D1PreparedStatement, string>();

const prepared = (d1: D1Database, query: { sql: string; params: unknown[] }) => d1.prepare(query.sql).bind(...query.params);

/** `eventStatement` for a raw D1 batch. */
const eventPrepared = (d1: D1Database, spec: EventStatementSpec) => {
  const statement = prepared(d1, eventStatement(createDb(d1), spec).toSQL());
  preparedEvents.set(statement, spec.eventId);
  return statement;
};

/**
 * The outbox for any raw D1 batch (the send pipeline, the unsubscribe pages, provider webhooks): the
 * statement to place RIGHT AFTER the statement that makes the change. The event is written iff that
 * statement changed a row (`changes() > 0`). Run the batch through
 * `withOutbox(...).batch`, or call `dispatchWritten` with its results, so the written event reaches
 * the webhook queue. Several events after one change chain: each placed right after the one before
 * is written iff that one was (conditions that must not break the chain take the marks `commit` uses,
 * src/events/write-events.ts).
 *
 *   const event = outboxStatement(d1, { type: "subscriber.bounced", resource: "subscriber", id }, now);
 *   const results = await d1.batch([markBounced, event, ...rest]);
 *   ctx.waitUntil(dispatchWritten(env.WEBHOOK_QUEUE, [markBounced, event, ...rest], results));
 */
export const outboxStatement = (d1: D1Database, event: EventSpec, now: number): D1PreparedStatement =>
  eventPrepared(d1, { ...event, eventId: newId("event", now), now });

/** Hands events to the webhook queue; never throws (the sweeper dispatches what this could not). */
export const enqueueDispatch = async (queue: Queue, eventIds: string[]): Promise<void> => {
  // A batch of subscribers writes up to 1,000 events: each part that cannot be sent is logged, the rest still go.
  for (const chunk of chunksOf(eventIds, QUEUE_BATCH_MAX)) {
    try {
      await queue.sendBatch(chunk.map((id) => ({ body: { type: "dispatch", event_id: id } satisfies WebhookMessage })));
    } catch (err) {
      logError("webhook_dispatch_enqueue_failed", { event_ids: chunk }, err);
    }
  }
};

/**
 * After a raw batch commits: enqueues the dispatch of each event statement of it that inserted its
 * row, unless the event was born dispatched (no endpoint takes it).
 */
export const dispatchWritten = (queue: Queue, statements: readonly D1PreparedStatement[], results: readonly D1Result[]) => {
  const written: string[] = [];
  statements.forEach((statement, i) => {
    const id = preparedEvents.get(statement);
    if (id !== undefined && undispatchedIn(results[i])) written.push(id);
  });
  return enqueueDispatch(queue, written);
};

/**
 * A D1 handle whose `batch` dispatches, once the batch has committed, every event (made with
 * `outboxStatement`) that it wrote: the send pipeline's repositories and the
 * unsubscribe pages write events in their own batches and need not know about the queue. With
 * `waitUntil`, the enqueue runs beside the answer instead of before it.
 */
export const withOutbox = (d1: D1Database, queue: Queue, waitUntil?: (promise: Promise<unknown>) => void): D1Database =>
  new Proxy(d1, {
    get(target, property) {
      if (property === "batch") {
        return async <T>(statements: D1PreparedStatement[]) => {
          const results = await target.batch<T>(statements);
          const dispatch = dispatchWritten(queue, statements, results);
          if (waitUntil) waitUntil(dispatch);
          else await dispatch;
          return results;
        };
      }
      const value: unknown = Reflect.get(target, property);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });

/** An HTTP request's D1 (counted in its Server-Timing) as an outbox: written events are dispatched beside the answer. */
export const requestOutbox = (c: Context<AppEnv>): D1Database =>
  withOutbox(c.var.db.$client, c.env.WEBHOOK_QUEUE, (promise) => c.executionCtx.waitUntil(promise));
