import { type SQL, sql } from "drizzle-orm";

/**
 * Whether the endpoint row `endpoint` (a table name or alias) takes events of `type`: enabled, not
 * deleted, listing the type or "*". The one definition used where an event is written (born
 * dispatched unless an endpoint takes it) and where it is dispatched (the endpoints it goes to),
 * so the two can never disagree.
 */
export const endpointTakes = (endpoint: string, type: string | SQL): SQL => {
  const e = sql.raw(endpoint);
  return sql`${e}.enabled = 1 AND ${e}.deleted_at IS NULL AND EXISTS (SELECT 1 FROM json_each(${e}.events) WHERE value IN (${type}, '*'))`;
};
