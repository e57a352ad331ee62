import { and, eq, lt, sql } from "drizzle-orm";
import { boundedPage } from "../db/bounded-page";
import type { Db } from "../db/client";
import { events, type eventTypes } from "../db/schema";

export const findEvent = (db: Db, workspaceId: string, id: string) =>
  db.select().from(events).where(and(eq(events.workspaceId, workspaceId), eq(events.id, id))).get();

/**
 * One page, newest first: a range scan on (workspace_id, [type,] id), bounded in size as well as in
 * rows (an event carries its resource: a campaign's templates can make one 1.5 MB).
 */
export const listEventsPage = (
  db: Db,
  workspaceId: string,
  type: (typeof eventTypes)[number] | undefined,
  after: string | undefined,
  take: number,
) =>
  boundedPage<typeof events.$inferSelect>(
    db,
    events,
    and(
      eq(events.workspaceId, workspaceId),
      type === undefined ? undefined : eq(events.type, type),
      after === undefined ? undefined : lt(events.id, after),
    ),
    sql<number>`length(${events.snapshot})`,
    take,
  );
