import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { expectError, tenant } from "./helpers";

afterEach(() => {
  vi.restoreAllMocks();
});

const count = async (table: string, workspaceId: string) =>
  (await env.DB.prepare(`select count(*) as n from ${table} where workspace_id = ?`).bind(workspaceId).first<{ n: number }>())!.n;

describe("POST /subscribers/batch", () => {
  it("creates each new address, answers an existing one with its subscriber untouched, in the request's order, in one D1 call", async () => {
    const t = await tenant();
    const before = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "Grace@example.com", tags: ["old"] } });
    const res = await t.call("POST", `${t.ws}/subscribers/batch`, {
      body: {
        subscribers: [
          { email: "ada@example.com", name: " Ada ", tags: ["vip", "beta", "vip"] },
          { email: "grace@EXAMPLE.com", name: "Someone else", tags: ["new"] },
          { email: "linus@example.com", status: "pending", location: "Helsinki" },
        ],
      },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get("server-timing")).toMatch(/db;dur=[\d.]+;desc="1 call"/);
    const data = res.body.data;
    expect(data).toMatchObject({ object: "subscriber_batch", created: 2, existing: 1 });
    expect(data.results.map((r: { index: number; result: string }) => [r.index, r.result])).toEqual([
      [0, "created"],
      [1, "existing"],
      [2, "created"],
    ]);
    const [ada, grace, linus] = await Promise.all(
      data.results.map(async (r: { subscriber_id: string }) => (await t.call("GET", `${t.ws}/subscribers/${r.subscriber_id}`)).body.data),
    );
    // As POST /subscribers would have made them: trimmed, tags deduplicated in order, status default active.
    expect(ada).toMatchObject({ object: "subscriber", email: "ada@example.com", name: "Ada", tags: ["vip", "beta"], status: "active" });
    expect(linus).toMatchObject({ email: "linus@example.com", status: "pending", location: "Helsinki", name: null, tags: [] });
    // The existing one: as it was, not as the item asked.
    expect(grace).toEqual(before.body.data);
    // Ids in the request's order (newest last).
    expect(ada.id < linus.id).toBe(true);
    // The tag filter sees them (its index is kept by the table's triggers).
    const vip = await t.call("GET", `${t.ws}/subscribers?tag=vip`);
    expect(vip.body.data.map((s: { email: string }) => s.email)).toEqual(["ada@example.com"]);
    // One subscriber.created per subscriber created, carrying it as it reads.
    const events = (await t.call("GET", `${t.ws}/events?type=subscriber.created`)).body.data;
    expect(events).toHaveLength(3);
    const created = events.filter((e: { data: { object: { id: string } } }) => e.data.object.id !== before.body.data.id);
    expect(created.map((e: { data: { object: unknown } }) => e.data.object)).toEqual([linus, ada]);
  });

  it("names the bad item and writes nothing: a bad address, one address twice (any case), none, over 1,000", async () => {
    const t = await tenant();
    const bad = await t.call("POST", `${t.ws}/subscribers/batch`, { body: { subscribers: [{ email: "a@example.com" }, { email: "not-an-address" }] } });
    expectError(bad, 400, "validation_failed");
    expect(bad.body.error.param).toBe("subscribers[1].email");
    const twice = await t.call("POST", `${t.ws}/subscribers/batch`, {
      body: { subscribers: [{ email: "a@example.com" }, { email: "b@example.com" }, { email: "A@Example.com" }] },
    });
    expectError(twice, 400, "validation_failed");
    expect(twice.body.error.param).toBe("subscribers[2].email");
    expect(twice.body.error.message).toContain("subscribers[0].email");
    expectError(await t.call("POST", `${t.ws}/subscribers/batch`, { body: { subscribers: [] } }), 400, "validation_failed");
    const many = Array.from({ length: 1001 }, (_, i) => ({ email: `s${i}@example.com` }));
    const over = await t.call("POST", `${t.ws}/subscribers/batch`, { body: { subscribers: many } });
    expectError(over, 400, "validation_failed");
    expect(over.body.error.param).toBe("subscribers");
    const unknown = await t.call("POST", `${t.ws}/subscribers/batch`, { body: { subscribers: [{ email: "a@example.com", vip: true }] } });
    expectError(unknown, 400, "validation_failed");
    expect(await count("subscribers", t.workspace.id)).toBe(0);
    expect(await count("events", t.workspace.id)).toBe(0);
  });

  it("creates 1,000 in one call, hands each event to the webhook queue at most 100 a send, and refuses a body over 1 MiB", async () => {
    const t = await tenant();
    await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url: "https://hooks.example.com/in", events: ["subscriber.created"] } });
    const sent: number[] = [];
    // Not delivered further: this test is about the hand-over.
    vi.spyOn(env.WEBHOOK_QUEUE, "sendBatch").mockImplementation(async (messages) => {
      sent.push([...messages].length);
      return {} as QueueSendBatchResponse;
    });
    const subscribers = Array.from({ length: 1000 }, (_, i) => ({ email: `reader${i}@example.com`, name: `Reader ${i} of the spring import`, tags: ["import"] }));
    // Over the API's 64 KiB: the import's cap is 1 MiB.
    expect(JSON.stringify({ subscribers }).length).toBeGreaterThan(64 * 1024);
    const res = await t.call("POST", `${t.ws}/subscribers/batch`, { body: { subscribers } });
    expect(res.status, res.text.slice(0, 300)).toBe(200);
    expect(res.body.data.created).toBe(1000);
    expect(res.headers.get("server-timing")).toMatch(/db;dur=[\d.]+;desc="1 call"/);
    expect(await count("subscribers", t.workspace.id)).toBe(1000);
    expect(await count("events", t.workspace.id)).toBe(1000);
    await vi.waitFor(() => expect(sent.reduce((a, b) => a + b, 0)).toBe(1000));
    expect(Math.max(...sent)).toBeLessThanOrEqual(100);
    // Again: every address is there, so nothing is created and no event written.
    const again = await t.call("POST", `${t.ws}/subscribers/batch`, { body: { subscribers } });
    expect(again.body.data).toMatchObject({ created: 0, existing: 1000 });
    expect(await count("events", t.workspace.id)).toBe(1000);
    const huge = await t.call("POST", `${t.ws}/subscribers/batch`, { raw: `{"subscribers":[{"email":"a@example.com","name":"${"x".repeat(1024 * 1024)}"}]}`, headers: { "content-type": "application/json" } });
    expectError(huge, 413, "payload_too_large");
  });

  it("replays the first answer to a retry with the same Idempotency-Key, byte for byte, though every address now exists", async () => {
    const t = await tenant();
    const body = { subscribers: [{ email: "ada@example.com" }, { email: "grace@example.com" }] };
    const first = await t.call("POST", `${t.ws}/subscribers/batch`, { body, headers: { "Idempotency-Key": "import-1" } });
    expect(first.body.data.created).toBe(2);
    const retry = await t.call("POST", `${t.ws}/subscribers/batch`, { body, headers: { "Idempotency-Key": "import-1" } });
    expect(retry.status).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBe("true");
    expect(retry.text).toBe(first.text);
    expect(await count("subscribers", t.workspace.id)).toBe(2);
  });
});
