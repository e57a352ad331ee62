// A local stand-in for Resend's API, for the benchmark: POST /emails/batch with Resend's rate limit
// (429 + Retry-After past `rps` requests in any second), idempotency keys (the same key answers as
// before and sends nothing again), injectable 500s, timeouts (the batch is accepted, the answer never
// comes) and per-message rejections, and a count of every message it accepted per recipient. With
// `keep`, it also keeps each accepted message whole, read back with `GET /messages` (the Node tests
// open links from the message a send delivered).
//
// 500s and timeouts come at exactly their rates, on a fixed schedule of the requests within the limit
// (a rate of 5% answers the 10th, 30th, 50th… request 500; 2% leaves the 37th, 87th… unanswered),
// so every run meets the same faults in the same proportion; random draws would put anywhere from
// 4 to 12 faults into a 10,000-recipient send and the run's figure would mostly measure that.
import { createServer } from "node:http";
import { pathToFileURL } from "node:url";

export const startMockResend = async ({ rps = 2, errorRate = 0, timeoutRate = 0, rejectRate = 0, seed = 1, keep = false, port: listenOn = 0 } = {}) => {
  // A small deterministic generator, so runs inject the same faults in the same order.
  let state = seed >>> 0;
  const random = () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  /** Every `n`th request, counted from `offset`; never for a rate of 0. */
  const scheduled = (rate, offset) => {
    const every = rate > 0 ? Math.max(1, Math.round(1 / rate)) : 0;
    return (n) => every > 0 && n % every === offset % every;
  };
  // Offsets of different parity (10 and 37), so a request is never chosen for both at these rates.
  const isError = scheduled(errorRate, 10);
  const isTimeout = scheduled(timeoutRate, 37);
  let counted = 0;
  const stats = { requests: 0, tooMany: 0, errors: 0, timeouts: 0, replays: 0, rejected: 0, accepted: 0 };
  const copies = new Map();
  const kept = [];
  const answered = new Map();
  const starts = [];
  /** Every request's arrival (ms since the first) and answer, for the time-over-floor breakdown. */
  const timeline = [];
  let first;
  const hanging = new Set();
  let nextId = 0;

  const send = (res, status, body, headers = {}) => {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  };

  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      if (keep && req.method === "GET" && req.url === "/messages") return send(res, 200, { data: kept });
      if (req.method !== "POST" || req.url !== "/emails/batch") return send(res, 404, { name: "not_found", message: "Not found" });
      stats.requests++;
      const now = Date.now();
      first ??= now;
      const entry = { at: now - first, answer: 200, key: req.headers["idempotency-key"] };
      timeline.push(entry);
      starts.push(now);
      while (starts.length > 0 && starts[0] <= now - 1000) starts.shift();
      if (starts.length > rps) {
        stats.tooMany++;
        entry.answer = 429;
        return send(res, 429, { name: "rate_limit_exceeded", message: "Too many requests" }, { "retry-after": "1" });
      }
      counted++;
      if (isError(counted)) {
        stats.errors++;
        entry.answer = 500;
        return send(res, 500, { name: "internal_server_error", message: "injected" });
      }
      const key = req.headers["idempotency-key"];
      let result = key ? answered.get(key) : undefined;
      if (result) stats.replays++;
      else {
        const messages = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        const data = [];
        const errors = [];
        messages.forEach((m, index) => {
          if (random() < rejectRate) {
            stats.rejected++;
            errors.push({ index, message: "Invalid `to` field" });
            return;
          }
          stats.accepted++;
          for (const to of m.to) copies.set(to, (copies.get(to) ?? 0) + 1);
          data.push({ id: `re_${++nextId}` });
          if (keep) kept.push({ id: `re_${nextId}`, ...m });
        });
        result = { data, errors };
        if (key) answered.set(key, result);
      }
      if (isTimeout(counted)) {
        // Accepted, but the answer never arrives: the client times out and asks again under its key.
        stats.timeouts++;
        entry.answer = "timeout";
        hanging.add(res);
        return;
      }
      send(res, 200, result);
    });
  });
  await new Promise((resolve) => server.listen(listenOn, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    stats,
    /** Recipients that got more than one copy, and how many got exactly one. */
    copies: () => {
      let once = 0;
      const duplicated = [];
      for (const [to, n] of copies) n === 1 ? once++ : duplicated.push(to);
      return { once, duplicated };
    },
    timeline: () => [...timeline],
    /** Wall-clock time (epoch ms) of the first request since the last reset. */
    firstAt: () => first,
    reset: () => {
      Object.keys(stats).forEach((k) => (stats[k] = 0));
      copies.clear();
      timeline.length = 0;
      first = undefined;
      counted = 0;
    },
    stop: () =>
      new Promise((resolve) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
};

// `node bench/lib/mock-resend.mjs [port] [rps]`: the stand-in on its own (default 127.0.0.1:8788, 2 requests
// a second), keeping every message, for `npm run dev` with RESEND_BASE_URL pointing at it (README).
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const mock = await startMockResend({ port: Number(process.argv[2] ?? 8788), rps: Number(process.argv[3] ?? 2), keep: true });
  console.log(`Resend stand-in at ${mock.url}: POST /emails/batch, GET /messages lists what it accepted`);
}
