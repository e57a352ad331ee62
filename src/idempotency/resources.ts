import { getTableColumns, type Table } from "drizzle-orm";
import { toSnakeCase } from "drizzle-orm/casing";
import { campaigns, newsletters, operations, segments, subscribers } from "../db/schema";
import { serializeCampaign } from "../campaigns/campaigns.schemas";
import { serializeNewsletter } from "../newsletters/newsletters.schemas";
import { serializeOperation } from "../operations/operations.schemas";
import { serializeSegment } from "../segments/segments.schemas";
import { serializeSubscriber } from "../subscribers/subscribers.schemas";

// The resources a write can answer with. A write's Idempotency-Key record holds a snapshot of the
// resource's row, taken by SQL in the write's own batch; a replay renders it with the same serializer
// the live answer used, so both are the same bytes.

type Resource<T extends Table> = { table: T; serialize: (row: T["$inferSelect"]) => unknown };

const resource = <T extends Table>(table: T, serialize: (row: T["$inferSelect"]) => unknown): Resource<T> => ({
  table,
  serialize,
});

export const resources = {
  subscriber: resource(subscribers, serializeSubscriber),
  newsletter: resource(newsletters, serializeNewsletter),
  segment: resource(segments, serializeSegment),
  campaign: resource(campaigns, serializeCampaign),
  operation: resource(operations, serializeOperation),
};

export type ResourceKind = keyof typeof resources;

type Column = ReturnType<typeof getTableColumns>[string];

/** The column's name in SQL (the schema names columns by their key, in snake_case). */
export const sqlName = (key: string, column: Column) => (column.keyAsName ? toSnakeCase(key) : column.name);

/** A row as SQLite's json_object() wrote it (keys = SQL column names), back to drizzle's row shape. */
export const rowFromSnapshot = (kind: ResourceKind, snapshot: Record<string, unknown>) => {
  const row: Record<string, unknown> = {};
  for (const [key, column] of Object.entries(getTableColumns(resources[kind].table))) {
    const value = snapshot[sqlName(key, column)];
    row[key] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
  }
  return row;
};

/** The body a write answers with, for a row of `kind`: `{ "data": <resource> }`. */
export const renderResource = (kind: ResourceKind, row: Record<string, unknown>) =>
  JSON.stringify({ data: (resources[kind].serialize as (r: Record<string, unknown>) => unknown)(row) });
