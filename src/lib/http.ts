import type { Context } from "hono";
import type { AppEnv } from "./types";

type Envelope<T> = { data: T };
export type Pagination = { has_more: true; next_cursor: string } | { has_more: false; next_cursor: null };
export type Page<T> = { data: T[]; pagination: Pagination };

export const envelope = <T>(data: T): Envelope<T> => ({ data });

/** A URI component percent-decoded, or undefined when its escapes are not UTF-8 (`%E9`, a stray `%`). */
export const decodedComponent = (text: string): string | undefined => {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
};

/**
 * The list a cursor belongs to: `base` (the resource and its owner, e.g. `subscribers:ws_…`) and the
 * filters the page was read with, so a cursor used with other filters is refused (400
 * `invalid_cursor`) instead of answering a page of another list from its position.
 */
export const listScope = (base: string, filters: Record<string, unknown> = {}): string => {
  const set = Object.keys(filters)
    .filter((name) => filters[name] !== undefined)
    .sort()
    .map((name) => `${name}=${JSON.stringify(filters[name])}`);
  return set.length === 0 ? base : `${base}?${set.join("&")}`;
};

/** Which page of which list: the list's base and filters make the cursor's scope (see listScope). */
type PageRequest = { list: string; filters?: Record<string, unknown>; after: string | undefined; limit: number };

/** What a page read returns: its rows, and whether rows were left out for their size (boundedPage). */
type PageRows<Row> = Row[] | { rows: Row[]; truncated: boolean };

/**
 * A keyset page of a list: `after` is decoded for this list and these filters (400 `invalid_cursor`
 * otherwise), `read` fetches `limit + 1` rows from that position (the extra row only says whether
 * another page exists), and the next cursor is signed for the same list.
 */
export const listPage = async <Row extends { id: string }, Out>(
  c: Context<AppEnv>,
  request: PageRequest,
  read: (position: string | undefined, take: number) => Promise<PageRows<Row>>,
  serialize: (row: Row) => Out,
): Promise<Page<Out>> => {
  const { limit, after } = request;
  const scope = listScope(request.list, request.filters);
  const position = after === undefined ? undefined : await c.var.cursors.decode(scope, after);
  const found = await read(position, limit + 1);
  const { rows, truncated } = Array.isArray(found) ? { rows: found, truncated: false } : found;
  // A page that has more always holds a row (boundedPage keeps the first whatever its size).
  const hasMore = rows.length > limit || truncated;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  const last = pageRows.at(-1);
  return {
    data: pageRows.map(serialize),
    pagination: hasMore && last ? { has_more: true, next_cursor: await c.var.cursors.encode(scope, last.id) } : { has_more: false, next_cursor: null },
  };
};

/** A PATCH's change set: the fields the request gave (`undefined` means "not given"; `null` is a value). */
export const givenFields = <T extends Record<string, unknown>>(changes: T): Partial<T> =>
  Object.fromEntries(Object.entries(changes).filter(([, value]) => value !== undefined)) as Partial<T>;
