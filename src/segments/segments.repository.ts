import { and, desc, eq, lt } from "drizzle-orm";
import type { Db } from "../db/client";
import { segments } from "../db/schema";


export const insertSegment = (db: Db, row: typeof segments.$inferInsert) =>
  db.insert(segments).values(row).returning();

export const findSegment = (db: Db, workspaceId: string, id: string) =>
  db
    .select()
    .from(segments)
    .where(and(eq(segments.workspaceId, workspaceId), eq(segments.id, id)))
    .get();

export const listSegmentsPage = (db: Db, workspaceId: string, after: string | undefined, take: number) =>
  db
    .select()
    .from(segments)
    .where(and(eq(segments.workspaceId, workspaceId), after === undefined ? undefined : lt(segments.id, after)))
    .orderBy(desc(segments.id))
    .limit(take);
