import { sql } from "drizzle-orm";
import { createDb } from "../db/client";
import { idFloor, newId } from "../lib/ids";
import { endpointTakes } from "./endpoint-match";
import { RETRY_DELAYS_SECONDS } from "./messages";

// The delivery side of the outbox: an event's attempts (one per matching endpoint) and each try's
// outcome. Every write is conditional on the state it read, so duplicate queue messages (at-least-once
// delivery) never create a second attempt or count a try twice.

type DispatchEvent = { id: string; workspaceId: string; type: string; dispatchedAt: number | null };

export const findEventForDispatch = async (d1: D1Database, eventId: string): Promise<DispatchEvent | undefined> => {
  const row = await d1
    .prepare(`SELECT id, workspace_id, type, dispatched_at FROM events WHERE id = ?`)
    .bind(eventId)
    .first<{ id: string; workspace_id: string; type: string; dispatched_at: number | null }>();
  return row ? { id: row.id, workspaceId: row.workspace_id, type: row.type, dispatchedAt: row.dispatched_at } : undefined;
};

/** Endpoints of the workspace that take this type (`endpointTakes`). */
export const matchingEndpointIds = async (d1: D1Database, workspaceId: string, type: string): Promise<string[]> => {
  const rows = await createDb(d1).all<{ id: string }>(
    sql`SELECT e.id FROM webhook_endpoints e WHERE e.workspace_id = ${workspaceId} AND ${endpointTakes("e", type)}`,
  );
  return rows.map((r) => r.id);
};

/**
 * One attempt per endpoint (none where one exists: unique per endpoint and event; none for an
 * endpoint disabled or deleted meanwhile), and the event marked dispatched, in one batch. Returns
 * the attempts created here: only those need their first try enqueued.
 */
export const createAttempts = async (d1: D1Database, event: DispatchEvent, endpointIds: string[], now: number): Promise<string[]> => {
  const inserts = endpointIds.map((endpointId) =>
    d1
      .prepare(
        `INSERT INTO webhook_attempts (id, workspace_id, endpoint_id, event_id, status, attempts, next_attempt_at, created_at, updated_at)
         SELECT ?1, ?2, id, ?3, 'pending', 0, ?4, ?4, ?4 FROM webhook_endpoints WHERE id = ?5 AND enabled = 1 AND deleted_at IS NULL
         ON CONFLICT (endpoint_id, event_id) DO NOTHING RETURNING id`,
      )
      .bind(newId("webhook_attempt", now), event.workspaceId, event.id, now, endpointId),
  );
  const results = await d1.batch<{ id: string }>([
    ...inserts,
    d1.prepare(`UPDATE events SET dispatched_at = ?2 WHERE id = ?1 AND dispatched_at IS NULL`).bind(event.id, now),
  ]);
  return results.slice(0, inserts.length).flatMap((r) => r.results.map((row) => row.id));
};

/** What one try needs: the attempt, its endpoint and its event. */
export type TryContext = {
  attemptId: string;
  status: "pending" | "succeeded" | "failed";
  attempts: number;
  /** `secrets`: the endpoint's secret, and the one a rotation replaced while it still signs. */
  endpoint: { id: string; url: string; secrets: string[]; enabled: boolean; deleted: boolean };
  event: { id: string; type: string; resource: string; snapshot: string; createdAt: number };
};

export const loadTry = async (d1: D1Database, attemptId: string, now: number = Date.now()): Promise<TryContext | undefined> => {
  const row = await d1
    .prepare(
      `SELECT a.id, a.status, a.attempts, w.id AS endpoint_id, w.url, w.secret, w.enabled, w.deleted_at,
              CASE WHEN w.previous_secret_expires_at > ?2 THEN w.previous_secret END AS previous_secret,
              e.id AS event_id, e.type, e.resource, e.snapshot, e.created_at
         FROM webhook_attempts a
         JOIN webhook_endpoints w ON w.id = a.endpoint_id
         JOIN events e ON e.id = a.event_id
        WHERE a.id = ?1`,
    )
    .bind(attemptId, now)
    .first<{
      id: string;
      status: TryContext["status"];
      attempts: number;
      endpoint_id: string;
      url: string;
      secret: string;
      previous_secret: string | null;
      enabled: number;
      deleted_at: number | null;
      event_id: string;
      type: string;
      resource: string;
      snapshot: string;
      created_at: number;
    }>();
  if (!row) return undefined;
  return {
    attemptId: row.id,
    status: row.status,
    attempts: row.attempts,
    endpoint: {
      id: row.endpoint_id,
      url: row.url,
      secrets: row.previous_secret ? [row.secret, row.previous_secret] : [row.secret],
      enabled: row.enabled === 1,
      deleted: row.deleted_at !== null,
    },
    event: { id: row.event_id, type: row.type, resource: row.resource, snapshot: row.snapshot, createdAt: row.created_at },
  };
};

export type TryOutcome = { ok: boolean; statusCode: number | null; error: string | null };

/**
 * Records try number `tryNumber` (0-based) of a pending attempt: succeeded, pending again with the
 * next try's time, or failed when it was the last. Returns the next try's delay in seconds, null when
 * none follows, or undefined when another copy of this try recorded first (nothing changed here).
 */
export const recordTry = async (
  d1: D1Database,
  attemptId: string,
  tryNumber: number,
  outcome: TryOutcome,
  now: number,
): Promise<number | null | undefined> => {
  const delay = outcome.ok ? undefined : RETRY_DELAYS_SECONDS[tryNumber];
  const status = outcome.ok ? "succeeded" : delay === undefined ? "failed" : "pending";
  const result = await d1
    .prepare(
      `UPDATE webhook_attempts
          SET status = ?3, attempts = attempts + 1, last_status_code = ?4, last_error = ?5, next_attempt_at = ?6, updated_at = ?7
        WHERE id = ?1 AND status = 'pending' AND attempts = ?2`,
    )
    .bind(attemptId, tryNumber, status, outcome.statusCode, outcome.error, delay === undefined ? null : now + delay * 1000, now)
    .run();
  if (result.meta.changes === 0) return undefined;
  return delay ?? null;
};

/** Ends a pending attempt without a try (its endpoint was disabled or deleted, or its work dead-lettered). */
export const stopAttempt = (d1: D1Database, attemptId: string, reason: string, now: number) =>
  d1
    .prepare(
      `UPDATE webhook_attempts SET status = 'failed', last_error = ?2, last_status_code = NULL, next_attempt_at = NULL, updated_at = ?3
        WHERE id = ?1 AND status = 'pending'`,
    )
    .bind(attemptId, reason, now)
    .run();

/** Pending attempts whose next try is long overdue: their message was lost (a failed enqueue, a crash). */
export const findStalledAttempts = async (d1: D1Database, before: number, take: number) => {
  const { results } = await d1
    .prepare(`SELECT id, attempts FROM webhook_attempts WHERE status = 'pending' AND next_attempt_at <= ?1 ORDER BY next_attempt_at LIMIT ?2`)
    .bind(before, take)
    .all<{ id: string; attempts: number }>();
  return results;
};

/** Events never dispatched a while after their write: the enqueue after the commit was lost. */
export const findUndispatchedEvents = async (d1: D1Database, before: number, take: number) => {
  const { results } = await d1
    .prepare(`SELECT id FROM events WHERE dispatched_at IS NULL AND created_at <= ?1 ORDER BY created_at LIMIT ?2`)
    .bind(before, take)
    .all<{ id: string }>();
  return results.map((r) => r.id);
};

/**
 * Past the retention (`before`): finished attempts made before it, then events made before it that
 * no attempt refers to any more (a pending attempt keeps its event). Ranges on the primary keys, up
 * to `take` rows each. How many rows went.
 */
export const deleteExpiredEvents = async (d1: D1Database, before: number, take: number): Promise<number> => {
  const [attempts, events] = await d1.batch([
    d1
      .prepare(`DELETE FROM webhook_attempts WHERE id IN (SELECT id FROM webhook_attempts WHERE id < ?1 AND status <> 'pending' LIMIT ?2)`)
      .bind(idFloor("webhook_attempt", before), take),
    d1
      .prepare(
        `DELETE FROM events WHERE id IN (
           SELECT id FROM events e WHERE id < ?1
              AND NOT EXISTS (SELECT 1 FROM webhook_attempts a WHERE a.event_id = e.id) LIMIT ?2)`,
      )
      .bind(idFloor("event", before), take),
  ]);
  return Math.max(attempts?.meta.changes ?? 0, events?.meta.changes ?? 0);
};
