import { is } from "drizzle-orm";
import { getTableConfig, SQLiteTable } from "drizzle-orm/sqlite-core";
import * as schema from "../db/schema";
import { columnSqlName } from "./column-name";

/**
 * One query per table the code uses, reading every column it knows of (no rows): a database behind
 * the code (a deploy without its migrations) fails on the first table or column it lacks, with
 * SQLite's "no such table" or "no such column" (configurationProblemOf turns that into a 503).
 */
let queries: string[] | undefined;
export const schemaProbeQueries = (): string[] =>
  (queries ??= (Object.values(schema) as unknown[])
    .filter((table): table is SQLiteTable => is(table, SQLiteTable))
    .map((table) => {
      const config = getTableConfig(table);
      // Backquoted: SQLite reads a double-quoted name it does not know as a string, which would hide it.
      const names = config.columns.map(columnSqlName);
      return `SELECT ${names.map((name) => `\`${name}\``).join(", ")} FROM \`${config.name}\` LIMIT 0`;
    }));
