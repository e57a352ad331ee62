import { toSnakeCase } from "drizzle-orm/casing";

/**
 * A column's name in SQL: the schema names most columns by their key, which the database client
 * turns into snake_case (src/db/client.ts); a column given a name keeps it.
 */
export const columnSqlName = (column: { keyAsName: boolean; name: string }): string =>
  column.keyAsName ? toSnakeCase(column.name) : column.name;
