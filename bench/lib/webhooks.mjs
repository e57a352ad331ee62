// Outgoing events: how fast changes reach a webhook receiver. The harness starts a receiver (a plain
// Node HTTP server on 127.0.0.1, answering 204), points a webhook endpoint of a fresh workspace at it,
// then creates subscribers through the API (each write commits a `subscriber.created` event in its own
// batch). Reported: events per second delivered (the N events, from the first write to the last
// receipt) and the latency from each change (the event's own timestamp, written in the change's
// batch) to its arrival at the receiver, p50 and p99.
import { createServer } from "node:http";

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

const startReceiver = () =>
  new Promise((resolve) => {
    const arrivals = new Map();
    const server = createServer((req, res) => {
      const chunks = [];
      req.on("data", (chunk) => chunks.push(chunk));
      req.on("end", () => {
        const at = Date.now();
        const id = req.headers["webhook-id"];
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
          if (typeof id === "string" && !arrivals.has(id)) arrivals.set(id, { at, type: body.type, changedAt: Date.parse(body.timestamp) });
        } catch {
          // A body that is not JSON is not one of ours.
        }
        res.writeHead(204).end();
      });
    });
    server.listen(0, "127.0.0.1", () => resolve({ server, arrivals, port: server.address().port }));
  });

/**
 * `events` subscriber creations, `concurrency` at a time, into a workspace whose endpoint points at the
 * receiver; resolves once all arrived (or the timeout passed) with the rate and latencies.
 */
const phase = async ({ api, tokens, ws, receiver, events, concurrency, timeoutSeconds, label }) => {
  receiver.arrivals.clear();
  const prefix = `wh${label}${Date.now().toString(36)}`;
  const started = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < events) {
      const i = next++;
      const res = await api("POST", `${ws}/subscribers`, { token: tokens[i % tokens.length], body: { email: `${prefix}.${i}@bench.example` } });
      if (res.status !== 201) throw new Error(`create subscriber: ${res.status} ${JSON.stringify(res.body)}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const writesSeconds = (Date.now() - started) / 1000;
  const deadline = Date.now() + timeoutSeconds * 1000;
  while (receiver.arrivals.size < events && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  const arrivals = [...receiver.arrivals.values()].filter((a) => a.type === "subscriber.created");
  const seconds = (Math.max(...arrivals.map((a) => a.at)) - started) / 1000;
  const latencies = arrivals.map((a) => a.at - a.changedAt).sort((a, b) => a - b);
  return {
    events,
    delivered: arrivals.length,
    concurrency,
    writesSeconds,
    seconds,
    eventsPerSecond: arrivals.length / seconds,
    latencyMs: { p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies.at(-1) },
  };
};

/** Two phases: writes as fast as the service takes them (throughput), then one at a time (latency unloaded). */
export const measureWebhooks = async ({ api, tokens, ws, events, concurrency, timeoutSeconds, log }) => {
  const receiver = await startReceiver();
  try {
    const [token] = tokens;
    const endpoint = await api("POST", `${ws}/webhook_endpoints`, {
      token,
      body: { url: `http://127.0.0.1:${receiver.port}/hook`, events: ["subscriber.created"], description: "bench receiver" },
    });
    if (endpoint.status !== 201) throw new Error(`create endpoint: ${endpoint.status} ${JSON.stringify(endpoint.body)}`);
    const common = { api, tokens, ws, receiver, timeoutSeconds };
    const loaded = await phase({ ...common, events, concurrency, label: "l" });
    const unloaded = await phase({ ...common, events: Math.max(20, Math.floor(events / 10)), concurrency: 1, label: "u" });
    await api("DELETE", `${ws}/webhook_endpoints/${endpoint.body.data.id}`, { token });
    for (const [name, r] of [["loaded", loaded], ["one at a time", unloaded]]) {
      log(
        `webhooks (${name}): ${r.delivered}/${r.events} events delivered in ${r.seconds.toFixed(2)} s (${r.eventsPerSecond.toFixed(0)}/s; writes took ${r.writesSeconds.toFixed(2)} s); change → receiver p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms`,
      );
    }
    return { loaded, unloaded };
  } finally {
    receiver.server.close();
  }
};
