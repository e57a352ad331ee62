// What every measured section shares: the running service, its seeded data, and wrk runs against it.
import { merge, requestLine, runWrk } from "./wrk.mjs";

export const createSession = ({ dev, seed, config, runId, workDir, log }) => {
  const tokens = seed.tokens;

  /** One API call as a client makes it. */
  const api = async (method, path, { token = tokens[0], body, key } = {}) => {
    const headers = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (key) headers["idempotency-key"] = key;
    const init = { method, headers, body: body === undefined ? undefined : JSON.stringify(body) };
    // A kept-alive connection left idle during a wrk run may have been closed by the server: retry once.
    const res = await fetch(`${dev.base}${path}`, init).catch(() => fetch(`${dev.base}${path}`, init));
    return { status: res.status, headers: res.headers, body: await res.json().catch(() => undefined) };
  };

  const expectStatus = (res, status, what) => {
    if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
    return res;
  };

  let runCount = 0;
  // The prefix makes {n} in a body unique across runs; it must stay valid inside an email address.
  const wrk = (name, lines, { seconds = config.seconds } = {}) =>
    runWrk({ base: dev.base, lines, seconds, connections: config.connections, workDir, name, prefix: `${runId}r${++runCount}n` });

  /**
   * Series measured side by side: `rounds` rounds, each running every series once, the order reversed
   * every other round, so that all of them see the same background load. Returns each series merged.
   */
  const interleaved = (name, variants, rounds = config.rounds) => {
    const names = Object.keys(variants);
    const runs = Object.fromEntries(names.map((key) => [key, []]));
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? names : [...names].reverse();
      for (const key of order) runs[key].push(wrk(`${name}-${key}-${round}`, variants[key]));
    }
    const merged = Object.fromEntries(names.map((key) => [key, merge(runs[key])]));
    // Throughput of error answers would say nothing about the route.
    for (const [key, series] of Object.entries(merged)) {
      if (series.errors > 0) throw new Error(`${name}: ${series.errors} non-2xx answers or socket errors in the ${key} series`);
    }
    return merged;
  };

  return {
    dev,
    config,
    runId,
    log,
    tokens,
    seed,
    ws: `/v1/workspaces/${seed.workspaceId}`,
    raw: `/bench/raw/workspaces/${seed.workspaceId}`,
    constantLines: [requestLine({ path: "/bench/constant" })],
    api,
    expectStatus,
    wrk,
    interleaved,
  };
};
