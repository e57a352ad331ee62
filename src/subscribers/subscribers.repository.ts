import { and, desc, eq, exists, getTableColumns, lt, notExists, or, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { differs, holdsAll } from "../db/differs";
import { subscribers, subscriberTags } from "../db/schema";
import type { CommitEvent } from "../events/write-events";
import { emailKey } from "../lib/email";
import { TAGS_MAX } from "../lib/schemas";

type SubscriberRow = typeof subscribers.$inferSelect;
type Status = SubscriberRow["status"];

// `subscriber_tags` is kept in step with `subscribers.tags` by triggers (migrations/0001), so every
// write here is a single statement, atomic by itself.

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

/** Tags added and removed in the write itself (PATCH's add_tags / remove_tags). */
export type TagEdit = { add: string[]; remove: string[] };

/** The list an edit leaves: the subscriber's own, less those removed, then those added it lacked, in order. */
export const editedTags = (tags: string[], edit: TagEdit): string[] => {
  const removed = new Set(edit.remove);
  const kept = tags.filter((tag) => !removed.has(tag));
  return [...kept, ...edit.add.filter((tag) => !kept.includes(tag) && !removed.has(tag))];
};

/** `editedTags` in SQL, of the row being written: concurrent edits each apply to what the other left. */
const editedTagsSql = (edit: TagEdit) => sql`(SELECT json_group_array(value) FROM (
  SELECT value FROM (
    SELECT value, 0 AS part, key AS position FROM json_each(${subscribers.tags})
    UNION ALL
    SELECT value, 1, key FROM json_each(${JSON.stringify(edit.add)}) WHERE value NOT IN (SELECT value FROM json_each(${subscribers.tags}))
  )
  WHERE value NOT IN (SELECT value FROM json_each(${JSON.stringify(edit.remove)}))
  ORDER BY part, position
))`;

/** Whether a subscriber already holds every value a PATCH gave (and the tag list its edit leaves): nothing to write. */
export const holdsAllChanges = (current: SubscriberRow, given: Partial<SubscriberRow>, tags: string[] | undefined): boolean =>
  holdsAll(subscribers, current, given) && (!tags || holdsAll(subscribers, current, { tags }));

/**
 * The events of a PATCH, one per change: a write that moves the status to unsubscribed or bounced
 * is that event (its object shows every other field it changed too), as when a link, a complaint or
 * a bounce moves it; any other change is subscriber.updated. Which one is decided inside the batch,
 * by the status the row had before it.
 */
export const subscriberUpdateEvents = (id: string, status: SubscriberRow["status"] | undefined): CommitEvent[] => {
  const moved = status === "unsubscribed" || status === "bounced" ? status : undefined;
  if (!moved) return [{ type: "subscriber.updated", resource: "subscriber", id }];
  return [
    { type: "subscriber.updated", resource: "subscriber", id, onlyIfBefore: sql`status = ${moved}` },
    { type: `subscriber.${moved}`, resource: "subscriber", id, onlyIfBefore: sql`status <> ${moved}` },
  ];
};

/** The values a PATCH gives, as they are compared with the row's (not its time, nor the email's key, which follow). */
export const givenValues = ({ updatedAt: _, emailKey: __, ...given }: SubscriberChanges) => given;

/**
 * Applies the changes unless the new email belongs to another subscriber of the workspace (checked
 * in the same statement) or they change nothing (every value given is the one already there: no
 * write, so no `updated_at` moved and no event); no row back means not found, email taken, unchanged,
 * or a tag edit that would pass TAGS_MAX.
 */
export const updateSubscriber = (db: Db, workspaceId: string, id: string, changes: SubscriberChanges, tagEdit?: TagEdit) => {
  const alias = sql`other`;
  const given = givenValues(changes);
  const edited = tagEdit && editedTagsSql(tagEdit);
  const set = changes.status === undefined ? changes : { ...changes, statusSource: statusSetByApi(changes.status) };
  return db
    .update(subscribers)
    .set(edited ? { ...set, tags: edited } : set)
    .where(
      and(
        eq(subscribers.workspaceId, workspaceId),
        eq(subscribers.id, id),
        edited ? sql`json_array_length(${edited}) <= ${TAGS_MAX}` : undefined,
        or(differs(subscribers, given), edited ? sql`${subscribers.tags} IS NOT ${edited}` : undefined),
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

/**
 * One page, newest first: every filter is a range scan on an index ending in the id. With an email,
 * the workspace's unique address index finds the one subscriber it can be, and a tag is then one
 * lookup by subscriber_tags' key (read from the tag's side, the page would scan every member of the
 * tag for one address). A tag with a status reads the tag's members in id order until the page is
 * full: its cost grows with the members of the tag whose status is another.
 */
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
  if (filter.tag !== undefined && filter.email === undefined) {
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
        filter.tag === undefined
          ? undefined
          : exists(
              db
                .select({ one: sql`1` })
                .from(subscriberTags)
                .where(and(eq(subscriberTags.workspaceId, workspaceId), eq(subscriberTags.tag, filter.tag), eq(subscriberTags.subscriberId, subscribers.id))),
            ),
      ),
    )
    .orderBy(desc(subscribers.id))
    .limit(take);
};

