import type { DeliveryError } from "./integrations/types";
import { completionStatements, type OperationState } from "./send.repository";
import { type SubscriberFields, type SubscriberFieldsRow, subscriberFields } from "./subscriber-fields";

// The delivery chunks' rows: their reads, the look before each provider request, and their outcome
// writes (the fan-out creates them: fanout.repository.ts). Multi-row writes bind ONE JSON array and
// expand it with json_each(?), so a chunk of any size stays far below D1's 100 bound parameters per
// statement. Counters are only raised by `changes()` of the statement just before them in the same
// atomic batch.

export type QueuedDelivery = {
  id: string;
  subscriberId: string;
  email: string;
  attempts: number;
  /** Whether the subscriber is still active now, at delivery time. */
  active: boolean;
  /** Whether the subscriber's address is still the delivery's (a change of case aside). */
  sameAddress: boolean;
  /** The latest provider request of its batch that held it (deliveries.asked_seq; 0: none). */
  askedSeq: number;
  /** When the first request of its batch was numbered (deliveries.first_asked_at; null: none). */
  firstAskedAt: number | null;
  fields: SubscriberFields;
};

/** Text above every subscriber id (U+10FFFF): the upper bound of a range `to` leaves open. */
const PAST_EVERY_ID = "char(1114111)";

/**
 * The queued deliveries of the first chunk with any in `from` < subscriber ≤ `to`: that chunk's queued
 * rows, all of them, wherever they stand (past `to`, or before `from`: a fan-out window redone after
 * a crash may plan its new rows around an earlier try's chunk), whatever range the work message names,
 * so every read of a chunk takes the same rows and asks for them under the same key; at most `limit` -
 * 1 of them. `more`: the range holds queued rows of other chunks (or of this one, past the limit);
 * `after`: where to look for them. Deliveries from before chunks were recorded (no `chunk_end`) are
 * read by the range alone, only such rows (a planned chunk is never read in part with them), `limit`
 * - 1 of them (one more is read to tell whether there are more). Every read is a range
 * of an index: the first row by (campaign, subscriber) between the range's bounds, the chunk by
 * (campaign, chunk_end); a bound the index cannot use made every step read all the campaign's
 * deliveries after its chunk (a send's reads grew with the square of its audience).
 */
export const queuedChunk = async (
  d1: D1Database,
  campaignId: string,
  from: string | null,
  to: string | null,
  limit: number,
): Promise<{ rows: QueuedDelivery[]; chunkEnd: string | null; more: boolean; after: string | null }> => {
  const { results } = await d1
    .prepare(
      `WITH first AS MATERIALIZED (
         SELECT subscriber_id, chunk_end, coalesce(?3, ${PAST_EVERY_ID}) AS upper
           FROM deliveries
          WHERE campaign_id = ?1 AND subscriber_id > ?2 AND subscriber_id <= coalesce(?3, ${PAST_EVERY_ID}) AND status = 'queued'
          ORDER BY subscriber_id LIMIT 1
       ),
       -- Whether the range holds queued rows of other chunks: once, for the one row of first.
       ahead AS MATERIALIZED (
         SELECT EXISTS (SELECT 1 FROM deliveries m
                         WHERE m.campaign_id = ?1 AND m.subscriber_id > first.subscriber_id AND m.subscriber_id <= first.upper
                           AND m.status = 'queued' AND m.chunk_end IS NOT first.chunk_end) AS more
           FROM first
       ),
       -- CROSS JOIN: the one row of first outside, so each read is a search of an index from it.
       chunk AS (
         SELECT d.* FROM first CROSS JOIN deliveries d
          WHERE first.chunk_end IS NOT NULL AND d.campaign_id = ?1 AND d.chunk_end = first.chunk_end AND d.status = 'queued'
         UNION ALL
         SELECT * FROM (
           SELECT d.* FROM first CROSS JOIN deliveries d
            WHERE first.chunk_end IS NULL AND d.campaign_id = ?1 AND d.subscriber_id >= first.subscriber_id
              AND d.subscriber_id <= first.upper AND d.status = 'queued' AND d.chunk_end IS NULL
            ORDER BY d.subscriber_id LIMIT ?4)
       )
       SELECT c.id, c.subscriber_id, c.email, c.attempts, c.asked_seq, c.first_asked_at, c.chunk_end, first.subscriber_id AS first_id,
              ahead.more,
              coalesce(s.status = 'active', 0) AS active, coalesce(lower(s.email) = lower(c.email), 0) AS same_address,
              s.name, coalesce(s.tags, '[]') AS tags, s.location, s.source
         FROM first CROSS JOIN ahead CROSS JOIN chunk c LEFT JOIN subscribers s ON s.id = c.subscriber_id
        ORDER BY c.subscriber_id LIMIT ?4`,
    )
    .bind(campaignId, from ?? "", to, limit)
    .all<
      {
        id: string;
        subscriber_id: string;
        email: string;
        attempts: number;
        asked_seq: number;
        first_asked_at: number | null;
        chunk_end: string | null;
        first_id: string;
        more: number;
        active: number;
        same_address: number;
      } & SubscriberFieldsRow
    >();
  const rows = results.map((r) => ({
    id: r.id,
    subscriberId: r.subscriber_id,
    email: r.email,
    attempts: r.attempts,
    active: r.active === 1,
    sameAddress: r.same_address === 1,
    askedSeq: r.asked_seq,
    firstAskedAt: r.first_asked_at,
    fields: subscriberFields(r),
  }));
  const [first] = results;
  // More queued rows in the range: another chunk's (or planned rows, after rows from before chunks),
  // or past `limit`.
  const more = rows.length >= limit || first?.more === 1;
  const taken = rows.slice(0, limit - 1);
  // Go on after the range's first queued row once it is taken (none stood before it); a chunk with
  // more members than a batch may leave it for the next read (its first ones by id may stand before
  // the range), and the range is then read again from its start.
  const firstId = first?.first_id;
  const after = firstId !== undefined && taken.some((row) => row.subscriberId === firstId) ? firstId : from;
  return { rows: taken, chunkEnd: first?.chunk_end ?? null, more, after };
};

/**
 * The runner's chunk (its queued rows, which its key names) is as it read it: every row still
 * queued. Once another runner of the chunk settled or held any of them, this runner's key and its
 * numbers are stale, and it neither numbers a request nor records an outcome.
 */
const chunkIntact = (chunkParam: string, settlingAt?: string) =>
  `(SELECT count(*) FROM deliveries c WHERE c.id IN (SELECT value FROM json_each(${chunkParam}))
      AND (c.status = 'queued'${settlingAt ? ` OR c.updated_at = ${settlingAt}` : ""})) = json_array_length(${chunkParam})`;

/** SQL: the delivery (its table aliased `d`) is still to be mailed: its subscriber active, at the delivery's address. */
const mailable = (d: string) =>
  `EXISTS (SELECT 1 FROM subscribers s WHERE s.id = ${d}.subscriber_id AND s.status = 'active' AND lower(s.email) = lower(${d}.email))`;

/**
 * The last look before a batch request leaves, in one atomic batch: the request's members still to
 * be mailed (the subscriber active, at the delivery's address) and still in the batch's latest
 * request (another runner of the chunk may have gone on without them) are numbered as the batch's
 * next request (`asked_seq`: one more than any row of the chunk holds), while the chunk is intact;
 * the others are named: `gone` (no longer to be mailed: their subscriber left, or moved while still
 * active), `behind` (not to be asked under this key again). `seqs`: every row's number after the look.
 * One indexed write and one read of at most one chunk.
 */
export const lookBeforeRequest = async (
  d1: D1Database,
  memberIds: string[],
  chunkIds: string[],
  now: number,
): Promise<{ seq: number | undefined; gone: { id: string; active: boolean }[]; behind: string[]; seqs: Map<string, number> }> => {
  const members = new Set(memberIds);
  const chunk = `(SELECT value FROM json_each(?2))`;
  const [numbered, looked] = await d1.batch<{ id: string; asked_seq: number; active: number; mailable: number }>([
    // (The numbers are read once, before any row is written: SQLite evaluates an uncorrelated subquery once.)
    d1
      .prepare(
        `UPDATE deliveries SET asked_seq = (SELECT max(asked_seq) + 1 FROM deliveries WHERE id IN ${chunk}), first_asked_at = coalesce(first_asked_at, ?3)
          WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'queued' AND ${mailable("deliveries")}
            AND asked_seq = (SELECT max(asked_seq) FROM deliveries WHERE id IN ${chunk}) AND ${chunkIntact("?2")}
         RETURNING id, asked_seq`,
      )
      .bind(JSON.stringify(memberIds), JSON.stringify(chunkIds), now),
    d1
      .prepare(
        `SELECT d.id, d.asked_seq, coalesce((SELECT s.status = 'active' FROM subscribers s WHERE s.id = d.subscriber_id), 0) AS active, ${mailable("d")} AS mailable
           FROM deliveries d WHERE d.id IN (SELECT value FROM json_each(?1))`,
      )
      .bind(JSON.stringify(chunkIds)),
  ]);
  const numberedRows = numbered?.results ?? [];
  const kept = new Set(numberedRows.map((r) => r.id));
  const rows = looked?.results ?? [];
  const others = rows.filter((r) => members.has(r.id) && !kept.has(r.id));
  return {
    seq: numberedRows[0]?.asked_seq,
    gone: others.filter((r) => r.mailable !== 1).map((r) => ({ id: r.id, active: r.active === 1 })),
    behind: others.filter((r) => r.mailable === 1).map((r) => r.id),
    seqs: new Map(rows.map((r) => [r.id, r.asked_seq])),
  };
};

/**
 * Whether a second ask of request `seq` (a hedge: the same members, under the same key) may still
 * leave: every member still queued, to be mailed (active, at its address) and in that request, and
 * the chunk intact. A read only: a hedge shares its request's number.
 */
export const hedgeStillAskable = async (d1: D1Database, memberIds: string[], chunkIds: string[], seq: number): Promise<boolean> => {
  const found = await d1
    .prepare(
      `SELECT (SELECT count(*) FROM deliveries d
                WHERE d.id IN (SELECT value FROM json_each(?1)) AND d.status = 'queued' AND d.asked_seq = ?3
                  AND ${mailable("d")}
              ) = json_array_length(?1) AND ${chunkIntact("?2")} AS askable`,
    )
    .bind(JSON.stringify(memberIds), JSON.stringify(chunkIds), seq)
    .first<{ askable: number }>();
  return found?.askable === 1;
};

/**
 * A request the last look numbered `seq` did not leave (its slot was taken back): its members go back
 * to the number they had (`seq - 1`: a look numbers only rows of the latest request), while `seq` is
 * still the chunk's latest and the chunk intact, so that the next look gives the request that does
 * leave the same number, and no verdict counts a request that never left. The ids put back.
 */
export const withdrawRequestNumber = async (d1: D1Database, chunkIds: string[], seq: number): Promise<string[]> => {
  const chunk = `(SELECT value FROM json_each(?1))`;
  const { results } = await d1
    .prepare(
      `UPDATE deliveries SET asked_seq = ?2 - 1, first_asked_at = CASE WHEN ?2 = 1 THEN NULL ELSE first_asked_at END
        WHERE id IN ${chunk} AND asked_seq = ?2
          AND (SELECT max(asked_seq) FROM deliveries WHERE id IN ${chunk}) = ?2 AND ${chunkIntact("?1")}
       RETURNING id`,
    )
    .bind(JSON.stringify(chunkIds), seq)
    .run<{ id: string }>();
  return results.map((r) => r.id);
};

export type DeliveryResults = {
  sent: { id: string; providerMessageId: string | null }[];
  /** `attempted`: it was in the request the failure is about (its attempt is counted). */
  failed: { id: string; error: DeliveryError; attempted: boolean }[];
  /**
   * Still queued, for another attempt later. `attempted`: it was in the request that failed (counted,
   * its error recorded); otherwise it was left out of it, and keeps its attempts and last error.
   */
  retry: { id: string; error: DeliveryError; attempted: boolean }[];
  /** Still queued, for a batch of its own: no longer numbered as a member of this batch's requests. */
  held: string[];
};

/**
 * Records a chunk's outcomes and raises the operation's counters by exactly the rows that left
 * `queued` here, then tries to complete: all in one atomic batch. Only while the chunk is intact (every
 * row still queued) and its latest request is still `seq`, the last this runner made (or read): a
 * runner of the same chunk that made a later one, or settled any of it, has the say, and this one
 * writes nothing.
 */
export const recordDeliveryResults = async (
  d1: D1Database,
  op: OperationState,
  results: DeliveryResults,
  now: number,
  chunk: { ids: string[]; seq: number },
) => {
  const statements: D1PreparedStatement[] = [];
  // (A row this very batch settled, at `now`, still counts as the chunk's: the statements run in turn.)
  const ours = `(SELECT coalesce(max(c.asked_seq), 0) FROM deliveries c WHERE c.id IN (SELECT value FROM json_each(?3))) = ?4 AND ${chunkIntact("?3", "?2")}`;
  const chunkIds = JSON.stringify(chunk.ids);
  if (results.sent.length > 0) {
    statements.push(
      d1
        .prepare(
          `UPDATE deliveries SET status = 'sent', provider_message_id = r.p, attempts = deliveries.attempts + 1, error = NULL, updated_at = ?2
             FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.p') AS p FROM json_each(?1)) AS r
            WHERE deliveries.id = r.id AND deliveries.status = 'queued' AND ${ours}`,
        )
        .bind(JSON.stringify(results.sent.map((r) => ({ id: r.id, p: r.providerMessageId }))), now, chunkIds, chunk.seq),
      d1.prepare(`UPDATE operations SET delivered = delivered + changes(), updated_at = ?2 WHERE id = ?1 AND changes() > 0`).bind(op.id, now),
    );
  }
  if (results.failed.length > 0) {
    statements.push(
      d1
        .prepare(
          `UPDATE deliveries SET status = 'failed', error = r.err, attempts = deliveries.attempts + r.a, updated_at = ?2
             FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.err') AS err, json_extract(value, '$.a') AS a
                     FROM json_each(?1)) AS r
            WHERE deliveries.id = r.id AND deliveries.status = 'queued' AND ${ours}`,
        )
        .bind(JSON.stringify(results.failed.map((r) => ({ id: r.id, err: r.error, a: r.attempted ? 1 : 0 }))), now, chunkIds, chunk.seq),
      d1.prepare(`UPDATE operations SET failed = failed + changes(), updated_at = ?2 WHERE id = ?1 AND changes() > 0`).bind(op.id, now),
    );
  }
  if (results.retry.length > 0) {
    statements.push(
      d1
        .prepare(
          `UPDATE deliveries SET error = CASE r.a WHEN 1 THEN r.err ELSE deliveries.error END, attempts = deliveries.attempts + r.a, updated_at = ?2
             FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.err') AS err, json_extract(value, '$.a') AS a
                     FROM json_each(?1)) AS r
            WHERE deliveries.id = r.id AND deliveries.status = 'queued' AND ${ours}`,
        )
        .bind(JSON.stringify(results.retry.map((r) => ({ id: r.id, err: r.error, a: r.attempted ? 1 : 0 }))), now, chunkIds, chunk.seq),
      d1.prepare(`UPDATE operations SET updated_at = ?2 WHERE id = ?1 AND changes() > 0`).bind(op.id, now),
    );
  }
  // Last: it lowers the chunk's numbers the statements before it read.
  if (results.held.length > 0) {
    statements.push(
      d1
        .prepare(`UPDATE deliveries SET asked_seq = 0, first_asked_at = NULL, updated_at = ?2 WHERE id IN (SELECT value FROM json_each(?1)) AND status = 'queued' AND ${ours}`)
        .bind(JSON.stringify(results.held), now, chunkIds, chunk.seq),
    );
  }
  if (statements.length === 0) return;
  await d1.batch([...statements, ...completionStatements(d1, op, now)]);
};
