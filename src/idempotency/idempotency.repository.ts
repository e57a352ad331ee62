import { and, eq, lte, or, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { idempotencyKeys } from "../db/schema";

export type IdempotencyKeyRow = typeof idempotencyKeys.$inferSelect;

/** Who holds a key: the lease instant doubles as the holder's token (a takeover always moves it forward). */
export type Claim = { credentialId: string; key: string; lockedUntil: number };

/**
 * Claims a key in one statement: a new key is inserted, an existing one is taken over only when its
 * retention has ended or it is still `processing` past its lease (the holder died). Undefined means
 * someone else holds or has completed it.
 */
export const claimIdempotencyKey = (
  db: Db,
  claim: { credentialId: string; key: string; fingerprint: string; now: number; leaseMs: number; retentionMs: number },
) =>
  db
    .insert(idempotencyKeys)
    .values({
      credentialId: claim.credentialId,
      key: claim.key,
      fingerprint: claim.fingerprint,
      state: "processing",
      lockedUntil: claim.now + claim.leaseMs,
      response: null,
      createdAt: claim.now,
      expiresAt: claim.now + claim.retentionMs,
    })
    .onConflictDoUpdate({
      target: [idempotencyKeys.credentialId, idempotencyKeys.key],
      set: {
        fingerprint: sql`excluded.fingerprint`,
        state: sql`excluded.state`,
        lockedUntil: sql`excluded.locked_until`,
        response: null,
        createdAt: sql`excluded.created_at`,
        expiresAt: sql`excluded.expires_at`,
      },
      setWhere: or(
        lte(idempotencyKeys.expiresAt, claim.now),
        and(eq(idempotencyKeys.state, "processing"), lte(idempotencyKeys.lockedUntil, claim.now)),
      ),
    })
    .returning()
    .get();

export const findIdempotencyKey = (db: Db, credentialId: string, key: string) =>
  db
    .select()
    .from(idempotencyKeys)
    .where(and(eq(idempotencyKeys.credentialId, credentialId), eq(idempotencyKeys.key, key)))
    .get();

const heldBy = (claim: Claim) =>
  and(
    eq(idempotencyKeys.credentialId, claim.credentialId),
    eq(idempotencyKeys.key, claim.key),
    eq(idempotencyKeys.state, "processing"),
    eq(idempotencyKeys.lockedUntil, claim.lockedUntil),
  );

/**
 * Keeps the response on the claim row, so a retry that reaches D1 before KV has the response
 * replays it. A holder that lost its claim (lease over, taken over) changes nothing: false. Expired
 * rows are purged in the same batch, a bounded number at a time, so the table holds about one day
 * of keys.
 */
export const completeIdempotencyKey = async (db: Db, claim: Claim, response: string, now: number, retentionMs: number) => {
  const [completed] = await db.batch([
    db
      .update(idempotencyKeys)
      .set({ state: "completed", response, expiresAt: now + retentionMs })
      .where(heldBy(claim))
      .returning({ key: idempotencyKeys.key }),
    db
      .delete(idempotencyKeys)
      .where(
        sql`rowid in (select rowid from ${idempotencyKeys} where ${idempotencyKeys.expiresAt} <= ${now} limit 100)`,
      ),
  ]);
  return completed.length > 0;
};

/** Frees a key whose request is not to be remembered (validation failure, 5xx), so a retry runs again. */
export const releaseIdempotencyKey = (db: Db, claim: Claim) => db.delete(idempotencyKeys).where(heldBy(claim)).run();
