import { outcomeUnknown } from "./batch-settlement";
import { and, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { insertWhere } from "../db/insert-where";
import { outboxStatement } from "../events/outbox";
import { campaigns, operations, type SegmentFilter } from "../db/schema";
import type { DeliveryError } from "./integrations/types";

// The send's operation: its state as the steps read it, its creation with the campaign's move out of
// draft, its start, and its completion or failure. The delivery rows are in fanout.repository.ts (their
// creation) and deliveries.repository.ts (their chunks).
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

/** What composing a campaign's emails needs: its templates and its newsletter. */
export type MessageContext = {
  campaignId: string;
  subject: string;
  preheader: string | null;
  html: string | null;
  text: string | null;
  newsletterName: string;
  address: string | null;
  fromName: string | null;
  fromEmail: string;
  replyTo: string | null;
};

type MessageContextRow = {
  id: string;
  subject: string;
  preheader: string | null;
  html: string | null;
  text: string | null;
  name: string;
  address: string | null;
  from_name: string | null;
  from_email: string;
  reply_to: string | null;
};

/** The campaign's content and newsletter; with `workspaceId`, only a campaign of that workspace. */
export const loadMessageContext = async (d1: D1Database, campaignId: string, workspaceId?: string): Promise<MessageContext | undefined> => {
  const row = await d1
    .prepare(
      `SELECT c.id, c.subject, c.preheader, c.html, c.text, n.name, n.address, n.from_name, n.from_email, n.reply_to
         FROM campaigns c JOIN newsletters n ON n.id = c.newsletter_id
        WHERE c.id = ?1 AND (?2 IS NULL OR c.workspace_id = ?2)`,
    )
    .bind(campaignId, workspaceId ?? null)
    .first<MessageContextRow>();
  return row
    ? {
        campaignId: row.id,
        subject: row.subject,
        preheader: row.preheader,
        html: row.html,
        text: row.text,
        newsletterName: row.name,
        address: row.address,
        fromName: row.from_name,
        fromEmail: row.from_email,
        replyTo: row.reply_to,
      }
    : undefined;
};

// ---- send (producer) ----

type NewOperation = {
  id: string;
  workspaceId: string;
  campaignId: string;
  integrationSlug: string;
  deliveryIntegration: string;
  mode: "test" | "live";
  now: number;
};

/**
 * The send's two statements, for one atomic batch: the campaign leaves `draft` (for `scheduled` when
 * its scheduled_at is still ahead, else `sending`), and the operation is created only if that update
 * changed the campaign. Of any number of concurrent sends, exactly one gets the operation row back.
 * The operation starts at the campaign's scheduled_at when that is later than now.
 */
export const createSendOperation = (db: Db, op: NewOperation) =>
  [
    db
      .update(campaigns)
      .set({
        status: sql`CASE WHEN ${campaigns.scheduledAt} > ${op.now} THEN 'scheduled' ELSE 'sending' END`,
        updatedAt: op.now,
      })
      .where(and(eq(campaigns.id, op.campaignId), eq(campaigns.workspaceId, op.workspaceId), eq(campaigns.status, "draft"))),
    insertWhere(
      db,
      operations,
      {
        id: op.id,
        workspaceId: op.workspaceId,
        campaignId: op.campaignId,
        type: "campaign_send",
        status: "queued",
        integrationSlug: op.integrationSlug,
        deliveryIntegration: op.deliveryIntegration,
        mode: op.mode,
        startAt: sql`(SELECT max(coalesce(${campaigns.scheduledAt}, 0), ${op.now}) FROM ${campaigns} WHERE ${campaigns.id} = ${op.campaignId})`,
        createdAt: op.now,
        updatedAt: op.now,
      },
      sql`changes() > 0`,
    ),
  ] as const;

// ---- start ----

/**
 * queued → running (and a scheduled campaign → sending, with its `campaign.sending` event); false
 * when another start got there first, or the send is no longer due (moved later since it was read:
 * the start step then sleeps until the new time, src/sending/pipeline.ts).
 */
export const markOperationRunning = async (d1: D1Database, op: OperationState, now: number): Promise<boolean> => {
  const [started] = await d1.batch([
    d1
      // Only while it is due: a reschedule that committed after the step read the operation moved it later.
      .prepare(`UPDATE operations SET status = 'running', updated_at = ?2 WHERE id = ?1 AND status = 'queued' AND coalesce(start_at, 0) <= ?2 RETURNING id`)
      .bind(op.id, now),
    d1
      .prepare(
        `UPDATE campaigns SET status = 'sending', updated_at = ?2
          WHERE id = ?1 AND status = 'scheduled'
            AND EXISTS (SELECT 1 FROM operations WHERE id = ?3 AND status = 'running')`,
      )
      .bind(op.campaignId, now, op.id),
    outboxStatement(d1, { type: "campaign.sending", resource: "campaign", id: op.campaignId }, now),
  ]);
  return (started?.results.length ?? 0) === 1;
};

/**
 * A delivery step that waited for the provider and changed nothing: the sweeper reads this as
 * progress (findSweepCandidates), so a send that only waits is not taken for a stalled one.
 */
export const markOperationWaiting = async (d1: D1Database, operationId: string, now: number): Promise<void> => {
  await d1.prepare(`UPDATE operations SET heartbeat_at = ?2 WHERE id = ?1 AND status = 'running'`).bind(operationId, now).run();
};

// ---- completion ----

/**
 * Once the fan-out has paged past the last recipient and every delivery has left `queued`, the
 * operation ends (failed only when every delivery failed) and the campaign follows it. Both are
 * conditional, so whichever batch finishes the work completes it, once, with its campaign event.
 */
export const completionStatements = (d1: D1Database, op: OperationState, now: number): D1PreparedStatement[] => [
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
  campaignEndedEvent(d1, op.campaignId, now),
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

/** `campaign.sent` or `campaign.failed`, iff the statement before ended the campaign. */
const campaignEndedEvent = (d1: D1Database, campaignId: string, now: number) =>
  outboxStatement(d1, { type: sql`CASE status WHEN 'sent' THEN 'campaign.sent' ELSE 'campaign.failed' END`, resource: "campaign", id: campaignId }, now);

/**
 * Ends an operation that cannot finish (its work was dead-lettered), and its campaign with it. Its
 * deliveries still queued end failed with it, so none stays queued forever: with `error`, or, for
 * one that was in a provider request (which the provider may have taken), `outcome_unknown`.
 */
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
    d1
      .prepare(
        `UPDATE deliveries SET status = 'failed', error = CASE WHEN asked_seq > 0 THEN ?3 ELSE ?2 END, updated_at = ?4
          WHERE operation_id = ?1 AND status = 'queued'`,
      )
      .bind(operationId, JSON.stringify(error), JSON.stringify(outcomeUnknown), now),
    d1.prepare(`UPDATE operations SET failed = failed + changes() WHERE id = ?1`).bind(operationId),
    campaignFollowsOperation(d1, operationId, op.campaign_id, now),
    campaignEndedEvent(d1, op.campaign_id, now),
  ]);
};
