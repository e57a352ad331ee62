import { completionStatements, type OperationState } from "./send.repository";
import { type SubscriberFields, subscriberFields } from "./subscriber-fields";

// The fan-out's rows: the recipient windows of a send's audience, the deliveries they become, and
// the operation's position, committed window by window. Multi-row writes bind ONE JSON array and
// expand it with json_each(?), so a window of any size stays far below D1's 100 bound parameters per
// statement. Counters are only raised by `changes()` of the statement just before them in the same
// atomic batch.

export type Candidate = { id: string; email: string; matches: boolean; fields: SubscriberFields };

/**
 * The next window of the workspace's active subscribers after `after`, each flagged by whether
 * the segment matches. The window bounds the rows scanned, not the rows matched, so a narrow
 * segment over a large audience still costs one bounded query per message. Each (tag, subscriber)
 * is one lookup by subscriber_tags' key, written as nested EXISTS: as a join with json_each, D1's
 * planner read the workspace's every tag row for each subscriber of the window (a window took
 * seconds in a workspace of 25,000 tagged subscribers).
 */
export const recipientWindow = async (
  d1: D1Database,
  op: OperationState,
  after: string | null,
  size: number,
): Promise<Candidate[]> => {
  const rows = await d1
    .prepare(
      `WITH page AS (
         SELECT id, email, name, tags, location, source FROM subscribers
          WHERE workspace_id = ?1 AND status = 'active' AND id > ?2 AND created_at <= ?6
          ORDER BY id LIMIT ?3
       )
       SELECT id, email, name, tags, location, source,
              (?4 IS NULL OR EXISTS (
                 SELECT 1 FROM json_each(?4) t
                  WHERE EXISTS (SELECT 1 FROM subscriber_tags st
                                 WHERE st.workspace_id = ?1 AND st.tag = t.value AND st.subscriber_id = page.id)))
          AND NOT EXISTS (
                 SELECT 1 FROM json_each(?5) t
                  WHERE NOT EXISTS (SELECT 1 FROM subscriber_tags st
                                     WHERE st.workspace_id = ?1 AND st.tag = t.value AND st.subscriber_id = page.id))
              AS matches
         FROM page ORDER BY id`,
    )
    .bind(
      op.workspaceId,
      after ?? "",
      size,
      op.segmentFilter?.tags_any ? JSON.stringify(op.segmentFilter.tags_any) : null,
      op.segmentFilter?.tags_all ? JSON.stringify(op.segmentFilter.tags_all) : null,
      // The audience is evaluated when the send starts: nobody created after that joins it.
      op.startAt ?? op.createdAt,
    )
    // Rows as arrays, in the SELECT's column order: no object per row for the runtime to build.
    .raw<[string, string, string | null, string, string | null, string | null, number]>();
  return rows.map(([id, email, name, tags, location, source, matches]) => ({
    id,
    email,
    matches: matches === 1,
    fields: subscriberFields({ name, tags, location, source }),
  }));
};

/** `chunkEnd`: the last subscriber of its provider batch, for a delivery created queued. */
export type NewDelivery = { id: string; subscriberId: string; email: string; chunkEnd?: string };

/**
 * The statements creating a window's deliveries, for one batch: `settled` created already sent (with
 * `settle`'s provider message id: an integration's `settleAtCreation`), `queued` created for the
 * delivery step. One delivery per (campaign, subscriber): a row that exists already is left alone
 * and not counted.
 */
export const deliveryStatements = (
  d1: D1Database,
  op: OperationState,
  now: number,
  pages: { settled: NewDelivery[]; queued: NewDelivery[]; settle?: (deliveryId: string) => string },
): D1PreparedStatement[] => {
  const base = { workspaceId: op.workspaceId, campaignId: op.campaignId, operationId: op.id, now };
  return [
    ...pagesOf(pages.settled).flatMap((rows) => deliveryInsertStatements(d1, { ...base, rows, settle: pages.settle })),
    ...pagesOf(pages.queued).flatMap((rows) => deliveryInsertStatements(d1, { ...base, rows, settle: undefined })),
  ];
};

/**
 * Rows one insert binds at most, as one JSON array: a window of a segment sent through Resend may hold
 * thousands (the matches of the reads it gathered), and D1 takes a bound value of at most 2 MB (a row
 * with the longest address is some 400 bytes).
 */
const ROWS_PER_INSERT = 1_000;
const pagesOf = (rows: NewDelivery[]): NewDelivery[][] => {
  const pages: NewDelivery[][] = [];
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT) pages.push(rows.slice(i, i + ROWS_PER_INSERT));
  return pages;
};

type DeliveryPage = {
  rows: NewDelivery[];
  settle: ((deliveryId: string) => string) | undefined;
  workspaceId: string;
  campaignId: string;
  operationId: string;
  now: number;
};

/**
 * The insert of a page of deliveries, bound as one JSON array, and the operation's counters raised
 * by exactly the rows inserted; run as one batch. With `settle`, rows are created `sent` after one
 * attempt, with the provider message id it gives, and also count as delivered; without, `queued`.
 * Only while the operation runs: a fan-out step still at work when its send ended (failed by a
 * dead-lettered step) adds no row that nothing would ever deliver.
 */
export const deliveryInsertStatements = (d1: D1Database, page: DeliveryPage): [D1PreparedStatement, D1PreparedStatement] => {
  const { settle } = page;
  const json = JSON.stringify(page.rows.map((r) => ({ id: r.id, s: r.subscriberId, e: r.email, p: settle?.(r.id), c: r.chunkEnd })));
  const settled = settle === undefined ? 0 : 1;
  return [
    d1
      .prepare(
        `INSERT INTO deliveries (id, workspace_id, campaign_id, operation_id, subscriber_id, email, status, attempts,
                                 provider_message_id, error, chunk_end, created_at, updated_at)
         SELECT json_extract(value, '$.id'), ?2, ?3, ?4, json_extract(value, '$.s'), json_extract(value, '$.e'),
                CASE ?6 WHEN 1 THEN 'sent' ELSE 'queued' END, ?6, CASE ?6 WHEN 1 THEN json_extract(value, '$.p') END,
                NULL, json_extract(value, '$.c'), ?5, ?5
           FROM json_each(?1) WHERE (SELECT status FROM operations WHERE id = ?4) = 'running'
         ON CONFLICT (campaign_id, subscriber_id) DO NOTHING`,
      )
      .bind(json, page.workspaceId, page.campaignId, page.operationId, page.now, settled),
    d1
      .prepare(`UPDATE operations SET total = total + changes(), delivered = delivered + ?3 * changes(), updated_at = ?2 WHERE id = ?1 AND changes() > 0`)
      .bind(page.operationId, page.now, settled),
  ];
};

/**
 * Advances the fan-out position from `after` to `to` (compare-and-set: only one of duplicate
 * messages moves it), then tries to complete, in one batch after the statements `first` (a window's
 * deliveries, when nothing has to happen between them and the move). Returns whether this call
 * moved it.
 */
export const advanceFanout = async (
  d1: D1Database,
  op: OperationState,
  after: string | null,
  to: string | null,
  done: boolean,
  now: number,
  first: D1PreparedStatement[] = [],
): Promise<boolean> => {
  const results = await d1.batch([
    ...first,
    d1
      .prepare(
        `UPDATE operations SET fanout_cursor = ?3, fanout_done = ?4, updated_at = ?5
          WHERE id = ?1 AND status = 'running' AND fanout_done = 0 AND fanout_cursor IS ?2
         RETURNING id`,
      )
      .bind(op.id, after, to, done ? 1 : 0, now),
    ...completionStatements(d1, op, now),
  ]);
  return (results[first.length]?.results.length ?? 0) === 1;
};
