import { and, desc, eq, lt } from "drizzle-orm";
import type { Db } from "../db/client";
import { deliveries, type deliveryStatuses, operations } from "../db/schema";
import type { CampaignStats } from "./operations.schemas";


export const findOperation = (db: Db, workspaceId: string, id: string) =>
  db
    .select()
    .from(operations)
    .where(and(eq(operations.workspaceId, workspaceId), eq(operations.id, id)))
    .get();

/** The campaign's newest send operation (a campaign that is not a draft names it in its 409). */
export const findLatestOperation = (db: Db, campaignId: string) =>
  db.select({ id: operations.id }).from(operations).where(eq(operations.campaignId, campaignId)).orderBy(desc(operations.id)).limit(1).get();

/**
 * A campaign's deliveries, newest first: keyset on the (campaign_id, id) index, or with a status on
 * (campaign_id, status, id); a subscriber's is one lookup on (campaign_id, subscriber_id).
 */
export const listDeliveriesPage = (
  db: Db,
  campaignId: string,
  filter: { status?: (typeof deliveryStatuses)[number]; subscriber_id?: string },
  after: string | undefined,
  take: number,
) =>
  db
    .select()
    .from(deliveries)
    .where(
      and(
        eq(deliveries.campaignId, campaignId),
        filter.status === undefined ? undefined : eq(deliveries.status, filter.status),
        filter.subscriber_id === undefined ? undefined : eq(deliveries.subscriberId, filter.subscriber_id),
        after === undefined ? undefined : lt(deliveries.id, after),
      ),
    )
    .orderBy(desc(deliveries.id))
    .limit(take);

type StatsRow = Omit<CampaignStats, "object" | "campaign_id">;

/** Exact counts over a campaign's deliveries, in one query; undefined when the campaign is not in the workspace. */
export const campaignStats = (d1: D1Database, workspaceId: string, campaignId: string) =>
  d1
    .prepare(
      `SELECT count(d.id) AS recipients,
              coalesce(sum(d.status = 'queued'), 0) AS queued,
              coalesce(sum(d.status = 'sent'), 0) AS sent,
              coalesce(sum(d.status = 'delivered'), 0) AS delivered,
              coalesce(sum(d.status = 'bounced'), 0) AS bounced,
              coalesce(sum(d.status = 'complained'), 0) AS complained,
              coalesce(sum(d.status = 'failed'), 0) AS failed,
              count(d.opened_at) AS opened,
              count(d.clicked_at) AS clicked,
              count(d.unsubscribed_at) AS unsubscribed
         FROM campaigns c LEFT JOIN deliveries d ON d.campaign_id = c.id
        WHERE c.workspace_id = ?1 AND c.id = ?2
        GROUP BY c.id`,
    )
    .bind(workspaceId, campaignId)
    .first<StatsRow>()
    .then((row) => row ?? undefined);
