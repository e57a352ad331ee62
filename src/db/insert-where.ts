import { getTableColumns, is, SQL, sql } from "drizzle-orm";
import type { SQLiteInsertValue, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db } from "./client";

/**
 * `INSERT … SELECT <row> WHERE <condition> RETURNING *`: the row is inserted only when the condition
 * holds, decided inside the write's own statement (e.g. "the referenced newsletter exists in this
 * workspace", "the statement before changed a row"), so a write needs no read before it. Values may
 * be SQL expressions; columns follow the table definition, so a new column cannot be misplaced.
 */
export const insertWhere = <T extends SQLiteTable>(db: Db, table: T, row: SQLiteInsertValue<T>, condition: SQL) => {
  const values = Object.entries(getTableColumns(table)).map(([key, column]) => {
    const value = (row as Record<string, unknown>)[key];
    if (is(value, SQL)) return value;
    if (value === undefined) return column.default === undefined ? sql`NULL` : sql`${column.mapToDriverValue(column.default)}`;
    return value === null ? sql`NULL` : sql`${column.mapToDriverValue(value)}`;
  });
  return db
    .insert(table)
    .select(sql`SELECT ${sql.join(values, sql`, `)} WHERE ${condition}`)
    .returning();
};
