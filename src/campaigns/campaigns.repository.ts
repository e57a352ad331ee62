import { and, desc, eq, lt, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { insertWhere } from "../db/insert-where";
import { campaigns, campaignStatuses, newsletters, segments } from "../db/schema";

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

/** One page, newest first; with a status, a range scan on (workspace_id, status, id). */
export const listCampaignsPage = (
  db: Db,
  workspaceId: string,
  status: (typeof campaignStatuses)[number] | undefined,
  after: string | undefined,
  take: number,
) =>
  db
    .select()
    .from(campaigns)
    .where(
      and(
        eq(campaigns.workspaceId, workspaceId),
        status === undefined ? undefined : eq(campaigns.status, status),
        after === undefined ? undefined : lt(campaigns.id, after),
      ),
    )
    .orderBy(desc(campaigns.id))
    .limit(take);
