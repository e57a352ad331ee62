import { eq, sql } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { Db } from "../db/client";
import { events, subscribers, workspaces } from "../db/schema";
import { bornDispatched, undispatchedIn } from "../events/event-statement";
import { snapshotJson } from "../idempotency/resources";
import { newId } from "../lib/ids";
import { emailKey } from "../lib/email";

// POST /subscribers/batch as one D1 batch whatever its size: the items travel as ONE bound JSON
// parameter, which each statement reads with json_each (D1 allows 100 parameters a statement, not
// rows). Every item gets its id here; an address already in the workspace keeps its subscriber
// (ON CONFLICT DO NOTHING), so exactly the items whose id ends up in the table were created.

type Item = { email: string; name?: string | null; tags?: string[]; location?: string | null; source?: string | null; status: string };

/** `value`'s field of the item json_each is at. */
const field = (name: string) => sql.raw(`json_extract(value, '$.${name}')`);

export const subscriberBatchStatements = (db: Db, workspaceId: string, items: readonly Item[], now: number) => {
  const rows = JSON.stringify(
    items.map((item) => ({
      id: newId("subscriber", now),
      email: item.email,
      key: emailKey(item.email),
      name: item.name ?? null,
      status: item.status,
      // As text: the column holds the list as JSON text.
      tags: JSON.stringify(item.tags ?? []),
      location: item.location ?? null,
      source: item.source ?? null,
    })),
  );
  const ids = sql`(SELECT ${field("id")} FROM json_each(${rows}))`;
  // (`WHERE true`: an INSERT … SELECT with an upsert clause needs one, or SQLite reads ON as a join's.)
  const insert = db.insert(subscribers).select(sql`
    SELECT ${field("id")}, ${workspaceId}, ${field("email")}, ${field("key")}, ${field("name")}, ${field("status")},
           NULL, NULL, ${field("tags")}, ${field("location")}, ${field("source")}, ${now}, ${now}
      FROM json_each(${rows}) WHERE true ORDER BY key`).onConflictDoNothing();
  // One subscriber.created per subscriber created, its id the subscriber's own ULID (made now, unique).
  const created = db
    .insert(events)
    .select(
      sql`
    SELECT 'evt_' || substr(id, 5), workspace_id, 'subscriber.created', 'subscriber', id, ${snapshotJson("subscriber")}, ${now},
           ${bornDispatched(sql`${subscribers}`, "subscriber.created", now)}
      FROM ${subscribers} WHERE id IN ${ids} ORDER BY id`,
    )
    .returning({ id: events.id, dispatchedAt: events.dispatchedAt });
  // The answer, item by item in the request's order: the subscriber its address now has, and
  // whether it is the one this batch made. The owner is looked up per item by the workspace's unique
  // address index: written as a join, SQLite may read every subscriber of the workspace and scan
  // the items for each (it did on D1: a second per 10,000 subscribers already there).
  const elements = sql`(SELECT json_group_array(json(element)) FROM (
    SELECT json_object('index', item.idx, 'created', item.owner = item.id, 'subscriber_id', item.owner) AS element
      FROM (SELECT key AS idx, ${field("id")} AS id,
                   (SELECT owner.id FROM ${subscribers} AS owner
                     WHERE owner.workspace_id = ${workspaceId} AND owner.email_key = ${field("key")}) AS owner
              FROM json_each(${rows})) AS item
     ORDER BY item.idx))`;
  const answer = db.select({ elements: sql<string>`${elements}` }).from(workspaces).where(eq(workspaces.id, workspaceId));
  return {
    statements: [insert, created, answer] as [BatchItem<"sqlite">, BatchItem<"sqlite">, BatchItem<"sqlite">],
    elements,
    /** The answer's elements and the events still to dispatch, from the batch's results. */
    read: (results: readonly unknown[]) => {
      const [, written, [answered]] = results as [unknown, { id: string; dispatchedAt: number | null }[], { elements: string }[]];
      return {
        elements: JSON.parse(answered?.elements ?? "[]") as unknown[],
        undispatched: written.filter((event) => undispatchedIn([event])).map((event) => event.id),
      };
    },
  };
};
