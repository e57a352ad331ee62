#!/usr/bin/env node
// `npm run bench`: measures the deployed worker's start-up, seeds 100,000 subscribers into a private local
// D1, serves the bench entry (bench/worker/: the deployed worker plus the baseline routes) with
// `wrangler dev`, and measures every API route beside its two baselines in the same run (see README.md).
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { buildBenchBundle, measureBundle, profileStartup } from "./lib/bundle.mjs";
import { measureContent } from "./lib/content.mjs";
import { measureFanout } from "./lib/fanout.mjs";
import { describeMachine } from "./lib/machine.mjs";
import { startMockResend } from "./lib/mock-resend.mjs";
import { measurePagination } from "./lib/pagination.mjs";
import { measureResend } from "./lib/resend.mjs";
import { printReport, writeMarkdown } from "./lib/report.mjs";
import { measureReads, measureWrites } from "./lib/routes.mjs";
import { writeSeed } from "./lib/seed.mjs";
import { createSession } from "./lib/session.mjs";
import { benchConfig, cacheDir, root, startDev, wrangler, wranglerVersion } from "./lib/wrangler.mjs";
import { measureWebhooks } from "./lib/webhooks.mjs";
import { ensureWrk } from "./lib/wrk.mjs";

const config = {
  subscribers: Number(process.env.BENCH_SUBSCRIBERS ?? 100_000),
  /** Tokens used round-robin, so that no single credential meets the per-credential rate limit. */
  credentials: 64,
  /** `wrangler check startup` profiles of the deployed worker; the figure is the median. */
  startupRounds: Number(process.env.BENCH_STARTUP_ROUNDS ?? 5),
  seconds: Number(process.env.BENCH_SECONDS ?? 3),
  /** Rounds per route case; the pagination section runs half as many. */
  rounds: Number(process.env.BENCH_ROUNDS ?? 4),
  connections: Number(process.env.BENCH_CONNECTIONS ?? 8),
  port: Number(process.env.BENCH_PORT ?? 8790),
  inspectorPort: Number(process.env.BENCH_INSPECTOR_PORT ?? 9290),
  fanout: (process.env.BENCH_FANOUT ?? "1000,10000,100000").split(",").filter(Boolean).map(Number),
  /** Per audience; past it the send is reported as unfinished. */
  fanoutTimeoutSeconds: Number(process.env.BENCH_FANOUT_TIMEOUT ?? 240),
  /** Sends (each beside its floor) per audience; the figures are the median round. */
  fanoutRounds: Number(process.env.BENCH_FANOUT_ROUNDS ?? 3),
  /** Which parts to run: any of reads, pagination, writes, fanout, content, resend, webhooks. */
  sections: (process.env.BENCH_SECTIONS ?? "reads,pagination,writes,fanout,content,resend,webhooks").split(","),
  /** Live sends through the Resend mock; 50000 (about 4.5 minutes) is opt-in: BENCH_RESEND=1000,10000,50000. */
  resend: (process.env.BENCH_RESEND ?? "1000,10000").split(",").filter(Boolean).map(Number),
  resendRps: Number(process.env.BENCH_RESEND_RPS ?? 2),
  /** Faults the mock injects per request: 5% answered 500, 2% accepted but never answered. */
  resendErrorRate: Number(process.env.BENCH_RESEND_ERRORS ?? 0.05),
  resendTimeoutRate: Number(process.env.BENCH_RESEND_TIMEOUTS ?? 0.02),
  /** Milliseconds added to each of the worker's D1 calls (bench/worker/latency.ts); 0: none. */
  d1LatencyMs: Number(process.env.BENCH_D1_LATENCY_MS ?? 0),
  /** The content section's send audience (a fan-out workspace of that size is seeded) and rounds. */
  contentAudience: Number(process.env.BENCH_CONTENT_AUDIENCE ?? 100_000),
  contentRounds: Number(process.env.BENCH_CONTENT_ROUNDS ?? 3),
  /** The webhooks section: events (subscriber creations) and how many writes run at once. */
  webhookEvents: Number(process.env.BENCH_WEBHOOK_EVENTS ?? 2000),
  webhookConcurrency: Number(process.env.BENCH_WEBHOOK_CONCURRENCY ?? 16),
};
const runs = (section) => config.sections.includes(section);
const fanoutAudiences = [...new Set([...(runs("fanout") ? config.fanout : []), ...(runs("content") ? [config.contentAudience] : [])])];

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

// 1. The deployed worker: its start-up cost and, for information, its bundle's size.
log(`profiling the deployed worker's start-up (wrangler check startup, ${config.startupRounds} times)…`);
const startupProfile = profileStartup(join(tmp, "worker.form"), tmp, config.startupRounds);
const bundle = measureBundle(join(tmp, "bundle"));
log(`start-up CPU ${startupProfile.cpuMs.toFixed(1)} ms (median); bundle ${(bundle.gzipBytes / 1024).toFixed(1)} KiB gzip`);
// What is served: the bench entry, with its config derived from wrangler.toml.
const benchToml = benchConfig(cacheDir);
const benchScript = buildBenchBundle(join(tmp, "bench-bundle"), benchToml);

// 2. A private database: migrations, then the seeded workspaces in batched multi-row INSERTs.
const resendAudiences = runs("resend") ? config.resend : [];
const extra = [...fanoutAudiences, ...resendAudiences].reduce((sum, n) => sum + n, 0);
log(`seeding ${config.subscribers.toLocaleString("en")} subscribers${extra ? ` (and ${extra.toLocaleString("en")} in fan-out workspaces)` : ""}…`);
const seedStarted = performance.now();
wrangler(["d1", "migrations", "apply", "DB", "--local", "--persist-to", persistTo]);
const seed = writeSeed(join(workDir, "seed.sql"), { subscribers: config.subscribers, credentials: config.credentials, fanoutAudiences, resendAudiences });
wrangler(["d1", "execute", "DB", "--local", "--persist-to", persistTo, "--file", join(workDir, "seed.sql"), "--yes"]);
const seedSeconds = (performance.now() - seedStarted) / 1000;
log(`seeded in ${seedSeconds.toFixed(1)} s`);

// 3. The service with the baseline routes (the bench entry), and secrets of its own; the resend
// integration points at the local mock of Resend's API, started here.
const mockResend = resendAudiences.length > 0
  ? await startMockResend({ rps: config.resendRps, errorRate: config.resendErrorRate, timeoutRate: config.resendTimeoutRate })
  : undefined;
const devLog = join(workDir, "wrangler-dev.log");
const dev = await startDev({
  script: benchScript,
  config: benchToml,
  port: config.port,
  inspectorPort: config.inspectorPort,
  persistTo,
  vars: {
    ADMIN_TOKEN: randomBytes(24).toString("base64url"),
    ...(config.d1LatencyMs > 0 && { BENCH_D1_LATENCY_MS: String(config.d1LatencyMs) }),
    ...(mockResend && {
      RESEND_API_KEY: `re_bench_${randomBytes(8).toString("hex")}`,
      RESEND_BASE_URL: mockResend.url,
      RESEND_MAX_RPS: String(config.resendRps),
    }),
  },
  logFile: devLog,
});
log(`wrangler dev answered /health ${dev.startupMs.toFixed(0)} ms after spawning (inspector on port ${config.inspectorPort})`);
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => Promise.all([dev.stop(), mockResend?.stop()]).then(() => process.exit(130)));

const results = {
  runId,
  startedAt: new Date().toISOString(),
  config,
  machine,
  seed: { subscribers: config.subscribers, fanoutSubscribers: extra, seconds: seedSeconds },
  startup: { workerStartupCpuMs: startupProfile.cpuMs, workerStartupCpuMsRounds: startupProfile.rounds, devSpawnToHealthMs: dev.startupMs },
  bundle: { rawBytes: bundle.rawBytes, gzipBytes: bundle.gzipBytes, wrangler: bundle.wrangler },
  routes: [],
  pagination: [],
  fanout: undefined,
};

try {
  const session = createSession({ dev, seed, config, runId, workDir, log });
  session.expectStatus(await session.api("GET", "/bench/constant"), 200, "constant route (the bench entry's baselines)");
  if (runs("reads")) results.routes.push(...(await measureReads(session)));
  // Before the writes, so that page 1 and the deep page see the seeded lists only.
  if (runs("pagination")) results.pagination = await measurePagination(session);
  if (runs("writes")) results.routes.push(...(await measureWrites(session)));
  if (runs("fanout") && config.fanout.length > 0) {
    results.fanout = await measureFanout({
      api: session.api,
      tokens: seed.tokens,
      fanoutWorkspaces: seed.fanoutWorkspaces,
      audiences: config.fanout,
      rounds: config.fanoutRounds,
      log,
      logFile: devLog,
      timeoutSeconds: config.fanoutTimeoutSeconds,
    });
  }
  if (runs("content")) {
    results.content = await measureContent({
      api: session.api,
      token: seed.tokens[0],
      workspaceId: seed.fanoutWorkspaces[config.contentAudience],
      audience: config.contentAudience,
      rounds: config.contentRounds,
      renderMessages: 2000,
      timeoutSeconds: config.fanoutTimeoutSeconds,
      log,
    });
  }
  if (mockResend) {
    results.resend = await measureResend({
      api: session.api,
      token: seed.liveToken,
      workspaces: seed.resendWorkspaces,
      audiences: resendAudiences,
      mock: mockResend,
      rps: config.resendRps,
      log,
      timeoutSeconds: Math.max(config.fanoutTimeoutSeconds, ...resendAudiences.map((n) => (n / 100 / config.resendRps) * 2 + 60)),
    });
  }
  if (runs("webhooks")) {
    results.webhooks = await measureWebhooks({
      api: session.api,
      tokens: seed.tokens,
      ws: session.ws,
      events: config.webhookEvents,
      concurrency: config.webhookConcurrency,
      timeoutSeconds: config.fanoutTimeoutSeconds,
      log,
    });
  }
} finally {
  await dev.stop();
  await mockResend?.stop();
  rmSync(tmp, { recursive: true, force: true });
}

results.machine.loadAverageAtEnd = loadavg().map((n) => Math.round(n * 100) / 100);
results.totalSeconds = (performance.now() - runStarted) / 1000;
const outDir = join(root, "bench", "results");
mkdirSync(outDir, { recursive: true });
const stamp = results.startedAt.replaceAll(":", "-").replace(/\..*/, "");
for (const name of [`${stamp}.json`, "latest.json"]) writeFileSync(join(outDir, name), `${JSON.stringify(results, null, 2)}\n`);
writeFileSync(join(outDir, "latest.md"), writeMarkdown(results));
printReport(results);
log(`done; results in bench/results/${stamp}.json and bench/results/latest.md`);
