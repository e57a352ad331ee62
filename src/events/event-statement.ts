import { type SQL, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { events, type eventTypes } from "../db/schema";
import { resources, type ResourceKind, snapshotJson } from "../idempotency/resources";

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
    SELECT ${spec.eventId}, workspace_id, ${spec.type}, ${spec.resource}, id, ${snapshotJson(spec.resource)}, ${spec.now}, ${spec.dispatchedAt ?? null}
      FROM ${table} WHERE id = ${spec.id} AND (${spec.when ?? sql`changes() > 0`})`);
};

