import { getTableColumns, or, type SQL, sql } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";

/**
 * True in SQL when any value given differs from the row's (NULL-safe `IS NOT`, each value encoded as
 * its column stores it: JSON text, 0/1, epoch ms). An update carrying it in its WHERE writes nothing
 * when every value given is already there, so a no-op PATCH moves no `updated_at` and reports no
 * change. Values left undefined are not given.
 */
export const differs = <T extends SQLiteTable>(table: T, values: Partial<T["$inferSelect"]>): SQL | undefined => {
  const columns = getTableColumns(table);
  return or(
    ...Object.entries(values)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => {
        const column = columns[key];
        if (!column) throw new Error(`differs: ${key} is not a column`);
        return value === null ? sql`${column} IS NOT NULL` : sql`${column} IS NOT ${column.mapToDriverValue(value)}`;
      }),
  );
};

/**
 * The twin of `differs` for a row read back: whether every value given is already the row's,
 * compared as the column stores them (JSON text, 0/1, epoch ms), as the SQL compares them.
 */
export const holdsAll = <T extends SQLiteTable>(table: T, row: T["$inferSelect"], values: Partial<T["$inferSelect"]>): boolean => {
  const columns = getTableColumns(table);
  return Object.entries(values)
    .filter(([, value]) => value !== undefined)
    .every(([key, value]) => {
      const column = columns[key];
      if (!column) throw new Error(`holdsAll: ${key} is not a column`);
      const stored = (row as Record<string, unknown>)[key];
      return value === null || stored === null ? value === stored : column.mapToDriverValue(value) === column.mapToDriverValue(stored);
    });
};
