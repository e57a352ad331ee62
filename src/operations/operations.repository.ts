import { and, desc, eq, lt } from "drizzle-orm";
import type { Db } from "../db/client";
import { deliveries, operations } from "../db/schema";

export type OperationRow = typeof operations.$inferSelect;

export const findOperation = (db: Db, workspaceId: string, id: string) =>
  db
    .select()
    .from(operations)
    .where(and(eq(operations.workspaceId, workspaceId), eq(operations.id, id)))
    .get();

/** A campaign's deliveries, newest first (keyset on the (campaign_id, id) index). */
export const listDeliveriesPage = (db: Db, campaignId: string, after: string | undefined, take: number) =>
  db
    .select()
    .from(deliveries)
    .where(and(eq(deliveries.campaignId, campaignId), after === undefined ? undefined : lt(deliveries.id, after)))
    .orderBy(desc(deliveries.id))
    .limit(take);
