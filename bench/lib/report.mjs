// The run's figures as console tables and as the Markdown that bench/README.md quotes.
import { median } from "./util.mjs";

const TARGETS = { rpsVsRaw: 0.6, deepVsFirst: 1.2, fanoutVsFloor: 0.5, growth100kVs10k: 11 };

const f = (n, digits = 1) => (n === undefined || Number.isNaN(n) ? "–" : n.toFixed(digits));
const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;
const mark = (ok) => (ok ? "met" : "MISSED");
const table = (header, rows) => {
  const lines = [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`];
  for (const row of rows) lines.push(`| ${row.join(" | ")} |`);
  return lines.join("\n");
};

const routeRows = (results) =>
  results.routes.map((r) => [
    r.name,
    f(r.api.rps, 0),
    `${f(r.api.p50)} / ${f(r.api.p99)}`,
    r.raw ? f(r.raw.rps, 0) : "–",
    r.raw ? `${f(r.raw.p50)} / ${f(r.raw.p99)}` : "–",
    f(r.constant.rps, 0),
    `${f(r.constant.p50)} / ${f(r.constant.p99)}`,
    f(r.ratios.rpsVsRaw, 2),
    r.raw ? `${f(r.api.p50 / r.raw.p50, 2)} / ${f(r.api.p99 / r.raw.p99, 2)}` : "–",
    f(r.ratios.rpsVsConstant, 2),
    r.ratios.rpsVsRaw === undefined ? "–" : mark(r.ratios.rpsVsRaw >= TARGETS.rpsVsRaw),
    String(r.api.errors + (r.raw?.errors ?? 0) + r.constant.errors),
  ]);

const paginationRows = (results) =>
  results.pagination.map((p) => [
    p.filter,
    p.rows.toLocaleString("en"),
    `${f(p.apiFirst.p50)} / ${f(p.apiFirst.p99)}`,
    `${f(p.apiDeep.p50)} / ${f(p.apiDeep.p99)}`,
    f(p.ratios.apiDeepVsFirstP50, 2),
    `${f(p.rawFirst.p50)} / ${f(p.rawDeep.p50)}`,
    f(p.ratios.rawDeepVsFirstP50, 2),
    mark(p.ratios.apiDeepVsFirstP50 <= TARGETS.deepVsFirst),
  ]);

const fanoutSection = (fanout) => {
  if (!fanout || fanout.status !== "measured") {
    return `Not measured in this run: ${fanout?.reason ?? "no fan-out step"}.`;
  }
  const rows = fanout.campaigns.map((c) => [
    c.audience.toLocaleString("en"),
    c.status,
    f(c.seconds, 2),
    f(c.recipientsPerSecond, 0),
    c.floor ? f(c.floor.recipientsPerSecond, 0) : "–",
    c.floor ? f(c.recipientsPerSecond / c.floor.recipientsPerSecond, 2) : "–",
    c.floor ? mark(c.recipientsPerSecond / c.floor.recipientsPerSecond >= TARGETS.fanoutVsFloor) : "–",
    c.queueMessages === undefined ? "–" : `${c.queueMessages} in ${c.queueBatches} batches`,
    c.queueMessagesPer1000 === undefined ? "–" : f(c.queueMessagesPer1000, 1),
    c.floor ? f(c.floor.statementsPer1000, 1) : "–",
  ]);
  const lines = [
    table(
      ["audience", "operation", "seconds", "recipients/s", "floor recipients/s", "÷ floor", "≥ 0.5", "queue messages", "queue msgs / 1k", "floor D1 statements / 1k"],
      rows,
    ),
  ];
  const rounds = fanout.campaigns.filter((c) => c.secondsPerRound);
  if (rounds.length > 0) {
    lines.push(
      "",
      `Each figure is the median of ${rounds[0].rounds} rounds, each a send followed by its floor. Seconds per round, send / floor: ` +
        rounds
          .map((c) => `${c.audience.toLocaleString("en")}: ${c.secondsPerRound.map((x) => f(x, 2)).join(", ")} / ${c.floor.secondsPerRound.map((x) => f(x, 2)).join(", ")}`)
          .join("; ") +
        ".",
    );
  }
  if (fanout.growth100kVs10k !== undefined) {
    lines.push(
      "",
      `Time for 100k / time for 10k: ${f(fanout.growth100kVs10k, 2)} (target at most ${TARGETS.growth100kVs10k}: ${mark(fanout.growth100kVs10k <= TARGETS.growth100kVs10k)}).`,
    );
  }
  if (fanout.notes) lines.push("", ...fanout.notes);
  return lines.join("\n");
};

const webhooksSection = (w) =>
  !w
    ? "Not measured in this run (BENCH_SECTIONS)."
    : table(
        ["phase", "events (subscriber.created)", "writes at once", "delivered", "events/s delivered", "change → receiver p50 / p99 (ms)"],
        [
          ["as fast as writes go", w.loaded],
          ["one write at a time", w.unloaded],
        ].map(([name, r]) => [name, String(r.events), String(r.concurrency), String(r.delivered), f(r.eventsPerSecond, 0), `${r.latencyMs.p50} / ${r.latencyMs.p99}`]),
      );

const contentSection = (c) =>
  !c
    ? "Not measured in this run (BENCH_SECTIONS)."
    : [
        `Render cost: ${f(c.renderMicrosecondsPerMessage, 1)} µs per message (20 KB html, five variables; rounds ${c.renderRounds.map((x) => f(x, 1)).join(", ")}).`,
        "",
        table(
          ["send (sandbox)", "recipients", "seconds per round", "median"],
          [
            ["no content", c.secondsWithoutContent],
            ["20 KB html template", c.secondsWithContent],
          ].map(([name, rounds]) => [name, c.audience.toLocaleString("en"), rounds.map((x) => f(x, 2)).join(", "), f(median(rounds), 2)]),
        ),
        "",
        `With content ÷ without: ${f(c.ratio, 2)}× (target at most ${c.target}×: ${mark(c.ratio <= c.target)}).`,
      ].join("\n");

const RESEND_TARGET = 1.1;

const resendSection = (rows) =>
  !rows || rows.length === 0
    ? "Not measured in this run (BENCH_SECTIONS)."
    : table(
        ["recipients", "time", "floor", "ratio", "requests", "500s / unanswered / 429s", "idle between requests", "mailed once / twice", `≤ ${RESEND_TARGET}× (10,000)`],
        rows.map((r) => [
          r.audience.toLocaleString("en"),
          `${f(r.seconds, 1)} s`,
          `${r.floorSeconds} s`,
          `${f(r.ratio, 2)}×`,
          String(r.mock.requests),
          `${r.mock.errors} / ${r.mock.timeouts} / ${r.mock.tooMany}`,
          r.breakdown ? `${f(r.breakdown.idleMs / 1000, 1)} s` : "–",
          `${r.recipientsOnce.toLocaleString("en")} / ${r.recipientsDuplicated}`,
          r.audience === 10000 ? mark(r.ratio <= RESEND_TARGET && r.recipientsDuplicated === 0) : "–",
        ]),
      );

export const writeMarkdown = (results) => {
  const m = results.machine;
  return [
    `Run ${results.runId}, ${results.startedAt}, ${f(results.totalSeconds, 0)} s in all. ` +
      `wrk -t1 -c${results.config.connections}, ${results.config.seconds} s per run; each figure is the median of ${results.config.rounds} interleaved rounds (pagination: ${Math.max(2, Math.floor(results.config.rounds / 2))}).`,
    "",
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.distro} (${m.os}); Node ${m.node}, wrangler ${m.wrangler}, workerd ${m.workerd}, ${m.wrk}. ` +
      `Load average at start ${m.loadAverageAtStart.join(" ")}, at end ${(m.loadAverageAtEnd ?? []).join(" ")}.`,
    "",
    `Seed: ${results.seed.subscribers.toLocaleString("en")} subscribers in ${f(results.seed.seconds, 1)} s (migrations + one SQL file of multi-row INSERTs).`,
    "",
    "### Routes (requests/s; latency p50 / p99 in ms)",
    "",
    table(
      ["case", "API req/s", "API p50 / p99", "raw D1 req/s", "raw p50 / p99", "constant req/s", "constant p50 / p99", "API ÷ raw", "p50 / p99 API ÷ raw", "API ÷ constant", "≥ 0.6 × raw", "non-2xx"],
      routeRows(results),
    ),
    "",
    "### Pagination depth (p50 / p99 in ms, limit 100)",
    "",
    results.pagination.length === 0
      ? "Not measured in this run (BENCH_SECTIONS)."
      : table(["filter", "rows in list", "API page 1", "API page at 90%", "deep ÷ first (API)", "raw p50 first / deep", "deep ÷ first (raw)", "≤ 1.2"], paginationRows(results)),
    "",
    "### Send fan-out",
    "",
    fanoutSection(results.fanout),
    "",
    "### Campaign content",
    "",
    contentSection(results.content),
    "",
    "### Delivery through Resend (local mock)",
    "",
    resendSection(results.resend),
    "",
    "### Outgoing events (webhooks)",
    "",
    webhooksSection(results.webhooks),
    "",
    "### Start-up and bundle",
    "",
    table(
      ["measure", "value"],
      [
        [
          "start-up: workerd's CPU profile of the deployed worker's top-level evaluation (wrangler check startup), median",
          `${f(results.startup.workerStartupCpuMs, 1)} ms (rounds: ${(results.startup.workerStartupCpuMsRounds ?? []).map((x) => f(x, 1)).join(", ")})`,
        ],
        ["start-up: spawning wrangler dev → /health answers (wrangler, workerd and the worker)", `${f(results.startup.devSpawnToHealthMs, 0)} ms`],
        ["bundle (wrangler deploy --dry-run, minified), raw / gzip -9", `${kib(results.bundle.rawBytes)} / ${kib(results.bundle.gzipBytes)}`],
        ["wrangler's own report (upload / gzip)", results.bundle.wrangler ? `${results.bundle.wrangler.uploadKiB} / ${results.bundle.wrangler.gzipKiB} KiB` : "–"],
      ],
    ),
    "",
  ].join("\n");
};

export const printReport = (results) => {
  console.log(`\n${writeMarkdown(results)}`);
};
