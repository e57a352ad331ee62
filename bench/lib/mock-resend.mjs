// A local stand-in for Resend's API, for the benchmark: POST /emails/batch with Resend's rate limit
// (429 + Retry-After past `rps` requests in any second), idempotency keys (the same key answers as
// before and sends nothing again), injectable 500s, timeouts (the batch is accepted, the answer never
// comes) and per-message rejections, and a count of every message it accepted per recipient.
import { createServer } from "node:http";

export const startMockResend = async ({ rps = 2, errorRate = 0, timeoutRate = 0, rejectRate = 0, seed = 1 } = {}) => {
  // A small deterministic generator, so runs inject the same faults in the same order.
  let state = seed >>> 0;
  const random = () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
  const stats = { requests: 0, tooMany: 0, errors: 0, timeouts: 0, replays: 0, rejected: 0, accepted: 0 };
  const copies = new Map();
  const answered = new Map();
  const starts = [];
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
      if (req.method !== "POST" || req.url !== "/emails/batch") return send(res, 404, { name: "not_found", message: "Not found" });
      stats.requests++;
      const now = Date.now();
      starts.push(now);
      while (starts.length > 0 && starts[0] <= now - 1000) starts.shift();
      if (starts.length > rps) {
        stats.tooMany++;
        return send(res, 429, { name: "rate_limit_exceeded", message: "Too many requests" }, { "retry-after": "1" });
      }
      if (random() < errorRate) {
        stats.errors++;
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
        });
        result = { data, errors };
        if (key) answered.set(key, result);
      }
      if (random() < timeoutRate) {
        // Accepted, but the answer never arrives: the client times out and asks again under its key.
        stats.timeouts++;
        hanging.add(res);
        return;
      }
      send(res, 200, result);
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
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
    reset: () => {
      Object.keys(stats).forEach((k) => (stats[k] = 0));
      copies.clear();
    },
    stop: () =>
      new Promise((resolve) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
};
