import { and, eq, gt, type SQL, sql, type Table } from "drizzle-orm";
import type { Db } from "../db/client";
import { idempotencyKeys } from "../db/schema";
import { type CompositeKind, resources, type ResourceKind, snapshotJson } from "./resources";
import type { Sealer } from "./sealed";
import type { SealedResponse, StoredResponse } from "./stored-response";

// The Idempotency-Key record of a request: what `commit` writes in the request's own batch, what the
// middleware writes for an answer that wrote nothing, and how both are found again.

/** How long an answer is replayed (KV expirationTtl, and the D1 record's retention). */
export const IDEMPOTENCY_TTL_SECONDS = 86_400;

export type IdempotentRequest = {
  /** The key's scope: the credential's id (or the operator's scope, src/admin). */
  credentialId: string;
  key: string;
  /** SHA-256 over method, path without /v1, and the body's SHA-256. */
  fingerprint: string;
  /**
   * `pending` until the request's outcome is known: `committed` (its write and record are in D1),
   * `replayed` (another request's record answered it) or `rejected` (the key belongs to another request).
   */
  state: "pending" | "committed" | "replayed" | "rejected";
  /** For a scope whose answers carry secrets: every answer it stores is sealed with this (sealed.ts). */
  sealer?: Sealer;
};

export type IdempotencyRecord = typeof idempotencyKeys.$inferSelect;

const recordFields = (request: IdempotentRequest, now: number) => ({
  credentialId: request.credentialId,
  key: request.key,
  fingerprint: request.fingerprint,
  createdAt: now,
  expiresAt: now + IDEMPOTENCY_TTL_SECONDS * 1000,
});

/** A record past its retention is no record: it goes before a new one takes the key. */
export const dropExpiredRecord = (db: Db, request: IdempotentRequest, now: number) =>
  db
    .delete(idempotencyKeys)
    .where(
      and(
        eq(idempotencyKeys.credentialId, request.credentialId),
        eq(idempotencyKeys.key, request.key),
        sql`${idempotencyKeys.expiresAt} <= ${now}`,
      ),
    );

/**
 * The record of a write, for the end of the write's batch. It is inserted only if the write applied:
 * by default, if the statement just before it changed something (`changes()`); `applied` says it
 * otherwise (src/db/commit.ts, for a write with events). It then holds a snapshot of the resource row
 * `id` as the batch leaves it. A live record for the key makes the insert, and so the whole batch, fail.
 */
export const snapshotRecord = (
  db: Db,
  request: IdempotentRequest,
  now: number,
  answer: { status: number; resource: ResourceKind; id: string },
  applied: SQL = sql`changes() > 0`,
) => {
  const table = resources[answer.resource].table as Table;
  const f = recordFields(request, now);
  // Columns in the table's order: credential_id, key, fingerprint, response, created_at, expires_at.
  return db.insert(idempotencyKeys).select(sql`
    SELECT ${f.credentialId}, ${f.key}, ${f.fingerprint},
           json_object('status', ${answer.status}, 'resource', ${answer.resource}, 'row', ${snapshotJson(answer.resource)}),
           ${f.createdAt}, ${f.expiresAt}
      FROM ${table} WHERE id = ${answer.id} AND ${applied}`);
};

/**
 * The record of a write answering about many rows (`composite`, resources.ts): `elements`, SQL giving
 * the JSON array the answer renders from, evaluated where the record stands in the batch. Always
 * inserted: such a write applies whatever it finds (its answer says what it did).
 */
export const compositeRecord = (db: Db, request: IdempotentRequest, now: number, answer: { status: number; composite: CompositeKind; elements: SQL }) => {
  const f = recordFields(request, now);
  return db.insert(idempotencyKeys).select(sql`
    SELECT ${f.credentialId}, ${f.key}, ${f.fingerprint},
           json_object('status', ${answer.status}, 'composite', ${answer.composite}, 'elements', json(${answer.elements})),
           ${f.createdAt}, ${f.expiresAt}`);
};

/** The record of an answer known before the batch (no resource row to snapshot). */
export const renderedRecord = (db: Db, request: IdempotentRequest, now: number, stored: StoredResponse | SealedResponse) =>
  db.insert(idempotencyKeys).values({ ...recordFields(request, now), response: JSON.stringify(stored) });

/**
 * Records an answer that wrote nothing (an error, say), unless the key already has a live record, which
 * then stands: undefined means recorded, otherwise the record that was there first. An expired record
 * goes in the same batch, as before any write's (src/db/commit.ts): kept, it would take the key's place
 * and leave the answer unrecorded.
 */
export const recordUnlessTaken = async (db: Db, request: IdempotentRequest, now: number, stored: StoredResponse | SealedResponse) => {
  const [, inserted] = await db.batch([
    dropExpiredRecord(db, request, now),
    renderedRecord(db, request, now, stored).onConflictDoNothing().returning({ key: idempotencyKeys.key }),
  ]);
  return inserted.length > 0 ? undefined : findLiveRecord(db, request, now);
};

export const findLiveRecord = (db: Db, request: Pick<IdempotentRequest, "credentialId" | "key">, now: number) =>
  db
    .select()
    .from(idempotencyKeys)
    .where(
      and(
        eq(idempotencyKeys.credentialId, request.credentialId),
        eq(idempotencyKeys.key, request.key),
        gt(idempotencyKeys.expiresAt, now),
      ),
    )
    .get();

/** Deletes up to `limit` expired records (the cron sweeper calls it); returns how many. */
export const purgeExpiredRecords = async (d1: D1Database, now: number, limit: number) => {
  const result = await d1
    .prepare(
      `DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE expires_at <= ?1 LIMIT ?2)`,
    )
    .bind(now, limit)
    .run();
  return result.meta.changes;
};
