import { type SQL, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { writeMarks } from "../db/schema";
import { resources } from "../idempotency/resources";
import { newId } from "../lib/ids";
import { type EventSpec, eventStatement } from "./event-statement";

/** An event of an HTTP write (src/db/commit.ts): written iff the write applied, and its own conditions hold. */
export type CommitEvent = EventSpec & {
  /** Also required, of the row as the write left it (e.g. the campaign is now `sending`). */
  onlyIf?: SQL;
  /** Also required, of the row as it was before the write (e.g. its status was not yet `unsubscribed`). */
  onlyIfBefore?: SQL;
};

/**
 * The statements that put a write's events into its batch, around its own statements: `before`
 * (ahead of them), `after` (right after the write's decisive statement, its last) and `clear` (after
 * the Idempotency-Key record). `applied` is the condition "the write applied" for the record, placed
 * between `after` and `clear`; undefined when the record may ask `changes() > 0` of the statement just
 * before it. `eventsAt` is where the events start in `after`.
 *
 * Events without conditions of their own (a created or updated row) need nothing else: each is written
 * iff the statement just before it changed something, the write for the first, the event before it
 * for the next, and so on, and the record asks the last event the same. Otherwise marks carry the
 * conditions: `before` marks each event whose condition holds of the row before the write, `after`
 * marks whether the write changed something, then inserts each event whose marks are there, and
 * `clear` removes the marks. A mark lives only inside the batch, which D1 runs as one transaction:
 * no other write sees it.
 */
export const writeEvents = (db: Db, list: readonly CommitEvent[], now: number) => {
  const ids = list.map(() => newId("event", now));
  if (list.every((event) => !event.onlyIf && !event.onlyIfBefore)) {
    const after = list.map((event, i) => eventStatement(db, { ...event, eventId: ids[i] as string, now }));
    return { before: [], after, clear: [], applied: undefined, ids, eventsAt: 0 };
  }
  const mark = `w_${crypto.randomUUID()}`;
  const applied = sql`EXISTS (SELECT 1 FROM ${writeMarks} WHERE id = ${mark})`;
  const marks = [mark];
  const before = list.flatMap((event, i) => {
    if (!event.onlyIfBefore) return [];
    const own = `${mark}:${i}`;
    marks.push(own);
    return [
      db
        .insert(writeMarks)
        .select(sql`SELECT ${own} FROM ${resources[event.resource].table} WHERE id = ${event.id} AND (${event.onlyIfBefore})`),
    ];
  });
  const after = [
    db.insert(writeMarks).select(sql`SELECT ${mark} WHERE changes() > 0`),
    ...list.map((event, i) => {
      const conditions = [applied];
      if (event.onlyIfBefore) conditions.push(sql`EXISTS (SELECT 1 FROM ${writeMarks} WHERE id = ${`${mark}:${i}`})`);
      if (event.onlyIf) conditions.push(sql`(${event.onlyIf})`);
      return eventStatement(db, { ...event, eventId: ids[i] as string, now, when: sql.join(conditions, sql` AND `) });
    }),
  ];
  const clear = [db.delete(writeMarks).where(sql`id IN (${sql.join(marks.map((m) => sql`${m}`), sql`, `)})`)];
  return { before, after, clear, applied, ids, eventsAt: 1 };
};
