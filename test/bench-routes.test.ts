import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import benchWorker from "../bench/worker/index";
import { withLatency } from "../bench/worker/latency";
import { call, expectError, seedSubscribers, tenant } from "./helpers";

afterEach(() => {
  vi.restoreAllMocks();
});

// `call` goes through the deployed worker's own entry (wrangler.toml's main, src/index.ts): the
// baselines live only in the bench entry (bench/worker/), which `npm run bench` builds and serves.
describe("the deployed worker has no benchmark routes", () => {
  const probes: [string, string][] = [
    ["GET", "/bench/constant"],
    ["GET", "/v1/bench/constant"],
    ["GET", "/bench/raw/workspaces/ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T/subscribers"],
    ["GET", "/bench/raw/workspaces/ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T/subscribers/sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T"],
    ["POST", "/bench/raw/workspaces/ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T/subscribers"],
    ["GET", "/bench/raw/kv/some-key"],
    ["PUT", "/bench/raw/kv/some-key"],
    ["GET", "/bench/cursor?workspace_id=ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T&offset=0"],
    ["POST", "/bench/raw/fanout"],
    ["DELETE", "/bench/constant"],
  ];

  it.each(probes)("%s %s answers exactly like an unknown route", async (method, path) => {
    const res = await call(method, path, method === "GET" || method === "DELETE" ? {} : { body: { email: "a@example.com" } });
    expectError(res, 404, "not_found");
    const unknown = await call(method, path.replace("/bench/", "/no-such-route/"), {});
    expect(res.body.error.message).toBe(unknown.body.error.message.replace("/no-such-route/", "/bench/"));
    expect(res.headers.get("allow")).toBeNull();
  });

  it("does not read storage or write KV on their behalf", async () => {
    const t = await tenant();
    const res = await call("GET", `/bench/raw/workspaces/${t.workspace.id}/subscribers`, { token: t.token });
    expectError(res, 404, "not_found");
    await call("PUT", "/bench/raw/kv/bench-probe", { raw: "{}", headers: { "content-type": "application/json" } });
    expect(await env.IDEMPOTENCY_KV.get("bench-probe")).toBeNull();
  });

  it("is not described in /openapi.json", async () => {
    const res = await call("GET", "/openapi.json");
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.paths).filter((path) => path.includes("bench"))).toEqual([]);
    expect(res.text).not.toContain("/bench");
  });
});

// The storage floor must run the repository's own SQL, or the ratios compare different work.
describe("the bench entry (bench/worker/index.ts)", () => {
  const benchCall = async (method: string, path: string, body?: unknown) => {
    const ctx = createExecutionContext();
    const init: RequestInit = body === undefined ? { method } : { method, body: JSON.stringify(body), headers: { "content-type": "application/json" } };
    // As workerd hands it to a fetch handler (its `cf` properties are not needed here).
    const request = new Request(`https://api.example.test${path}`, init) as Parameters<typeof benchWorker.fetch>[0];
    const res = await benchWorker.fetch(request, env, ctx);
    await waitOnExecutionContext(ctx);
    return { status: res.status, headers: res.headers, body: (await res.json()) as any };
  };

  it("serves the framework floor through the API's request context, and the API itself otherwise", async () => {
    const constant = await benchCall("GET", "/bench/constant");
    expect(constant.status).toBe(200);
    expect(constant.body).toEqual({ status: "ok" });
    expect(constant.headers.get("request-id")).toMatch(/^req_/);
    const health = await benchCall("GET", "/v1/health");
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: "ok", checks: { database: { status: "ok" } } });
    const unknown = await benchCall("GET", "/no-such-route");
    expect(unknown.body.error.code).toBe("not_found");
  });

  it("hands queue batches and cron events to the deployed worker's handlers, with the env unchanged", async () => {
    const { default: deployed } = await import("../src/index");
    const queue = vi.spyOn(deployed, "queue").mockResolvedValue(undefined);
    const scheduled = vi.spyOn(deployed, "scheduled").mockResolvedValue(undefined);
    const batch = { queue: "newsletter-send", messages: [] } as unknown as MessageBatch;
    const controller = { scheduledTime: 0, cron: "* * * * *" } as ScheduledController;
    await benchWorker.queue(batch, env);
    await benchWorker.scheduled(controller, env);
    expect(queue).toHaveBeenCalledWith(batch, env);
    expect(scheduled).toHaveBeenCalledWith(controller, env);

    // With BENCH_D1_LATENCY_MS, the same handlers get the same env but for a slowed-down D1.
    const slowed = { ...env, BENCH_D1_LATENCY_MS: "5" } as Env;
    await benchWorker.queue(batch, slowed);
    const seen = queue.mock.calls[1]?.[1] as Env;
    expect(seen.DB).not.toBe(env.DB);
    expect({ ...seen, DB: env.DB }).toEqual({ ...slowed, DB: env.DB });
    // One slowed handle per binding, so per-binding caches keep working.
    await benchWorker.queue(batch, slowed);
    expect(queue.mock.calls[2]?.[1]?.DB).toBe(seen.DB);
  });

  it("a slowed-down D1 answers exactly as the real one, a bit later", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 3);
    const slow = withLatency(env.DB, 20);
    const query = "SELECT id FROM subscribers WHERE workspace_id = ? ORDER BY id";
    const started = Date.now();
    const rows = await slow.prepare(query).bind(t.workspace.id).all();
    expect(Date.now() - started).toBeGreaterThanOrEqual(20);
    expect(rows.results).toEqual((await env.DB.prepare(query).bind(t.workspace.id).all()).results);
    expect(await slow.prepare(query).bind(t.workspace.id).first("id")).toBe(rows.results[0]?.id);
    const batchStarted = Date.now();
    const [batched] = await slow.batch([slow.prepare(query).bind(t.workspace.id)]);
    expect(Date.now() - batchStarted).toBeGreaterThanOrEqual(20);
    expect(batched?.results).toEqual(rows.results);
  });

  it("lists the same subscribers, in the same order, as the API for every filter and cursor", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 30, (i) => ({
      status: i % 3 === 0 ? "unsubscribed" : "active",
      tags: i % 2 === 0 ? ["weekly"] : [],
    }));
    for (const filter of ["", "&status=active", "&tag=weekly", "&tag=weekly&status=active"]) {
      const deep = await benchCall("GET", `/bench/cursor?workspace_id=${t.workspace.id}&offset=4${filter}`);
      expect(deep.status).toBe(200);
      const api = await t.call("GET", `${t.ws}/subscribers?limit=5&after=${deep.body.cursor}${filter}`);
      expect(api.status, api.text).toBe(200);
      const raw = await benchCall("GET", `/bench/raw/workspaces/${t.workspace.id}/subscribers?limit=5&after=${deep.body.position}${filter}`);
      expect(raw.body.data.map((row: { id: string }) => row.id)).toEqual(api.body.data.map((row: { id: string }) => row.id));
      expect(raw.body.data).toHaveLength(5);
      const first = await benchCall("GET", `/bench/raw/workspaces/${t.workspace.id}/subscribers?limit=5${filter}`);
      const apiFirst = await t.call("GET", `${t.ws}/subscribers?limit=5${filter}`);
      expect(first.body.data.map((row: { id: string }) => row.id)).toEqual(apiFirst.body.data.map((row: { id: string }) => row.id));
    }
  });

  it("reads one subscriber and creates one through the repository's statements", async () => {
    const t = await tenant();
    const created = await benchCall("POST", `/bench/raw/workspaces/${t.workspace.id}/subscribers`, { email: "Raw@Example.com" });
    expect(created.status).toBe(201);
    const api = await t.call("GET", `${t.ws}/subscribers/${created.body.data.id}`);
    expect(api.status, api.text).toBe(200);
    expect(api.body.data.email).toBe("Raw@Example.com");
    const again = await benchCall("POST", `/bench/raw/workspaces/${t.workspace.id}/subscribers`, { email: "raw@example.com" });
    expect(again.status).toBe(409);
    const read = await benchCall("GET", `/bench/raw/workspaces/${t.workspace.id}/subscribers/${created.body.data.id}`);
    expect(read.body.data.id).toBe(created.body.data.id);
  });

  it("fan-out floor writes one delivery per active subscriber, already sent, as a sandbox send does", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 1203, (i) => ({ status: i % 3 === 0 ? "unsubscribed" : "active" }));
    const newsletter = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "n@example.com" } });
    const campaign = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", newsletter_id: newsletter.body.data.id } });
    expect(campaign.status, campaign.text).toBe(201);
    const res = await benchCall("POST", "/bench/raw/fanout", { workspace_id: t.workspace.id, campaign_id: campaign.body.data.id });
    expect(res.status).toBe(200);
    expect(res.body.recipients).toBe(802);
    const counted = await env.DB.prepare("select count(*) as n, count(distinct subscriber_id) as d from deliveries where campaign_id = ?")
      .bind(campaign.body.data.id)
      .first<{ n: number; d: number }>();
    expect(counted).toEqual({ n: 802, d: 802 });
    const settled = await env.DB.prepare(
      "select count(*) as n from deliveries where campaign_id = ? and status = 'sent' and attempts = 1 and provider_message_id = 'sandbox_' || id",
    )
      .bind(campaign.body.data.id)
      .first<{ n: number }>();
    expect(settled?.n).toBe(802);
    const op = await env.DB.prepare("select total, delivered from operations where id = ?").bind(res.body.operation_id).first();
    expect(op).toEqual({ total: 802, delivered: 802 });
  });
});
