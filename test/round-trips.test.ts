import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { createApp } from "../src/app";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type ApiResponse, seedSubscribers, tenant, tripsOf } from "./helpers";
import { mockResend } from "./resend.mock";
import { createCampaign, createNewsletter, type Tenant } from "./send.fixtures";

// The round-trip budget of every route, read from the Server-Timing header each response carries
// (db and kv: calls and time). A write costs one D1 batch, with or without an Idempotency-Key; a
// read costs one D1 query; a keyed write adds one KV read (the replay fast path). The credential
// lookup is cached, so each test warms it first.

afterEach(() => {
  vi.restoreAllMocks();
});

type Budget = { db: number; kv: number };

const expectBudget = (res: ApiResponse, budget: Budget) => {
  expect(res.status, res.text).toBeLessThan(300);
  const trips = tripsOf(res);
  expect({ db: trips.db, kv: trips.kv }, `${res.url}: ${trips.header}`).toEqual(budget);
};

const key = (k: string) => ({ "Idempotency-Key": k });

const warm = async (t: Tenant) => {
  // The credential (cached after its first use) and the signing key (read once per isolate).
  await seedSubscribers(t.workspace.id, 3);
  const first = await t.call("GET", `${t.ws}/subscribers?limit=1`);
  expect(first.body.pagination.has_more).toBe(true);
};

describe("round trips per route", () => {
  it("reports db and kv calls and their time on every response, errors and utility routes included", async () => {
    const t = await tenant();
    const list = await t.call("GET", "/v1/workspaces");
    expect(list.headers.get("server-timing")).toMatch(/^db;dur=\d+\.\d;desc="\d+ calls?", kv;dur=\d+\.\d;desc="\d+ calls?"$/);
    const missing = await t.call("GET", `${t.ws}/subscribers/sub_0000000000`);
    expect(missing.status).toBe(404);
    expect(tripsOf(missing).db).toBe(1);
    const health = await t.call("GET", "/health");
    expect(tripsOf(health)).toMatchObject({ db: 1, kv: 0 });
  });

  it("writes cost one D1 batch, with or without an Idempotency-Key (plus one KV read with one)", async () => {
    const t = await tenant();
    await warm(t);
    const batch = vi.spyOn(env.DB, "batch");

    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "a@example.com" } });
    expectBudget(created, { db: 1, kv: 0 });
    const keyedCreate = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "b@example.com" }, headers: key("budget-sub-1") });
    expectBudget(keyedCreate, { db: 1, kv: 1 });
    const subscriber = `${t.ws}/subscribers/${created.body.data.id}`;
    expectBudget(await t.call("PATCH", subscriber, { body: { name: "A" } }), { db: 1, kv: 0 });
    expectBudget(await t.call("PATCH", subscriber, { body: { name: "B" }, headers: key("budget-patch-1") }), { db: 1, kv: 1 });

    const newsletter = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "n@example.com" }, headers: key("budget-nl-1") });
    expectBudget(newsletter, { db: 1, kv: 1 });
    const segment = await t.call("POST", `${t.ws}/segments`, { body: { name: "S", filter: { tags_any: ["x"] } }, headers: key("budget-seg-1") });
    expectBudget(segment, { db: 1, kv: 1 });
    const campaign = await t.call("POST", `${t.ws}/campaigns`, {
      body: { subject: "Hi", newsletter_id: newsletter.body.data.id, segment_id: segment.body.data.id },
      headers: key("budget-cmp-1"),
    });
    expectBudget(campaign, { db: 1, kv: 1 });
    const send = await t.call("POST", `${t.ws}/campaigns/${campaign.body.data.id}/send`, { body: {}, headers: key("budget-send-1") });
    expectBudget(send, { db: 1, kv: 1 });

    // The header is the truth: one D1 batch call per write above, nothing else.
    expect(batch).toHaveBeenCalledTimes(8);
  });

  it("every other write is one D1 batch too: edits, schedule changes, archive, import, webhook endpoints", async () => {
    const t = await tenant();
    await warm(t);
    const newsletter = await createNewsletter(t);
    expectBudget(await t.call("PATCH", `${t.ws}/newsletters/${newsletter.id}`, { body: { name: "M" }, headers: key("budget-nl-2") }), { db: 1, kv: 1 });
    const campaign = await createCampaign(t, { newsletter_id: newsletter.id });
    const path = `${t.ws}/campaigns/${campaign.id}`;
    expectBudget(await t.call("PATCH", path, { body: { subject: "Edited" }, headers: key("budget-cmp-2") }), { db: 1, kv: 1 });
    expectBudget(await t.call("PATCH", path, { body: { scheduled_at: new Date(Date.now() + 3_600_000).toISOString() } }), { db: 1, kv: 0 });
    expectBudget(await t.call("POST", `${path}/send`, { body: {} }), { db: 1, kv: 0 });
    expectBudget(await t.call("POST", `${path}/unschedule`, { headers: key("budget-unsched-1") }), { db: 1, kv: 1 });
    expectBudget(await t.call("POST", `${path}/archive`, { headers: key("budget-archive-1") }), { db: 1, kv: 1 });

    const imported = await t.call("POST", `${t.ws}/subscribers/batch`, {
      body: { subscribers: [{ email: "i1@example.com" }, { email: "i2@example.com", tags: ["x"] }] },
      headers: key("budget-batch-1"),
    });
    expectBudget(imported, { db: 1, kv: 1 });

    const endpoint = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url: "https://hooks.example.com/in", events: ["*"] }, headers: key("budget-wh-1") });
    expectBudget(endpoint, { db: 1, kv: 1 });
    const endpointPath = `${t.ws}/webhook_endpoints/${endpoint.body.data.id}`;
    expectBudget(await t.call("PATCH", endpointPath, { body: { description: "d" }, headers: key("budget-wh-2") }), { db: 1, kv: 1 });
    expectBudget(await t.call("POST", `${endpointPath}/rotate_secret`, { headers: key("budget-wh-3") }), { db: 1, kv: 1 });
    expectBudget(await t.call("DELETE", endpointPath), { db: 1, kv: 0 });
  });

  it("a test send reads its campaign once; with an Idempotency-Key its answer is recorded after the provider's", async () => {
    const t = await tenant();
    await warm(t);
    const campaign = await createCampaign(t);
    const path = `${t.ws}/campaigns/${campaign.id}/test`;
    expectBudget(await t.call("POST", path, { body: { emails: ["me@example.com"] } }), { db: 1, kv: 0 });
    expectBudget(await t.call("POST", path, { body: { emails: ["me@example.com"] }, headers: key("budget-test-1") }), { db: 2, kv: 1 });
  });

  it("a confirmation request costs one D1 read (subscriber and newsletter together), and with an Idempotency-Key the commit of its answer", async () => {
    const t = await tenant();
    await warm(t);
    const newsletter = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "n@example.com" } });
    const pending = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "p@example.com", status: "pending" } });
    const path = `${t.ws}/subscribers/${pending.body.data.id}/confirmation`;
    expectBudget(await t.call("POST", path, { body: { newsletter_id: newsletter.body.data.id } }), { db: 1, kv: 0 });
    expectBudget(await t.call("POST", path, { body: { newsletter_id: newsletter.body.data.id }, headers: key("budget-confirm-1") }), { db: 2, kv: 1 });
    // Through Resend: the message id is recorded (for the feedback about it) in one write, keyed or not.
    const live = await tenant("Acme", "live", { RESEND_API_KEY: "re_test_key", RESEND_MAX_RPS: "1000" });
    await warm(live);
    mockResend();
    const nl = await live.call("POST", `${live.ws}/newsletters`, { body: { name: "N", from_email: "n@example.com" } });
    const mailed = await live.call("POST", `${live.ws}/subscribers`, { body: { email: "q@example.com", status: "pending" } });
    const livePath = `${live.ws}/subscribers/${mailed.body.data.id}/confirmation`;
    expectBudget(await live.call("POST", livePath, { body: { newsletter_id: nl.body.data.id } }), { db: 2, kv: 0 });
    expectBudget(await live.call("POST", livePath, { body: { newsletter_id: nl.body.data.id }, headers: key("budget-confirm-2") }), { db: 2, kv: 1 });
  });

  it("a replay from KV costs no D1 call at all", async () => {
    const t = await tenant();
    await warm(t);
    const body = { email: "r@example.com" };
    const first = await t.call("POST", `${t.ws}/subscribers`, { body, headers: key("budget-replay-1") });
    expect(first.status).toBe(201);
    const replay = await t.call("POST", `${t.ws}/subscribers`, { body, headers: key("budget-replay-1") });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expectBudget(replay, { db: 0, kv: 1 });
  });

  it("reads cost one D1 query: retrieve, every list (first and later pages, with filters)", async () => {
    const t = await tenant();
    await warm(t);
    const campaign = await createCampaign(t);
    const newsletter = await createNewsletter(t);
    expectBudget(await t.call("GET", "/v1/workspaces"), { db: 1, kv: 0 });
    const page = await t.call("GET", `${t.ws}/subscribers?limit=2`);
    expectBudget(page, { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/subscribers?limit=2&after=${page.body.pagination.next_cursor}`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/subscribers?status=active&limit=1`), { db: 1, kv: 0 });
    const [sub] = page.body.data;
    expectBudget(await t.call("GET", `${t.ws}/subscribers/${sub.id}`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/campaigns/${campaign.id}`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/campaigns`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/newsletters/${newsletter.id}`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/newsletters`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/segments`), { db: 1, kv: 0 });
    const segment = await t.call("POST", `${t.ws}/segments`, { body: { name: "S", filter: { tags_any: ["x"] } } });
    expectBudget(await t.call("GET", `${t.ws}/segments/${segment.body.data.id}`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", t.ws), { db: 1, kv: 0 });
    const op = await t.call("POST", `${t.ws}/campaigns/${campaign.id}/send`, { body: {} });
    expectBudget(await t.call("GET", `${t.ws}/operations/${op.body.data.id}`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/campaigns/${campaign.id}/deliveries`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/campaigns/${campaign.id}/stats`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/events`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/webhook_endpoints`), { db: 1, kv: 0 });
    const endpoint = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url: "https://hooks.example.com/in", events: ["subscriber.created"] } });
    expect(endpoint.status).toBe(201);
    expectBudget(await t.call("GET", `${t.ws}/webhook_endpoints/${endpoint.body.data.id}`), { db: 1, kv: 0 });
    expectBudget(await t.call("GET", `${t.ws}/webhook_endpoints/${endpoint.body.data.id}/attempts`), { db: 1, kv: 0 });
    expect((await t.call("POST", `${t.ws}/subscribers`, { body: { email: "evented@example.com" } })).status).toBe(201);
    const [event] = (await t.call("GET", `${t.ws}/events?limit=1`)).body.data;
    expectBudget(await t.call("GET", `${t.ws}/events/${event.id}`), { db: 1, kv: 0 });
  });
});

describe("request bodies", () => {
  /** A chunked upload with no Content-Length, counting what the server pulled from it. */
  const streamed = (total: number, chunk: number, options: { failAfter?: number } = {}) => {
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (options.failAfter !== undefined && pulled >= options.failAfter) {
            controller.error(new Error("client went away"));
            return;
          }
          if (pulled >= total) {
            controller.close();
            return;
          }
          const bytes = new Uint8Array(Math.min(chunk, total - pulled)).fill(0x20);
          pulled += bytes.byteLength;
          controller.enqueue(bytes);
        },
      },
      { highWaterMark: 0 },
    );
    return { body, pulled: () => pulled };
  };

  const request = (t: Tenant, body: ReadableStream<Uint8Array>) =>
    new Request(`https://api.example.test${t.ws}/subscribers`, {
      method: "POST",
      headers: { authorization: `Bearer ${t.token}`, "content-type": "application/json" },
      body,
      // @ts-expect-error: a streamed request body needs half duplex (not in every lib's RequestInit).
      duplex: "half",
    });

  const post = (t: Tenant, body: ReadableStream<Uint8Array>) => exports.default.fetch(request(t, body));

  it("refuses a streamed 1 MB body with 413 after reading at most 64 KiB and one chunk", async () => {
    const t = await tenant();
    const chunk = 8 * 1024;
    const upload = streamed(1024 * 1024, chunk);
    const res = await post(t, upload.body);
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("payload_too_large");
    expect(upload.pulled()).toBeLessThanOrEqual(64 * 1024 + chunk);
  });

  it("answers a body cut off mid-way with a 400, logged as a warning, not a 500", async () => {
    const t = await tenant();
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const error = vi.spyOn(console, "error");
    // Straight into the app, so the stream's failure reaches the worker as a failing read (as a
    // client's disconnect does), rather than as a truncated pipe.
    const res = await createApp().fetch(request(t, streamed(32 * 1024, 4096, { failAfter: 8192 }).body), env, createExecutionContext());
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("invalid_json");
    expect(body.error.message).toMatch(/ended before it was complete/);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(JSON.parse(String(warn.mock.calls[0]![0]))).toMatchObject({ level: "warn", status: 400 });
    expect(error).not.toHaveBeenCalled();
    expect((await t.call("GET", `${t.ws}/subscribers`)).body.data).toEqual([]);
  });
});
