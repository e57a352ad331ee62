import type { SegmentFilter } from "../db/schema";
import type { DeliveryError } from "./integrations/types";

// Every query of the send pipeline. Multi-row writes bind ONE JSON array and expand it with
// json_each(?), so a chunk of any size stays far below D1's 100 bound parameters per statement.
// Progress counters are only ever raised by `changes()` of the statement just before them in the
// same atomic batch: a row that did not change state (already sent, already created) is never counted twice.

export type OperationState = {
  id: string;
  workspaceId: string;
  campaignId: string;
  status: "queued" | "running" | "succeeded" | "failed";
  deliveryIntegration: string;
  fanoutCursor: string | null;
  fanoutDone: boolean;
  startAt: number | null;
  createdAt: number;
  segmentFilter: SegmentFilter | null;
};

type OperationStateRow = {
  id: string;
  workspace_id: string;
  campaign_id: string;
  status: OperationState["status"];
  delivery_integration: string;
  fanout_cursor: string | null;
  fanout_done: number;
  start_at: number | null;
  created_at: number;
  segment_filter: string | null;
};

export const loadOperationState = async (d1: D1Database, operationId: string): Promise<OperationState | undefined> => {
  const row = await d1
    .prepare(
      `SELECT o.id, o.workspace_id, o.campaign_id, o.status, o.delivery_integration, o.fanout_cursor, o.fanout_done,
              o.start_at, o.created_at, s.filter AS segment_filter
         FROM operations o
         JOIN campaigns c ON c.id = o.campaign_id
         LEFT JOIN segments s ON s.id = c.segment_id
        WHERE o.id = ?`,
    )
    .bind(operationId)
    .first<OperationStateRow>();
  if (!row) return undefined;
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    campaignId: row.campaign_id,
    status: row.status,
    deliveryIntegration: row.delivery_integration,
    fanoutCursor: row.fanout_cursor,
    fanoutDone: row.fanout_done === 1,
    startAt: row.start_at,
    createdAt: row.created_at,
    segmentFilter: row.segment_filter === null ? null : (JSON.parse(row.segment_filter) as SegmentFilter),
  };
};

/** What a delivery chunk needs to compose its emails. */
export type MessageContext = {
  subject: string;
  preheader: string | null;
  fromName: string | null;
  fromEmail: string;
  replyTo: string | null;
};

export const loadMessageContext = async (d1: D1Database, campaignId: string): Promise<MessageContext | undefined> => {
  const row = await d1
    .prepare(
      `SELECT c.subject, c.preheader, n.from_name, n.from_email, n.reply_to
         FROM campaigns c JOIN newsletters n ON n.id = c.newsletter_id
        WHERE c.id = ?`,
    )
    .bind(campaignId)
    .first<{ subject: string; preheader: string | null; from_name: string | null; from_email: string; reply_to: string | null }>();
  return row
    ? { subject: row.subject, preheader: row.preheader, fromName: row.from_name, fromEmail: row.from_email, replyTo: row.reply_to }
    : undefined;
};

// ---- send (producer) ----

export type NewOperation = {
  id: string;
  workspaceId: string;
  campaignId: string;
  integrationSlug: string;
  deliveryIntegration: string;
  mode: "test" | "live";
  startAt: number;
  campaignStatus: "sending" | "scheduled";
  now: number;
};

/**
 * One atomic batch: the operation is created only if the campaign is still a draft, and the
 * campaign leaves `draft` in the same transaction. Of any number of concurrent sends, exactly one
 * sees its INSERT return a row. Returns whether this one won.
 */
export const createSendOperation = async (d1: D1Database, op: NewOperation): Promise<boolean> => {
  const [inserted] = await d1.batch([
    d1
      .prepare(
        `INSERT INTO operations (id, workspace_id, campaign_id, type, status, integration_slug, delivery_integration, mode,
                                 total, delivered, failed, fanout_cursor, fanout_done, start_at, error, created_at, updated_at, completed_at)
         SELECT ?1, ?2, ?3, 'campaign_send', 'queued', ?4, ?5, ?6, 0, 0, 0, NULL, 0, ?7, NULL, ?8, ?8, NULL
          WHERE EXISTS (SELECT 1 FROM campaigns WHERE id = ?3 AND workspace_id = ?2 AND status = 'draft')
         RETURNING id`,
      )
      .bind(op.id, op.workspaceId, op.campaignId, op.integrationSlug, op.deliveryIntegration, op.mode, op.startAt, op.now),
    d1
      .prepare(`UPDATE campaigns SET status = ?1, updated_at = ?2 WHERE id = ?3 AND status = 'draft'`)
      .bind(op.campaignStatus, op.now, op.campaignId),
  ]);
  return (inserted?.results.length ?? 0) === 1;
};

// ---- start ----

/** queued → running (and a scheduled campaign → sending); false when another start got there first. */
export const markOperationRunning = async (d1: D1Database, op: OperationState, now: number): Promise<boolean> => {
  const [started] = await d1.batch([
    d1
      .prepare(`UPDATE operations SET status = 'running', updated_at = ?2 WHERE id = ?1 AND status = 'queued' RETURNING id`)
      .bind(op.id, now),
    d1
      .prepare(
        `UPDATE campaigns SET status = 'sending', updated_at = ?2
          WHERE id = ?1 AND status = 'scheduled'
            AND EXISTS (SELECT 1 FROM operations WHERE id = ?3 AND status = 'running')`,
      )
      .bind(op.campaignId, now, op.id),
  ]);
  return (started?.results.length ?? 0) === 1;
};

// ---- fan-out ----

export type Candidate = { id: string; email: string; matches: boolean };

/**
 * The next window of the workspace's active subscribers after `after`, each flagged by whether
 * the segment matches. The window bounds the rows scanned, not the rows matched, so a narrow
 * segment over a large audience still costs one bounded query per message.
 */
export const recipientWindow = async (
  d1: D1Database,
  op: OperationState,
  after: string | null,
  size: number,
): Promise<Candidate[]> => {
  const { results } = await d1
    .prepare(
      `WITH page AS (
         SELECT id, email FROM subscribers
          WHERE workspace_id = ?1 AND status = 'active' AND id > ?2
          ORDER BY id LIMIT ?3
       )
       SELECT id, email,
              (?4 IS NULL OR EXISTS (
                 SELECT 1 FROM json_each(?4) t
                   JOIN subscriber_tags st ON st.workspace_id = ?1 AND st.tag = t.value AND st.subscriber_id = page.id))
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
    )
    .all<{ id: string; email: string; matches: number }>();
  return results.map((r) => ({ id: r.id, email: r.email, matches: r.matches === 1 }));
};

export type NewDelivery = { id: string; subscriberId: string; email: string };

/**
 * One delivery per (campaign, subscriber): a row that exists already is left alone and not counted.
 * With `settle` (an integration's `settleAtCreation`), the rows are created already sent.
 */
export const createDeliveries = async (
  d1: D1Database,
  op: OperationState,
  rows: NewDelivery[],
  now: number,
  settle?: (deliveryId: string) => string,
) => {
  if (rows.length === 0) return;
  const json = JSON.stringify(rows.map((r) => ({ id: r.id, s: r.subscriberId, e: r.email, p: settle?.(r.id) })));
  await d1.batch(
    deliveryInsertStatements(d1, {
      json,
      settled: settle !== undefined,
      workspaceId: op.workspaceId,
      campaignId: op.campaignId,
      operationId: op.id,
      now,
    }),
  );
};

/**
 * The insert of a page of deliveries, bound as one JSON array of `{id, s: subscriber id, e: email,
 * p?: provider message id}`, and the operation's counters raised by exactly the rows inserted; run
 * as one batch. `settled` pages (every row with its `p`) are created `sent` after one attempt and
 * also count as delivered; the others are created `queued`.
 */
export const deliveryInsertStatements = (
  d1: D1Database,
  page: { json: string; settled: boolean; workspaceId: string; campaignId: string; operationId: string; now: number },
): [D1PreparedStatement, D1PreparedStatement] => [
  d1
    .prepare(
      `INSERT INTO deliveries (id, workspace_id, campaign_id, operation_id, subscriber_id, email, status, attempts,
                               provider_message_id, error, created_at, updated_at)
       SELECT json_extract(value, '$.id'), ?2, ?3, ?4, json_extract(value, '$.s'), json_extract(value, '$.e'),
              CASE ?6 WHEN 1 THEN 'sent' ELSE 'queued' END, ?6, CASE ?6 WHEN 1 THEN json_extract(value, '$.p') END,
              NULL, ?5, ?5
         FROM json_each(?1) WHERE true
       ON CONFLICT (campaign_id, subscriber_id) DO NOTHING`,
    )
    .bind(page.json, page.workspaceId, page.campaignId, page.operationId, page.now, page.settled ? 1 : 0),
  d1
    .prepare(`UPDATE operations SET total = total + changes(), delivered = delivered + ?3 * changes(), updated_at = ?2 WHERE id = ?1`)
    .bind(page.operationId, page.now, page.settled ? 1 : 0),
];

/**
 * Advances the fan-out position from `after` to `to` (compare-and-set: only one of duplicate
 * messages moves it), then tries to complete. Returns whether this call moved it.
 */
export const advanceFanout = async (
  d1: D1Database,
  op: OperationState,
  after: string | null,
  to: string | null,
  done: boolean,
  now: number,
): Promise<boolean> => {
  const [advanced] = await d1.batch([
    d1
      .prepare(
        `UPDATE operations SET fanout_cursor = ?3, fanout_done = ?4, updated_at = ?5
          WHERE id = ?1 AND status = 'running' AND fanout_done = 0 AND fanout_cursor IS ?2
         RETURNING id`,
      )
      .bind(op.id, after, to, done ? 1 : 0, now),
    ...completionStatements(d1, op, now),
  ]);
  return (advanced?.results.length ?? 0) === 1;
};

// ---- delivery ----

export type QueuedDelivery = {
  id: string;
  subscriberId: string;
  email: string;
  attempts: number;
  /** Whether the subscriber is still active now, at delivery time. */
  active: boolean;
};

export const queuedDeliveriesInRange = async (
  d1: D1Database,
  campaignId: string,
  from: string | null,
  to: string | null,
  limit: number,
): Promise<QueuedDelivery[]> => {
  const { results } = await d1
    .prepare(
      `SELECT d.id, d.subscriber_id, d.email, d.attempts, coalesce(s.status = 'active', 0) AS active
         FROM deliveries d LEFT JOIN subscribers s ON s.id = d.subscriber_id
        WHERE d.campaign_id = ?1 AND d.subscriber_id > ?2 AND (?3 IS NULL OR d.subscriber_id <= ?3) AND d.status = 'queued'
        ORDER BY d.subscriber_id LIMIT ?4`,
    )
    .bind(campaignId, from ?? "", to, limit)
    .all<{ id: string; subscriber_id: string; email: string; attempts: number; active: number }>();
  return results.map((r) => ({
    id: r.id,
    subscriberId: r.subscriber_id,
    email: r.email,
    attempts: r.attempts,
    active: r.active === 1,
  }));
};

export type DeliveryResults = {
  sent: { id: string; providerMessageId: string }[];
  /** `attempted`: whether the integration was called (a recipient skipped at delivery time was not). */
  failed: { id: string; error: DeliveryError; attempted: boolean }[];
  /** Tried and still queued, for another attempt later. */
  retry: { id: string; error: DeliveryError }[];
};

/**
 * Records a chunk's outcomes and raises the operation's counters by exactly the rows that left
 * `queued` here, then tries to complete: all in one atomic batch.
 */
export const recordDeliveryResults = async (d1: D1Database, op: OperationState, results: DeliveryResults, now: number) => {
  const statements: D1PreparedStatement[] = [];
  if (results.sent.length > 0) {
    statements.push(
      d1
        .prepare(
          `UPDATE deliveries SET status = 'sent', provider_message_id = r.p, attempts = deliveries.attempts + 1, error = NULL, updated_at = ?2
             FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.p') AS p FROM json_each(?1)) AS r
            WHERE deliveries.id = r.id AND deliveries.status = 'queued'`,
        )
        .bind(JSON.stringify(results.sent.map((r) => ({ id: r.id, p: r.providerMessageId }))), now),
      d1.prepare(`UPDATE operations SET delivered = delivered + changes(), updated_at = ?2 WHERE id = ?1`).bind(op.id, now),
    );
  }
  if (results.failed.length > 0) {
    statements.push(
      d1
        .prepare(
          `UPDATE deliveries SET status = 'failed', error = r.err, attempts = deliveries.attempts + r.a, updated_at = ?2
             FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.err') AS err, json_extract(value, '$.a') AS a
                     FROM json_each(?1)) AS r
            WHERE deliveries.id = r.id AND deliveries.status = 'queued'`,
        )
        .bind(JSON.stringify(results.failed.map((r) => ({ id: r.id, err: r.error, a: r.attempted ? 1 : 0 }))), now),
      d1.prepare(`UPDATE operations SET failed = failed + changes(), updated_at = ?2 WHERE id = ?1`).bind(op.id, now),
    );
  }
  if (results.retry.length > 0) {
    statements.push(
      d1
        .prepare(
          `UPDATE deliveries SET error = r.err, attempts = deliveries.attempts + 1, updated_at = ?2
             FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.err') AS err FROM json_each(?1)) AS r
            WHERE deliveries.id = r.id AND deliveries.status = 'queued'`,
        )
        .bind(JSON.stringify(results.retry.map((r) => ({ id: r.id, err: r.error }))), now),
      d1.prepare(`UPDATE operations SET updated_at = ?2 WHERE id = ?1`).bind(op.id, now),
    );
  }
  if (statements.length === 0) return;
  await d1.batch([...statements, ...completionStatements(d1, op, now)]);
};

// ---- completion ----

/**
 * Once the fan-out has paged past the last recipient and every delivery has left `queued`, the
 * operation ends (failed only when every delivery failed) and the campaign follows it. Both are
 * conditional, so whichever batch finishes the work completes it, once.
 */
const completionStatements = (d1: D1Database, op: OperationState, now: number): D1PreparedStatement[] => [
  d1
    .prepare(
      `UPDATE operations
          SET status = CASE WHEN failed > 0 AND delivered = 0 THEN 'failed' ELSE 'succeeded' END,
              error = CASE WHEN failed > 0 AND delivered = 0
                           THEN json_object('code', 'all_deliveries_failed', 'message', 'Every delivery of this send failed; see the deliveries for each error.')
                           ELSE NULL END,
              completed_at = ?2, updated_at = ?2
        WHERE id = ?1 AND status = 'running' AND fanout_done = 1 AND delivered + failed >= total`,
    )
    .bind(op.id, now),
  campaignFollowsOperation(d1, op.id, op.campaignId, now),
];

const campaignFollowsOperation = (d1: D1Database, operationId: string, campaignId: string, now: number) =>
  d1
    .prepare(
      `UPDATE campaigns
          SET status = CASE (SELECT status FROM operations WHERE id = ?1) WHEN 'succeeded' THEN 'sent' ELSE 'failed' END,
              sent_at = CASE (SELECT status FROM operations WHERE id = ?1) WHEN 'succeeded' THEN ?3 ELSE NULL END,
              updated_at = ?3
        WHERE id = ?2 AND status IN ('scheduled', 'sending')
          AND EXISTS (SELECT 1 FROM operations WHERE id = ?1 AND status IN ('succeeded', 'failed'))`,
    )
    .bind(operationId, campaignId, now);

/** Ends an operation that cannot finish (its work was dead-lettered), and its campaign with it. */
export const failOperation = async (d1: D1Database, operationId: string, error: DeliveryError, now: number) => {
  const op = await d1.prepare(`SELECT campaign_id FROM operations WHERE id = ?`).bind(operationId).first<{ campaign_id: string }>();
  if (!op) return;
  await d1.batch([
    d1
      .prepare(
        `UPDATE operations SET status = 'failed', error = ?2, completed_at = ?3, updated_at = ?3
          WHERE id = ?1 AND status IN ('queued', 'running')`,
      )
      .bind(operationId, JSON.stringify(error), now),
    campaignFollowsOperation(d1, operationId, op.campaign_id, now),
  ]);
};
