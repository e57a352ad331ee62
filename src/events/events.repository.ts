import { and, desc, eq, lt } from "drizzle-orm";
import type { Db } from "../db/client";
import { events, type eventTypes } from "../db/schema";

export const findEvent = (db: Db, workspaceId: string, id: string) =>
  db.select().from(events).where(and(eq(events.workspaceId, workspaceId), eq(events.id, id))).get();

/** One page, newest first: a range scan on (workspace_id, [type,] id). */
export const listEventsPage = (
  db: Db,
  workspaceId: string,
  type: (typeof eventTypes)[number] | undefined,
  after: string | undefined,
  take: number,
) =>
  db
    .select()
    .from(events)
    .where(
      and(
        eq(events.workspaceId, workspaceId),
        type === undefined ? undefined : eq(events.type, type),
        after === undefined ? undefined : lt(events.id, after),
      ),
    )
    .orderBy(desc(events.id))
    .limit(take);
