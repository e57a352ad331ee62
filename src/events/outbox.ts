import { type SQL, sql } from "drizzle-orm";
import { createDb, type Db } from "../db/client";
import { events, type eventTypes } from "../db/schema";
import { resources, type ResourceKind, snapshotJson } from "../idempotency/resources";
import type { WebhookMessage } from "../webhooks/messages";

// The outbox: an event is a row of `events`, inserted by a statement of the same D1 batch as the
// change it reports, so the two commit together or not at all. Dispatch to webhook endpoints happens
// after the commit (a queue message per event); the cron sweeper dispatches what a crash left behind.

export type EventType = (typeof eventTypes)[number];

export type EventSpec = {
  /** The type, or SQL choosing it from the row (e.g. `campaign.sent` or `campaign.failed`). */
  type: EventType | SQL;
  /** The resource the event carries as `data.object`: the row `id` of this kind, as the batch leaves it. */
  resource: ResourceKind;
  id: string;
};

/**
 * `INSERT INTO events SELECT … FROM <resource table> WHERE id = ? AND <when>`: the event, with a
 * snapshot of the row taken by the same SQL the Idempotency-Key records use, written only when `when`
 * holds. The default, `changes() > 0`, means "iff the statement just before changed something".
 * Usable in any batch: drizzle's (HTTP writes, through `commit`) or raw D1 (`eventPrepared`).
 */
export type EventStatementSpec = EventSpec & {
  eventId: string;
  now: number;
  when?: SQL;
  /** Set for an event that goes to one endpoint only (`webhook.test`), so nothing dispatches it. */
  dispatchedAt?: number;
};

export const eventStatement = (db: Db, spec: EventStatementSpec) => {
  const table = resources[spec.resource].table;
  // Columns in the table's order: id, workspace_id, type, resource, resource_id, snapshot, created_at, dispatched_at.
  return db.insert(events).select(sql`
    SELECT ${spec.eventId}, workspace_id, ${spec.type}, ${spec.resource}, ${spec.id}, ${snapshotJson(spec.resource)}, ${spec.now}, ${spec.dispatchedAt ?? null}
      FROM ${table} WHERE id = ${spec.id} AND (${spec.when ?? sql`changes() > 0`})`);
};

/** Event statements made for raw D1 batches, by event id: `withOutbox` dispatches those that inserted. */
const preparedEvents = new WeakMap<D1PreparedStatement, string>();

/** `eventStatement` for a raw D1 batch (the send pipeline's). */
export const eventPrepared = (d1: D1Database, spec: EventStatementSpec) => {
  const query = eventStatement(createDb(d1), spec).toSQL();
  const statement = d1.prepare(query.sql).bind(...query.params);
  preparedEvents.set(statement, spec.eventId);
  return statement;
};

/** Hands events to the webhook queue; never throws (the sweeper dispatches what this could not). */
export const enqueueDispatch = async (queue: Queue, eventIds: string[]): Promise<void> => {
  if (eventIds.length === 0) return;
  try {
    await queue.sendBatch(eventIds.map((id) => ({ body: { type: "dispatch", event_id: id } satisfies WebhookMessage })));
  } catch (err) {
    console.error(
      JSON.stringify({
        level: "error",
        event: "webhook_dispatch_enqueue_failed",
        event_ids: eventIds,
        error: err instanceof Error ? err.message : String(err),
      }),
    );
  }
};

/**
 * The send pipeline's D1 handle: the same database, whose `batch` enqueues the dispatch of every
 * event (made with `eventPrepared`) that the batch wrote, once it has committed. The pipeline's
 * repositories write events in their own batches and need not know about the queue.
 */
export const withOutbox = (d1: D1Database, queue: Queue): D1Database =>
  new Proxy(d1, {
    get(target, property) {
      if (property === "batch") {
        return async <T>(statements: D1PreparedStatement[]) => {
          const results = await target.batch<T>(statements);
          const written: string[] = [];
          statements.forEach((statement, i) => {
            const id = preparedEvents.get(statement);
            if (id !== undefined && (results[i]?.meta.changes ?? 0) > 0) written.push(id);
          });
          await enqueueDispatch(queue, written);
          return results;
        };
      }
      const value: unknown = Reflect.get(target, property);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
