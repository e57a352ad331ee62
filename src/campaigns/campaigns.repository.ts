import { and, eq, inArray, lt, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { Db } from "../db/client";
import { boundedPage } from "../db/bounded-page";
import { differs } from "../db/differs";
import { insertWhere } from "../db/insert-where";
import { campaigns, campaignStatuses, deliveries, newsletters, operations, segments } from "../db/schema";
import { outcomeUnknown } from "../sending/batch-settlement";

export type CampaignRow = typeof campaigns.$inferSelect;

/**
 * Inserts the campaign only if its newsletter (and segment, when it has one) exists in its workspace:
 * no row back means one of them does not (newsletters and segments are never deleted, so the check
 * stays true once made).
 */
export const insertCampaign = (db: Db, row: typeof campaigns.$inferInsert) =>
  insertWhere(
    db,
    campaigns,
    row,
    sql`EXISTS (SELECT 1 FROM ${newsletters} WHERE ${newsletters.id} = ${row.newsletterId} AND ${newsletters.workspaceId} = ${row.workspaceId})
        AND (${row.segmentId ?? null} IS NULL
             OR EXISTS (SELECT 1 FROM ${segments} WHERE ${segments.id} = ${row.segmentId ?? null} AND ${segments.workspaceId} = ${row.workspaceId}))`,
  );

export const findCampaign = (db: Db, workspaceId: string, id: string) =>
  db
    .select()
    .from(campaigns)
    .where(and(eq(campaigns.workspaceId, workspaceId), eq(campaigns.id, id)))
    .get();

/** The campaign's id if it is in the workspace (an empty list otherwise), for a read batch. */
export const campaignInWorkspace = (db: Db, workspaceId: string, id: string) =>
  db
    .select({ id: campaigns.id })
    .from(campaigns)
    .where(and(eq(campaigns.workspaceId, workspaceId), eq(campaigns.id, id)))
    .limit(1);

/**
 * One page, newest first; with a status, a range scan on (workspace_id, status, id). Bounded in size
 * as well as in rows: each campaign carries its templates (up to 768 KiB).
 */
export const listCampaignsPage = (
  db: Db,
  workspaceId: string,
  status: (typeof campaignStatuses)[number] | undefined,
  after: string | undefined,
  take: number,
) =>
  boundedPage<CampaignRow>(
    db,
    campaigns,
    and(
      eq(campaigns.workspaceId, workspaceId),
      status === undefined ? undefined : eq(campaigns.status, status),
      after === undefined ? undefined : lt(campaigns.id, after),
    ),
    sql<number>`coalesce(length(${campaigns.html}), 0) + coalesce(length(${campaigns.text}), 0) + length(${campaigns.subject})`,
    take,
  );

/** Only these can be edited: once a send is under way, the message is what it is. */
export const editableStatuses = ["draft", "scheduled"] as const;

export type CampaignChanges = Partial<Pick<CampaignRow, "subject" | "preheader" | "html" | "text" | "segmentId" | "scheduledAt">>;

const segmentExists = (workspaceId: string, segmentId: string | null | undefined) =>
  typeof segmentId === "string"
    ? sql`EXISTS (SELECT 1 FROM segments s WHERE s.id = ${segmentId} AND s.workspace_id = ${workspaceId})`
    : undefined;

/**
 * The statements of a campaign edit, decisive one last: the campaign changes only while it is a draft
 * or scheduled and its new segment (if any) exists. A scheduled campaign given a new `scheduled_at`
 * moves its queued send along, under the same conditions (the batch reads its start time first, so
 * the handler knows whether the send moved earlier); its `scheduled_at` cannot be cleared (a
 * scheduled send keeps a time: the edit changes nothing, and the handler says why).
 */
/** A queued send's start, before and after an edit of the campaign's scheduled_at. */
type Start = { id: string; startAt: number | null };

/**
 * A batch's statements, and how to read what it wrote from their results (the casts sit here, next to
 * the order they depend on).
 */
type Statements<Read> = { statements: BatchItem<"sqlite">[]; read: (results: readonly unknown[]) => Read };

/**
 * An edit of a draft or scheduled campaign: `row` is the campaign as written (none when nothing was:
 * not editable, or every value already there); `movedEarlier`, its queued send's start when the edit
 * moved it earlier (it needs a start message of its own, src/sending/producer.ts).
 */
export const updateCampaignStatements = (
  db: Db,
  workspaceId: string,
  id: string,
  changes: CampaignChanges,
  now: number,
): Statements<{ row: CampaignRow | undefined; movedEarlier: Start | undefined }> => {
  const editable = and(
    eq(campaigns.workspaceId, workspaceId),
    eq(campaigns.id, id),
    changes.scheduledAt === null ? eq(campaigns.status, "draft") : inArray(campaigns.status, editableStatuses),
    segmentExists(workspaceId, changes.segmentId),
    // A time already past only as the value already there (a PATCH that changes nothing of it).
    typeof changes.scheduledAt === "number" && changes.scheduledAt <= now ? sql`${campaigns.scheduledAt} IS ${changes.scheduledAt}` : undefined,
  );
  // Every value given already there: nothing written (the handler answers the campaign as it is).
  const update = db.update(campaigns).set({ ...changes, updatedAt: now }).where(and(editable, differs(campaigns, changes))).returning();
  if (changes.scheduledAt === undefined || changes.scheduledAt === null) {
    return { statements: [update], read: ([written]) => ({ row: (written as CampaignRow[])[0], movedEarlier: undefined }) };
  }
  const queued = and(eq(operations.campaignId, id), eq(operations.status, "queued"));
  const before = db.select({ id: operations.id, startAt: operations.startAt }).from(operations).where(queued);
  const reschedule = db
    .update(operations)
    .set({ startAt: changes.scheduledAt, updatedAt: now })
    .where(
      and(
        queued,
        sql`${operations.startAt} IS NOT ${changes.scheduledAt}`,
        // Never into the past (the edit then changes nothing, or is refused).
        sql`${changes.scheduledAt} > ${now}`,
        sql`EXISTS (SELECT 1 FROM campaigns c WHERE c.id = ${id} AND c.workspace_id = ${workspaceId} AND c.status = 'scheduled')`,
        segmentExists(workspaceId, changes.segmentId),
      ),
    )
    .returning({ id: operations.id, startAt: operations.startAt });
  return {
    statements: [before, reschedule, update],
    read: (results) => {
      const [[was], [moved], [row]] = results as [Start[], Start[], CampaignRow[]];
      return { row, movedEarlier: was && moved && (moved.startAt ?? 0) < (was.startAt ?? 0) ? moved : undefined };
    },
  };
};

/** The error a send canceled before it started ends with. */
const SEND_UNSCHEDULED = { code: "send_unscheduled", message: "The scheduled send was canceled before it started" } as const;

/**
 * Unscheduling, decisive statement last: the scheduled campaign's queued send ends `failed`, then the
 * campaign (only if that send was still queued, `changes()`) becomes a draft with no `scheduled_at`.
 * The start of the send moves the same two rows out of `queued` and `scheduled` in one batch, so
 * whichever commits first wins, whole.
 */
export const unscheduleStatements = (db: Db, workspaceId: string, id: string, now: number): Statements<CampaignRow | undefined> => ({
  statements: [
    db
      .update(operations)
      .set({ status: "failed", error: SEND_UNSCHEDULED, completedAt: now, updatedAt: now })
      .where(
        and(
          eq(operations.campaignId, id),
          eq(operations.workspaceId, workspaceId),
          eq(operations.status, "queued"),
          sql`EXISTS (SELECT 1 FROM campaigns c WHERE c.id = ${id} AND c.workspace_id = ${workspaceId} AND c.status = 'scheduled')`,
        ),
      ),
    db
      .update(campaigns)
      .set({ status: "draft", scheduledAt: null, updatedAt: now })
      .where(and(eq(campaigns.workspaceId, workspaceId), eq(campaigns.id, id), eq(campaigns.status, "scheduled"), sql`changes() > 0`))
      .returning(),
  ],
  read: (results) => (results[1] as CampaignRow[])[0],
});

/** The statuses an archive moves from: a campaign no send is waiting for or running. */
export const archivableStatuses = ["draft", "sent", "failed"] as const;

/** Archiving: the campaign, archived, or no row when it is not in an archivable status (or not here). */
export const archiveCampaignRow = (db: Db, workspaceId: string, id: string, now: number) =>
  db
    .update(campaigns)
    .set({ status: "archived", updatedAt: now })
    .where(and(eq(campaigns.workspaceId, workspaceId), eq(campaigns.id, id), inArray(campaigns.status, archivableStatuses)))
    .returning();

/** The error a send canceled while it ran ends with (its operation, and its deliveries never asked for). */
const SEND_CANCELED = { code: "send_canceled", message: "The send was canceled before it reached every recipient" } as const;

/** A delivery in a request the provider may have taken (its answer pending, lost or an error) when the send was canceled. */
const CANCELED_IN_FLIGHT = {
  code: outcomeUnknown.code,
  message:
    "The send was canceled after this message was in a request to the provider that may have taken it (one about to leave or on its way, or one answered with an error or not at all): it is not sent again, so that nobody gets two copies",
} as const;

/**
 * Canceling a `sending` campaign's send, decisive statement last: its operation (queued or running)
 * ends `failed` with `send_canceled`, its deliveries still queued end `failed` (with `send_canceled`,
 * or `outcome_unknown` for one that was in a provider request, which may have been taken), the
 * operation counts them, and the campaign (only if its send was just ended) becomes `failed`. A step
 * at work meanwhile writes nothing more: its settlement needs its rows queued, and a fan-out page its
 * operation running. The campaign, or no row when it is not sending (or not here).
 */
export const cancelSendStatements = (db: Db, workspaceId: string, id: string, now: number): Statements<CampaignRow | undefined> => {
  const sending = sql`EXISTS (SELECT 1 FROM campaigns c WHERE c.id = ${id} AND c.workspace_id = ${workspaceId} AND c.status = 'sending')`;
  const canceled = and(eq(operations.campaignId, id), eq(operations.status, "failed"), eq(operations.completedAt, now), sql`json_extract(${operations.error}, '$.code') = ${SEND_CANCELED.code}`);
  return {
    statements: [
      db
        .update(operations)
        .set({ status: "failed", error: SEND_CANCELED, completedAt: now, updatedAt: now })
        .where(and(eq(operations.campaignId, id), eq(operations.workspaceId, workspaceId), inArray(operations.status, ["queued", "running"]), sending)),
      db
        .update(deliveries)
        .set({
          status: "failed",
          error: sql`CASE WHEN ${deliveries.askedSeq} > 0 THEN ${JSON.stringify(CANCELED_IN_FLIGHT)} ELSE ${JSON.stringify(SEND_CANCELED)} END`,
          updatedAt: now,
        })
        .where(and(eq(deliveries.campaignId, id), eq(deliveries.status, "queued"), sql`EXISTS (SELECT 1 FROM ${operations} WHERE ${canceled})`)),
      db
        .update(operations)
        .set({ failed: sql`${operations.failed} + changes()`, updatedAt: now })
        .where(canceled),
      db
        .update(campaigns)
        .set({ status: "failed", sentAt: null, updatedAt: now })
        .where(and(eq(campaigns.workspaceId, workspaceId), eq(campaigns.id, id), eq(campaigns.status, "sending"), sql`EXISTS (SELECT 1 FROM ${operations} WHERE ${canceled})`))
        .returning(),
    ],
    read: (results) => (results[3] as CampaignRow[])[0],
  };
};
