import { desc, eq, lte, or, type SQL, sql } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db } from "./client";

/**
 * How many characters of large text (campaign templates, event snapshots) one page of a list may
 * carry: a page of 100 campaigns at the template limits would hold 77 MB, past what a Worker can
 * build a response from. A page stops before the item that would take it over (it always holds at
 * least one) and says `has_more`, so `limit` is the most a page holds, as it always was.
 */
const PAGE_CHARACTERS = 4_000_000;

/**
 * One page of `table`, newest first: the first `take` rows that `where` selects, cut before the row
 * whose `size` would take the page past PAGE_CHARACTERS (the first row is always in). One statement: the rows' sizes are summed
 * over the page (a window over the limited range scan), and only the rows that fit are read whole.
 * `truncated`: rows were left out for their size.
 */
export const boundedPage = async <Row>(
  db: Db,
  table: SQLiteTable & { id: SQLiteColumn },
  where: SQL | undefined,
  size: SQL<number>,
  take: number,
): Promise<{ rows: Row[]; truncated: boolean }> => {
  const page = db.select({ id: table.id, size: size.as("size") }).from(table).where(where).orderBy(desc(table.id)).limit(take).as("page");
  const sized = db
    .select({
      id: page.id,
      through: sql<number>`sum(${page.size}) over (order by ${page.id} desc)`.as("through"),
      first: sql<number>`row_number() over (order by ${page.id} desc) = 1`.as("first"),
      fetched: sql<number>`count(*) over ()`.as("fetched"),
    })
    .from(page)
    .as("sized");
  const found = await db
    .select({ row: table, fetched: sized.fetched })
    .from(table)
    .innerJoin(sized, eq(sized.id, table.id))
    .where(or(lte(sized.through, PAGE_CHARACTERS), eq(sized.first, 1)))
    .orderBy(desc(table.id));
  return { rows: found.map((f) => f.row as Row), truncated: found.length < (found[0]?.fetched ?? 0) };
};
