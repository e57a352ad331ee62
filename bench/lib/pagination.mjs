// Page 1 against the page that starts 90% into each list, through the API and through raw D1.
import { subscriberShape } from "./seed.mjs";
import { requestLine } from "./wrk.mjs";

const FILTERS = [{}, { status: "active" }, { status: "unsubscribed" }, { tag: "weekly" }, { tag: "beta" }];

const listSize = (subscribers, filter) => {
  let count = 0;
  for (let i = 0; i < subscribers; i++) {
    const { status, tags } = subscriberShape(i);
    if ((filter.status === undefined || filter.status === status) && (filter.tag === undefined || tags.includes(filter.tag))) count++;
  }
  return count;
};

export const measurePagination = async (session) => {
  const { tokens, ws, raw, seed, config } = session;
  const rows = [];
  for (const filter of FILTERS) {
    const query = new URLSearchParams({ limit: "100", ...filter }).toString();
    const size = listSize(config.subscribers, filter);
    const offset = Math.floor(size * 0.9);
    // A cursor signed with the service's own codec and signing key, for the row `offset` deep.
    const where = new URLSearchParams({ workspace_id: seed.workspaceId, offset: String(offset), ...filter });
    const { body: position } = session.expectStatus(await session.api("GET", `/bench/cursor?${where}`), 200, "deep cursor");
    const deep = session.expectStatus(await session.api("GET", `${ws}/subscribers?${query}&after=${position.cursor}`), 200, "deep page");
    if (deep.body.data.length !== 100 || !deep.body.pagination.has_more) throw new Error(`the deep page of ${query} is not a full page`);

    const label = Object.entries(filter).map(([k, v]) => `${k}=${v}`).join("&") || "no filter";
    session.log(`pagination, ${label} (${size.toLocaleString("en")} rows, page at row ${offset.toLocaleString("en")})…`);
    const variants = {
      apiFirst: tokens.map((token) => requestLine({ path: `${ws}/subscribers?${query}`, token })),
      apiDeep: tokens.map((token) => requestLine({ path: `${ws}/subscribers?${query}&after=${position.cursor}`, token })),
      rawFirst: [requestLine({ path: `${raw}/subscribers?${query}` })],
      rawDeep: [requestLine({ path: `${raw}/subscribers?${query}&after=${position.position}` })],
    };
    session.wrk("pagination-warmup", [...variants.apiFirst, ...variants.apiDeep], { seconds: 1 });
    const series = session.interleaved(`pagination-${label}`, variants, Math.max(2, Math.floor(config.rounds / 2)));
    rows.push({
      filter: label,
      rows: size,
      deepOffset: offset,
      ...series,
      ratios: {
        apiDeepVsFirstP50: series.apiDeep.p50 / series.apiFirst.p50,
        rawDeepVsFirstP50: series.rawDeep.p50 / series.rawFirst.p50,
      },
    });
  }
  return rows;
};
