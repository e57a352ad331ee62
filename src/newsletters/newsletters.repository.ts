import { and, desc, eq, lt } from "drizzle-orm";
import type { Db } from "../db/client";
import { differs } from "../db/differs";
import { newsletters } from "../db/schema";

type NewsletterRow = typeof newsletters.$inferSelect;

export const insertNewsletter = (db: Db, row: typeof newsletters.$inferInsert) =>
  db.insert(newsletters).values(row).returning();

export const findNewsletter = (db: Db, workspaceId: string, id: string) =>
  db
    .select()
    .from(newsletters)
    .where(and(eq(newsletters.workspaceId, workspaceId), eq(newsletters.id, id)))
    .get();

export const listNewslettersPage = (db: Db, workspaceId: string, after: string | undefined, take: number) =>
  db
    .select()
    .from(newsletters)
    .where(and(eq(newsletters.workspaceId, workspaceId), after === undefined ? undefined : lt(newsletters.id, after)))
    .orderBy(desc(newsletters.id))
    .limit(take);

export type NewsletterChanges = Partial<Pick<NewsletterRow, "name" | "fromName" | "fromEmail" | "replyTo" | "address">>;

/** No row back: no such newsletter, or every value given is already there (nothing written). */
export const updateNewsletter = (db: Db, workspaceId: string, id: string, changes: NewsletterChanges, now: number) =>
  db
    .update(newsletters)
    .set({ ...changes, updatedAt: now })
    .where(and(eq(newsletters.workspaceId, workspaceId), eq(newsletters.id, id), differs(newsletters, changes)))
    .returning();
