// Throughput and latency of each API route beside its two floors: the constant route (routing and
// request context only) and the raw-D1 route running the repository's SQL without the framework.
import { createHash } from "node:crypto";
import { requestLine } from "./wrk.mjs";

const measureCase = (session, { name, description, apiLines, rawLines }) => {
  session.log(`${name}…`);
  // Warm: JIT, credential cache entries for every token, SQLite pages.
  session.wrk(`${name}-warmup`, apiLines, { seconds: 1 });
  session.wrk(`${name}-warmup-raw`, rawLines, { seconds: 1 });
  const { constant, raw, api } = session.interleaved(name, { constant: session.constantLines, raw: rawLines, api: apiLines });
  return {
    name,
    description,
    api,
    raw,
    constant,
    ratios: {
      rpsVsRaw: api.rps / raw.rps,
      rpsVsConstant: api.rps / constant.rps,
      p50VsRaw: api.p50 / raw.p50,
      p99VsRaw: api.p99 / raw.p99,
      p50VsConstant: api.p50 / constant.p50,
    },
  };
};

export const measureReads = async (session) => {
  const { seed, tokens, ws, raw } = session;
  const sample = seed.subscriberIds.filter((_, i) => i % 97 === 0).slice(0, 1000);
  session.expectStatus(await session.api("GET", `${ws}/subscribers/${sample[0]}`), 200, "retrieve");
  session.expectStatus(await session.api("GET", `${raw}/subscribers/${sample[0]}`), 200, "raw retrieve");
  const rows = [
    measureCase(session, {
      name: "retrieve subscriber",
      description: "GET /v1/workspaces/{ws}/subscribers/{id}, 1,000 different ids",
      apiLines: sample.map((id, i) => requestLine({ path: `${ws}/subscribers/${id}`, token: tokens[i % tokens.length] })),
      rawLines: sample.map((id) => requestLine({ path: `${raw}/subscribers/${id}` })),
    }),
  ];
  for (const [name, query] of [
    ["list subscribers", "limit=100"],
    ["list, tag filter", "limit=100&tag=beta"],
    ["list, status filter", "limit=100&status=unsubscribed"],
  ]) {
    rows.push(
      measureCase(session, {
        name,
        description: `GET /v1/workspaces/{ws}/subscribers?${query}`,
        apiLines: tokens.map((token) => requestLine({ path: `${ws}/subscribers?${query}`, token })),
        rawLines: [requestLine({ path: `${raw}/subscribers?${query}` })],
      }),
    );
  }
  return rows;
};

export const measureWrites = async (session) => {
  const { tokens, ws, raw, runId, seed } = session;
  // {n} makes every request's email (and Idempotency-Key) new (see wrk.lua).
  const createBody = '{"email":"c-{n}@bench.example","tags":["weekly"]}';
  const keyedBody = '{"email":"k-{n}@bench.example","tags":["weekly"]}';
  session.expectStatus(
    await session.api("POST", `${ws}/subscribers`, { key: `bench-keyed-${runId}-probe`, body: { email: `keyed-${runId}@bench.example` } }),
    201,
    "keyed create",
  );
  const rows = [
    measureCase(session, {
      name: "create subscriber",
      description: "POST /v1/workspaces/{ws}/subscribers, a new email each request",
      apiLines: tokens.map((token) => requestLine({ method: "POST", path: `${ws}/subscribers`, token, body: createBody })),
      rawLines: [requestLine({ method: "POST", path: `${raw}/subscribers`, body: createBody })],
    }),
    // The first request of each key: the claim, the handler, and the stored response, against the same
    // insert floor as the unkeyed create.
    measureCase(session, {
      name: "keyed create",
      description: "POST /v1/workspaces/{ws}/subscribers with a new Idempotency-Key and a new email each request",
      apiLines: tokens.map((token) =>
        requestLine({ method: "POST", path: `${ws}/subscribers`, token, key: "bench-key-{n}", body: keyedBody }),
      ),
      rawLines: [requestLine({ method: "POST", path: `${raw}/subscribers`, body: keyedBody })],
    }),
  ];

  // One used key per credential (keys are scoped to the credential), then replays of them.
  const keys = tokens.map((_, i) => `bench-replay-${runId}-${i}`);
  const body = (i) => ({ email: `replay-${runId}-${i}@bench.example` });
  for (let i = 0; i < tokens.length; i++) {
    const first = await session.api("POST", `${ws}/subscribers`, { token: tokens[i], key: keys[i], body: body(i) });
    session.expectStatus(first, 201, "idempotent create");
  }
  const probe = await session.api("POST", `${ws}/subscribers`, { token: tokens[0], key: keys[0], body: body(0) });
  if (probe.status !== 201 || probe.headers.get("idempotent-replayed") !== "true") {
    throw new Error(`an Idempotency-Key replay did not replay: ${probe.status} ${JSON.stringify(probe.body)}`);
  }
  // The floor reads the very KV entry a replay is served from (src/middleware/idempotency.ts).
  const sha256 = (text) => createHash("sha256").update(text).digest("hex");
  const kvKeys = keys.map((key, i) => encodeURIComponent(`idempotency:${seed.credentialIds[i]}:${sha256(key)}`));
  session.expectStatus(await session.api("GET", `/bench/raw/kv/${kvKeys[0]}`), 200, "stored replay in KV");
  rows.push(
    measureCase(session, {
      name: "idempotent replay",
      description: "POST /v1/workspaces/{ws}/subscribers with an Idempotency-Key already used; floor: the KV read of the stored response",
      apiLines: tokens.map((token, i) =>
        requestLine({ method: "POST", path: `${ws}/subscribers`, token, key: keys[i], body: JSON.stringify(body(i)) }),
      ),
      rawLines: kvKeys.map((key) => requestLine({ path: `/bench/raw/kv/${key}` })),
    }),
  );
  return rows;
};
