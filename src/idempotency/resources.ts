import { getTableColumns, sql, type SQL, type Table } from "drizzle-orm";
import { columnSqlName } from "../lib/column-name";
import { campaigns, deliveries, newsletters, operations, segments, subscribers, webhookAttempts, webhookEndpoints } from "../db/schema";
import { serializeCampaign } from "../campaigns/campaigns.schemas";
import { serializeNewsletter } from "../newsletters/newsletters.schemas";
import { serializeDelivery, serializeOperation } from "../operations/operations.schemas";
import { serializeSegment } from "../segments/segments.schemas";
import { serializeSubscriber, serializeSubscriberBatch, type SubscriberBatchRow } from "../subscribers/subscribers.schemas";
import {
  serializeDeletedEndpoint,
  serializeEndpoint,
  serializeEndpointWithSecret,
} from "../webhooks/endpoints.schemas";
import { serializeAttempt } from "../webhooks/attempts.schemas";

// The resources a write can answer with, and that an event can carry. A write's Idempotency-Key
// record and an event (src/events/outbox.ts) both hold a snapshot of the resource's row, taken by SQL
// (`snapshotJson`) in the write's own batch; rendering it uses the same serializer as the live
// answer, so a replay is the same bytes and an event shows the resource as the API does.

type Resource<T extends Table> = {
  table: T;
  serialize: (row: T["$inferSelect"]) => unknown;
  /** Columns the serializer never shows, left out of snapshots too (they would outlive the row's own value). */
  unshown: readonly string[];
};

const resource = <T extends Table>(
  table: T,
  serialize: (row: T["$inferSelect"]) => unknown,
  unshown: readonly (keyof T["$inferSelect"] & string)[] = [],
): Resource<T> => ({ table, serialize, unshown });

export const resources = {
  subscriber: resource(subscribers, serializeSubscriber),
  newsletter: resource(newsletters, serializeNewsletter),
  segment: resource(segments, serializeSegment),
  campaign: resource(campaigns, serializeCampaign),
  operation: resource(operations, serializeOperation),
  /** What `delivery.bounced` and `delivery.complained` events carry (written by the provider webhooks). */
  delivery: resource(deliveries, serializeDelivery),
  // The endpoint as events and the other answers show it: without its signing secret, which an
  // event would otherwise keep beyond rotate_secret.
  webhook_endpoint: resource(webhookEndpoints, serializeEndpoint, ["secret"]),
  /**
   * The answer of create and rotate_secret, the only ones that show the secret: their keyed record
   * keeps it for the key's 24 h, so that a retry gets the answer it lost (README, "Idempotency").
   */
  webhook_endpoint_with_secret: resource(webhookEndpoints, serializeEndpointWithSecret),
  deleted_webhook_endpoint: resource(webhookEndpoints, serializeDeletedEndpoint),
  webhook_attempt: resource(webhookAttempts, serializeAttempt),
};

export type ResourceKind = keyof typeof resources;

/**
 * SQL for the row of `kind` the enclosing query selects, as one JSON object keyed by SQL column
 * name: `json_object('id', id, 'email', email, …)`. Use it where `kind`'s table is the FROM.
 */
export const snapshotJson = (kind: ResourceKind): SQL => {
  const { table, unshown } = resources[kind];
  const shown = Object.entries(getTableColumns(table as Table)).filter(([key]) => !unshown.includes(key));
  const columns = shown.map(([, column]) => {
    const name = columnSqlName(column);
    // Names come from the schema, never from a request.
    return sql`${sql.raw(`'${name}'`)}, ${sql.identifier(name)}`;
  });
  return sql`json_object(${sql.join(columns, sql`, `)})`;
};

/** A row as SQLite's json_object() wrote it (keys = SQL column names), back to drizzle's row shape. */
export const rowFromSnapshot = (kind: ResourceKind, snapshot: Record<string, unknown>) => {
  const row: Record<string, unknown> = {};
  for (const [key, column] of Object.entries(getTableColumns(resources[kind].table))) {
    const value = snapshot[columnSqlName(column)];
    row[key] = value === null || value === undefined ? null : column.mapFromDriverValue(value);
  }
  return row;
};

/** A row of `kind` as the API shows it. */
export const serializeResource = (kind: ResourceKind, row: Record<string, unknown>) =>
  (resources[kind].serialize as (r: Record<string, unknown>) => unknown)(row);

/** The body a write answers with, for a row of `kind`: `{ "data": <resource> }`. */
export const renderResource = (kind: ResourceKind, row: Record<string, unknown>) =>
  JSON.stringify({ data: serializeResource(kind, row) });

/**
 * Answers about many rows at once, snapshotted by SQL in the write's batch as a JSON array (one
 * element per row, what the answer shows of it), and rendered from it live and on replay alike.
 */
const composites = {
  /**
   * POST /subscribers/batch: per item, its index, whether this write created it, and the subscriber's
   * id (not the whole subscriber: 1,000 existing ones could pass D1's 2 MB a value).
   */
  subscriber_batch: (elements: unknown[]) => serializeSubscriberBatch(elements as SubscriberBatchRow[]),
};

export type CompositeKind = keyof typeof composites;

export const serializeComposite = (kind: CompositeKind, elements: unknown[]) => composites[kind](elements);

export const renderComposite = (kind: CompositeKind, elements: unknown[]) => JSON.stringify({ data: serializeComposite(kind, elements) });
