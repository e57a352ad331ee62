import { and, desc, eq, getTableColumns, lt, notExists, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { differs } from "../db/differs";
import { subscribers, subscriberTags } from "../db/schema";

type SubscriberRow = typeof subscribers.$inferSelect;
type Status = SubscriberRow["status"];

// `subscriber_tags` is kept in step with `subscribers.tags` by triggers (migrations/0001), so every
// write here is a single statement, atomic by itself.

export const emailKey = (email: string) => email.toLowerCase();

export const findSubscriber = (db: Db, workspaceId: string, id: string) =>
  db
    .select()
    .from(subscribers)
    .where(and(eq(subscribers.workspaceId, workspaceId), eq(subscribers.id, id)))
    .get();

export const findSubscriberIdByEmail = (db: Db, workspaceId: string, email: string) =>
  db
    .select({ id: subscribers.id })
    .from(subscribers)
    .where(and(eq(subscribers.workspaceId, workspaceId), eq(subscribers.emailKey, emailKey(email))))
    .get();

/** Inserts unless the email is taken in the workspace (then it returns no row). */
export const insertSubscriber = (db: Db, row: typeof subscribers.$inferInsert) =>
  db.insert(subscribers).values(row).onConflictDoNothing().returning();

export type SubscriberChanges = Partial<
  Pick<SubscriberRow, "email" | "emailKey" | "name" | "tags" | "location" | "source" | "status">
> & { updatedAt: number };

/**
 * A status set through the API: when it changes the status, the API is what set it (so an address the
 * API unsubscribed cannot come back through an unsubscribe link); setting the same status keeps the
 * record of what set it first.
 */
const statusSetByApi = (status: SubscriberRow["status"]) =>
  sql`CASE WHEN ${subscribers.status} = ${status} THEN ${subscribers.statusSource} ELSE 'api' END`;

/**
 * Applies the changes unless the new email belongs to another subscriber of the workspace (checked
 * in the same statement) or they change nothing (every value given is the one already there: no
 * write, so no `updated_at` moved and no event); no row back means not found, email taken or unchanged.
 */
export const updateSubscriber = (db: Db, workspaceId: string, id: string, changes: SubscriberChanges) => {
  const alias = sql`other`;
  const { updatedAt: _, emailKey: __, ...given } = changes;
  return db
    .update(subscribers)
    .set(changes.status === undefined ? changes : { ...changes, statusSource: statusSetByApi(changes.status) })
    .where(
      and(
        eq(subscribers.workspaceId, workspaceId),
        eq(subscribers.id, id),
        differs(subscribers, given),
        changes.emailKey === undefined
          ? undefined
          : notExists(
              sql`(select 1 from ${subscribers} as ${alias} where ${alias}.workspace_id = ${workspaceId} and ${alias}.email_key = ${changes.emailKey} and ${alias}.id <> ${id})`,
            ),
      ),
    )
    .returning();
};

type SubscriberFilter = { status?: Status; tag?: string; email?: string };

/** One page, newest first: every filter is a range scan on an index ending in the id. */
export const listSubscribersPage = (
  db: Db,
  workspaceId: string,
  filter: SubscriberFilter,
  after: string | undefined,
  take: number,
): Promise<SubscriberRow[]> => {
  const common = and(
    filter.status === undefined ? undefined : eq(subscribers.status, filter.status),
    filter.email === undefined ? undefined : eq(subscribers.emailKey, emailKey(filter.email)),
  );
  if (filter.tag !== undefined) {
    return db
      .select(getTableColumns(subscribers))
      .from(subscriberTags)
      .innerJoin(subscribers, eq(subscribers.id, subscriberTags.subscriberId))
      .where(
        and(
          eq(subscriberTags.workspaceId, workspaceId),
          eq(subscriberTags.tag, filter.tag),
          after === undefined ? undefined : lt(subscriberTags.subscriberId, after),
          common,
        ),
      )
      .orderBy(desc(subscriberTags.subscriberId))
      .limit(take);
  }
  return db
    .select()
    .from(subscribers)
    .where(
      and(
        eq(subscribers.workspaceId, workspaceId),
        after === undefined ? undefined : lt(subscribers.id, after),
        common,
      ),
    )
    .orderBy(desc(subscribers.id))
    .limit(take);
};

