import type { Context } from "hono";
import type { AppEnv } from "./types";

type Envelope<T> = { data: T };
export type Pagination = { has_more: true; next_cursor: string } | { has_more: false; next_cursor: null };
export type Page<T> = { data: T[]; pagination: Pagination };

export const envelope = <T>(data: T): Envelope<T> => ({ data });

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

/** Keyset page: fetch `limit + 1` rows; the extra row only says whether another page exists. */
export const toPage = async <Row extends { id: string }, Out>(
  c: Context<AppEnv>,
  listScope: string,
  rows: Row[],
  limit: number,
  serialize: (row: Row) => Out,
  /** Rows were left out for their size (boundedPage): there are more, though fewer than `limit` came. */
  truncated = false,
): Promise<Page<Out>> => {
  const hasMore = rows.length > limit || truncated;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  const last = pageRows.at(-1);
  return {
    data: pageRows.map(serialize),
    // A page that has more always holds a row (boundedPage keeps the first whatever its size).
    pagination: hasMore && last ? { has_more: true, next_cursor: await c.var.cursors.encode(listScope, last.id) } : { has_more: false, next_cursor: null },
  };
};

/** Decodes `after` for this list, or undefined for the first page. */
export const afterPosition = (c: Context<AppEnv>, listScope: string, after: string | undefined) =>
  after === undefined ? Promise.resolve(undefined) : c.var.cursors.decode(listScope, after);
