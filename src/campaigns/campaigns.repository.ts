import { and, desc, eq, lt } from "drizzle-orm";
import type { Db } from "../db/client";
import { campaigns, campaignStatuses } from "../db/schema";

export type CampaignRow = typeof campaigns.$inferSelect;

export const insertCampaign = (db: Db, row: typeof campaigns.$inferInsert) =>
  db.insert(campaigns).values(row).returning().get();

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
