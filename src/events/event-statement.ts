import { type SQL, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { events, type eventTypes, webhookEndpoints } from "../db/schema";
import { resources, type ResourceKind, snapshotJson } from "../idempotency/resources";
import { endpointTakes } from "../webhooks/endpoint-match";

// One event as one SQL statement: INSERT … SELECT from the resource's own row, guarded by a condition
// evaluated inside the batch, so the event exists iff the change it reports committed.

export type EventType = (typeof eventTypes)[number];

export type EventSpec = {
  /** The type, or SQL choosing it from the row (e.g. `campaign.sent` or `campaign.failed`). */
  type: EventType | SQL;
  /** The resource the event carries as `data.object`: the row `id` of this kind, as the batch leaves it. */
  resource: ResourceKind;
  /** The row's id, or SQL finding it inside the batch (a provider webhook knows only its message id). */
  id: string | SQL;
};

/**
 * `INSERT INTO events SELECT … FROM <resource table> WHERE id = ? AND <when>`: the event, with a
 * snapshot of the row taken by the same SQL the Idempotency-Key records use, written only when `when`
 * holds. The default, `changes() > 0`, means "iff the statement just before changed something".
 * Usable in any batch: drizzle's (HTTP writes, through `commit`) or raw D1 (`outboxStatement`).
 */
export type EventStatementSpec = EventSpec & {
  eventId: string;
  now: number;
  when?: SQL;
  /** Set for an event that goes to one endpoint only (`webhook.test`), so nothing dispatches it. */
  dispatchedAt?: number;
};

/**
 * The event is born dispatched (nothing to hand to the webhook queue) unless an enabled endpoint of
 * its workspace takes its type, as the batch sees the endpoints: most workspaces have none, and
 * their writes then cost no queue message and no dispatch step. An endpoint created after the event
 * was never owed it.
 */
export const bornDispatched = (table: SQL, type: EventType | SQL, now: number) => sql`
  CASE WHEN EXISTS (
    SELECT 1 FROM ${webhookEndpoints} e WHERE e.workspace_id = ${table}.workspace_id AND ${endpointTakes("e", type)}
  ) THEN NULL ELSE ${now} END`;

export const eventStatement = (db: Db, spec: EventStatementSpec) => {
  const table = resources[spec.resource].table;
  const dispatchedAt = spec.dispatchedAt ?? bornDispatched(sql`${table}`, spec.type, spec.now);
  // Columns in the table's order: id, workspace_id, type, resource, resource_id, snapshot, created_at, dispatched_at.
  // What it returns says whether the event still needs its dispatch (`undispatchedIn`).
  return db
    .insert(events)
    .select(
      sql`
    SELECT ${spec.eventId}, workspace_id, ${spec.type}, ${spec.resource}, id, ${snapshotJson(spec.resource)}, ${spec.now}, ${dispatchedAt}
      FROM ${table} WHERE id = ${spec.id} AND (${spec.when ?? sql`changes() > 0`})`,
    )
    .returning({ id: events.id, dispatchedAt: events.dispatchedAt });
};

/**
 * Whether an event statement's result (drizzle's rows, or a raw D1 result) holds an event that was
 * written and still needs its dispatch.
 */
export const undispatchedIn = (result: unknown): boolean => {
  const rows = Array.isArray(result) ? result : (result as { results?: unknown[] } | undefined)?.results;
  return (rows ?? []).some((row) => {
    const r = row as { dispatchedAt?: number | null; dispatched_at?: number | null };
    return (r.dispatchedAt ?? r.dispatched_at ?? null) === null;
  });
};

