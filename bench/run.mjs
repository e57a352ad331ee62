#!/usr/bin/env node
// `npm run bench`: seeds 100,000 subscribers into a private local D1, serves the deployable bundle with
// `wrangler dev`, and measures every API route beside its two baselines in the same run (see README.md).
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { measureBundle, profileStartup } from "./lib/bundle.mjs";
import { measureFanout } from "./lib/fanout.mjs";
import { describeMachine } from "./lib/machine.mjs";
import { printReport, writeMarkdown } from "./lib/report.mjs";
import { subscriberShape, writeSeed } from "./lib/seed.mjs";
import { cacheDir, root, startDev, wrangler, wranglerVersion } from "./lib/wrangler.mjs";
import { ensureWrk, merge, requestLine, runWrk } from "./lib/wrk.mjs";

const config = {
  subscribers: Number(process.env.BENCH_SUBSCRIBERS ?? 100_000),
  /** Tokens used round-robin, so no single credential meets the per-credential rate limit. */
  credentials: 64,
  seconds: Number(process.env.BENCH_SECONDS ?? 4),
  rounds: Number(process.env.BENCH_ROUNDS ?? 2),
  connections: Number(process.env.BENCH_CONNECTIONS ?? 8),
  port: Number(process.env.BENCH_PORT ?? 8790),
  inspectorPort: Number(process.env.BENCH_INSPECTOR_PORT ?? 9290),
  fanout: (process.env.BENCH_FANOUT ?? "1000,10000,100000").split(",").filter(Boolean).map(Number),
  /** Per audience; past it the fan-out is reported as unfinished. */
  fanoutTimeoutSeconds: Number(process.env.BENCH_FANOUT_TIMEOUT ?? 240),
  /** Which parts to run: any of routes, pagination, writes, fanout. */
  sections: new Set((process.env.BENCH_SECTIONS ?? "routes,pagination,writes,fanout").split(",")),
};
const fanoutAudiences = config.sections.has("fanout") ? config.fanout : [];

const runStarted = performance.now();
const runId = randomBytes(4).toString("hex");
const log = (message) => console.log(`[bench ${((performance.now() - runStarted) / 1000).toFixed(0).padStart(3)} s] ${message}`);

const wrkVersion = ensureWrk();
const machine = describeMachine({ wranglerVersion: wranglerVersion(), wrkVersion });
console.log("Machine:", JSON.stringify(machine));

const workDir = join(cacheDir, "run");
const persistTo = join(cacheDir, "state");
rmSync(workDir, { recursive: true, force: true });
rmSync(persistTo, { recursive: true, force: true });
mkdirSync(workDir, { recursive: true });
const tmp = mkdtempSync(join(tmpdir(), "newsletter-bench-"));

// 1. The deployable bundle, and the worker's start-up.
log("building the bundle (wrangler deploy --dry-run)…");
const bundle = measureBundle(join(tmp, "bundle"), join(tmp, "bundle-min"));
const startupProfile = profileStartup(join(tmp, "worker.form"), join(tmp, "startup.cpuprofile"));

// 2. A private database: migrations, then the seeded workspace in batched multi-row INSERTs.
log(`seeding ${config.subscribers.toLocaleString("en")} subscribers (and ${fanoutAudiences.reduce((a, b) => a + b, 0).toLocaleString("en")} in the fan-out workspaces)…`);
const seedStarted = performance.now();
wrangler(["d1", "migrations", "apply", "DB", "--local", "--persist-to", persistTo]);
const seed = writeSeed(join(workDir, "seed.sql"), {
  subscribers: config.subscribers,
  credentials: config.credentials,
  fanoutAudiences,
});
wrangler(["d1", "execute", "DB", "--local", "--persist-to", persistTo, "--file", join(workDir, "seed.sql"), "--yes"]);
const seedSeconds = (performance.now() - seedStarted) / 1000;
log(`seeded in ${seedSeconds.toFixed(1)} s`);

// 3. The service, with the baseline routes on and secrets of its own.
const cursorSecret = randomBytes(24).toString("base64url");
const devLog = join(workDir, "wrangler-dev.log");
const dev = await startDev({
  script: bundle.script,
  port: config.port,
  inspectorPort: config.inspectorPort,
  persistTo,
  vars: { BENCH_ROUTES: "on", CURSOR_SECRET: cursorSecret, ADMIN_TOKEN: randomBytes(24).toString("base64url") },
  logFile: devLog,
});
log(`wrangler dev answered /health ${dev.startupMs.toFixed(0)} ms after spawning`);
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => dev.stop().then(() => process.exit(130)));

let results;
try {
  results = {
    runId,
    startedAt: new Date().toISOString(),
    config,
    machine,
    seed: { subscribers: config.subscribers, seconds: seedSeconds },
    bundle: {
      rawBytes: bundle.rawBytes,
      gzipBytes: bundle.gzipBytes,
      wrangler: bundle.wrangler,
      minified: { rawBytes: bundle.minified.rawBytes, gzipBytes: bundle.minified.gzipBytes, wrangler: bundle.minified.wrangler },
    },
    startup: { devSpawnToHealthMs: dev.startupMs, workerStartupCpuMs: startupProfile.cpuMs },
    routes: [],
    pagination: [],
    fanout: undefined,
  };

  const { workspaceId, tokens, credentialIds, subscriberIds, fanoutWorkspaces } = seed;
  const ws = `/v1/workspaces/${workspaceId}`;
  const raw = `/bench/raw/workspaces/${workspaceId}`;
  const tokenFor = (i) => tokens[i % tokens.length];

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

  const wrkRun = (name, lines, { seconds = config.seconds, prefix } = {}) =>
    runWrk({ base: dev.base, lines, seconds, connections: config.connections, workDir, name, prefix });

  /**
   * One case: `rounds` rounds of [constant floor, raw-D1 floor, API], the order reversed every other
   * round, so the three series see the same background load.
   */
  const measureCase = async ({ name, description, apiLines, rawLines, creates = false }) => {
    log(`${name}…`);
    const constantLines = [requestLine({ path: "/bench/constant" })];
    wrkRun(`${name}-warmup`, apiLines, { seconds: 1, prefix: `${runId}-w-` });
    if (rawLines) wrkRun(`${name}-warmup-raw`, rawLines, { seconds: 1, prefix: `${runId}-wr-` });
    const series = { constant: [], raw: [], api: [] };
    for (let round = 0; round < config.rounds; round++) {
      const order = round % 2 === 0 ? ["constant", "raw", "api"] : ["api", "raw", "constant"];
      for (const which of order) {
        const lines = which === "constant" ? constantLines : which === "raw" ? rawLines : apiLines;
        if (!lines) continue;
        series[which].push(wrkRun(`${name}-${which}-${round}`, lines, { prefix: `${runId}-${round}-${which}-` }));
      }
    }
    const row = {
      name,
      description,
      creates,
      api: merge(series.api),
      raw: rawLines ? merge(series.raw) : undefined,
      constant: merge(series.constant),
    };
    row.ratios = {
      rpsVsRaw: row.raw ? row.api.rps / row.raw.rps : undefined,
      rpsVsConstant: row.api.rps / row.constant.rps,
      p50VsRaw: row.raw ? row.api.p50 / row.raw.p50 : undefined,
      p50VsConstant: row.api.p50 / row.constant.p50,
    };
    results.routes.push(row);
    return row;
  };

  // Sanity: the API, the baselines and the seeded data agree before anything is timed.
  const sample = subscriberIds.filter((_, i) => i % 97 === 0).slice(0, 1000);
  expectStatus(await api("GET", `${ws}/subscribers/${sample[0]}`), 200, "retrieve");
  expectStatus(await api("GET", `${raw}/subscribers/${sample[0]}`), 200, "raw retrieve");
  expectStatus(await api("GET", "/bench/constant"), 200, "constant");

  // 4. Reads.
  if (config.sections.has("routes")) {
  await measureCase({
    name: "retrieve subscriber",
    description: "GET /v1/workspaces/{ws}/subscribers/{id}, 1,000 different ids",
    apiLines: sample.map((id, i) => requestLine({ path: `${ws}/subscribers/${id}`, token: tokenFor(i) })),
    rawLines: sample.map((id) => requestLine({ path: `${raw}/subscribers/${id}` })),
  });
  for (const [name, query] of [
    ["list subscribers", "limit=100"],
    ["list, tag filter", "limit=100&tag=beta"],
    ["list, status filter", "limit=100&status=unsubscribed"],
  ]) {
    await measureCase({
      name,
      description: `GET /v1/workspaces/{ws}/subscribers?${query}`,
      apiLines: tokens.map((token) => requestLine({ path: `${ws}/subscribers?${query}`, token })),
      rawLines: [requestLine({ path: `${raw}/subscribers?${query}` })],
    });
  }

  }

  // 5. Pagination depth: page 1 against the page that starts 90% into each list.
  const listSize = (filter) => {
    let count = 0;
    for (let i = 0; i < config.subscribers; i++) {
      const { status, tags } = subscriberShape(i);
      if ((filter.status === undefined || filter.status === status) && (filter.tag === undefined || tags.includes(filter.tag))) count++;
    }
    return count;
  };
  for (const filter of config.sections.has("pagination") ? [{}, { status: "active" }, { status: "unsubscribed" }, { tag: "weekly" }, { tag: "beta" }] : []) {
    const query = new URLSearchParams({ limit: "100", ...filter }).toString();
    const size = listSize(filter);
    const offset = Math.floor(size * 0.9);
    const position = await api("GET", `/bench/cursor?${new URLSearchParams({ workspace_id: workspaceId, offset: String(offset), ...filter })}`);
    expectStatus(position, 200, "deep cursor");
    const deep = expectStatus(await api("GET", `${ws}/subscribers?${query}&after=${position.body.cursor}`), 200, "deep page");
    if (deep.body.data.length !== 100 || !deep.body.pagination.has_more) throw new Error(`deep page of ${query} is not a full page`);
    const label = Object.entries(filter).map(([k, v]) => `${k}=${v}`).join("&") || "no filter";
    log(`pagination, ${label} (${size.toLocaleString("en")} rows, page at row ${offset.toLocaleString("en")})…`);
    const variants = {
      apiFirst: tokens.map((token) => requestLine({ path: `${ws}/subscribers?${query}`, token })),
      apiDeep: tokens.map((token) => requestLine({ path: `${ws}/subscribers?${query}&after=${position.body.cursor}`, token })),
      rawFirst: [requestLine({ path: `${raw}/subscribers?${query}` })],
      rawDeep: [requestLine({ path: `${raw}/subscribers?${query}&after=${position.body.position}` })],
    };
    wrkRun("pagination-warmup", [...variants.apiFirst, ...variants.apiDeep], { seconds: 1 });
    const series = { apiFirst: [], apiDeep: [], rawFirst: [], rawDeep: [] };
    for (let round = 0; round < config.rounds; round++) {
      const order = round % 2 === 0 ? ["apiFirst", "apiDeep", "rawFirst", "rawDeep"] : ["rawDeep", "rawFirst", "apiDeep", "apiFirst"];
      for (const which of order) series[which].push(wrkRun(`pagination-${which}-${round}`, variants[which]));
    }
    const row = { filter: label, rows: size, deepOffset: offset, ...Object.fromEntries(Object.entries(series).map(([k, v]) => [k, merge(v)])) };
    row.ratios = { apiDeepVsFirstP50: row.apiDeep.p50 / row.apiFirst.p50, rawDeepVsFirstP50: row.rawDeep.p50 / row.rawFirst.p50 };
    results.pagination.push(row);
  }

  // 6. Writes: creates (distinct emails per request), then replays of an already used Idempotency-Key.
  if (config.sections.has("writes")) {
  const createBody = '{"email":"c-{n}@bench.example","tags":["weekly"]}';
  await measureCase({
    name: "create subscriber",
    description: "POST /v1/workspaces/{ws}/subscribers, a new email each request",
    creates: true,
    apiLines: tokens.map((token) => requestLine({ method: "POST", path: `${ws}/subscribers`, token, body: createBody })),
    rawLines: [requestLine({ method: "POST", path: `${raw}/subscribers`, body: createBody })],
  });

  const replayKeys = tokens.map((_, i) => `bench-replay-${runId}-${i}`);
  const replayBody = (i) => ({ email: `replay-${runId}-${i}@bench.example` });
  for (let i = 0; i < tokens.length; i++) {
    expectStatus(await api("POST", `${ws}/subscribers`, { token: tokens[i], key: replayKeys[i], body: replayBody(i) }), 201, "idempotent create");
  }
  const probe = await api("POST", `${ws}/subscribers`, { token: tokens[0], key: replayKeys[0], body: replayBody(0) });
  if (probe.status !== 201 || probe.headers.get("idempotent-replayed") !== "true") {
    throw new Error(`an Idempotency-Key replay did not replay: ${probe.status} ${JSON.stringify(probe.body)}`);
  }
  // The floor reads the very KV entry the replay is served from.
  const sha256 = (text) => createHash("sha256").update(text).digest("hex");
  const kvKeys = replayKeys.map((key, i) => `idempotency:${credentialIds[i]}:${sha256(key)}`);
  expectStatus(await api("GET", `/bench/raw/kv/${encodeURIComponent(kvKeys[0])}`), 200, "stored replay in KV");
  await measureCase({
    name: "idempotent replay",
    description: "POST /v1/workspaces/{ws}/subscribers with an Idempotency-Key already used (floor: KV read of the stored response)",
    apiLines: tokens.map((token, i) =>
      requestLine({ method: "POST", path: `${ws}/subscribers`, token, key: replayKeys[i], body: replayBody(i) }),
    ),
    rawLines: kvKeys.map((key) => requestLine({ path: `/bench/raw/kv/${encodeURIComponent(key)}` })),
  });

  }

  // 7. Send fan-out through the local queue.
  if (fanoutAudiences.length > 0) {
    results.fanout = await measureFanout({
      api,
      tokens,
      fanoutWorkspaces,
      audiences: fanoutAudiences,
      log,
      logFile: devLog,
      timeoutSeconds: config.fanoutTimeoutSeconds,
    });
  }

} catch (err) {
  await dev.stop();
  throw err;
}
await dev.stop();
rmSync(tmp, { recursive: true, force: true });
results.machine.loadAverageAtEnd = loadavg().map((n) => Math.round(n * 100) / 100);
results.totalSeconds = (performance.now() - runStarted) / 1000;

const outDir = join(root, "bench", "results");
mkdirSync(outDir, { recursive: true });
const stamp = results.startedAt.replaceAll(":", "-").replace(/\..*/, "");
writeFileSync(join(outDir, `${stamp}.json`), `${JSON.stringify(results, null, 2)}\n`);
writeFileSync(join(outDir, "latest.json"), `${JSON.stringify(results, null, 2)}\n`);
writeFileSync(join(outDir, "latest.md"), writeMarkdown(results));
printReport(results);
log(`done; results in bench/results/${stamp}.json and bench/results/latest.md`);
