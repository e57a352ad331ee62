import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type ApiResponse, dieAfterNextCommit, expectError, tenant } from "./helpers";
import { createCampaign, createNewsletter, type Tenant } from "./send.fixtures";

// A request that dies the instant its write commits (the batch is in D1, nothing after it ran: no
// answer sent, no KV copy, no queue message) must not be answered differently when the client
// retries with the same Idempotency-Key: the retry replays the original answer, and exactly one
// resource exists. The death is simulated by letting D1's batch commit and then throwing.

afterEach(() => {
  vi.restoreAllMocks();
});

const count = async (table: string, workspaceId: string) =>
  (await env.DB.prepare(`select count(*) as n from ${table} where workspace_id = ?`).bind(workspaceId).first<{ n: number }>())!.n;

const keyed = (key: string, body: unknown) => ({ headers: { "Idempotency-Key": key }, body });

/** Dies after the commit, then retries (twice): both retries are the same original answer. */
const crashAndRetry = async (t: Tenant, method: string, path: string, key: string, body: unknown, status: number) => {
  const died = dieAfterNextCommit();
  const crashed = await t.call(method, path, keyed(key, body));
  expect(died.spy).toHaveBeenCalled();
  expectError(crashed, 500, "internal_error");
  expect(died.kvPut).not.toHaveBeenCalled();
  vi.restoreAllMocks();

  const retry = await t.call(method, path, keyed(key, body));
  expect(retry.status, retry.text).toBe(status);
  expect(retry.headers.get("idempotent-replayed")).toBe("true");
  const again = await t.call(method, path, keyed(key, body));
  expect(again.status).toBe(status);
  expect(again.text).toBe(retry.text);
  return retry;
};

/** The replay is the resource as a read shows it (for resources that have not moved on since). */
const expectSameAsRead = async (t: Tenant, replay: ApiResponse, path: string) => {
  const read = await t.call("GET", path);
  expect(read.status, read.text).toBe(200);
  expect(replay.text).toBe(read.text);
};

describe("a request that dies right after its write commits", () => {
  it("subscriber create: the retry replays the original 201, one subscriber exists", async () => {
    const t = await tenant();
    const body = { email: "once@example.com", name: "Once", tags: ["a", "b"] };
    const retry = await crashAndRetry(t, "POST", `${t.ws}/subscribers`, "crash-subscriber-1", body, 201);
    expect(retry.body.data).toMatchObject({ object: "subscriber", email: "once@example.com", name: "Once", tags: ["a", "b"] });
    expect(await count("subscribers", t.workspace.id)).toBe(1);
    await expectSameAsRead(t, retry, `${t.ws}/subscribers/${retry.body.data.id}`);
  });

  it("subscriber update: the retry replays the original 200 and the change applies once", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "pat@example.com" } });
    const path = `${t.ws}/subscribers/${created.body.data.id}`;
    const retry = await crashAndRetry(t, "PATCH", path, "crash-patch-1", { name: "Pat", status: "unsubscribed" }, 200);
    expect(retry.body.data).toMatchObject({ name: "Pat", status: "unsubscribed" });
    await expectSameAsRead(t, retry, path);
  });

  it("subscriber batch: the retry replays the original 200 (created, not existing), each subscriber and event once", async () => {
    const t = await tenant();
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "there@example.com" } });
    const body = { subscribers: [{ email: "one@example.com" }, { email: "there@example.com" }, { email: "two@example.com", tags: ["x"] }] };
    const retry = await crashAndRetry(t, "POST", `${t.ws}/subscribers/batch`, "crash-batch-1", body, 200);
    expect(retry.body.data).toMatchObject({ object: "subscriber_batch", created: 2, existing: 1 });
    expect(retry.body.data.results.map((r: { result: string }) => r.result)).toEqual(["created", "existing", "created"]);
    expect(await count("subscribers", t.workspace.id)).toBe(3);
    expect(await count("events", t.workspace.id)).toBe(3);
    const made = (await t.call("GET", `${t.ws}/subscribers/${retry.body.data.results[2].subscriber_id}`)).body.data;
    expect(made).toMatchObject({ email: "two@example.com", tags: ["x"] });
  });

  it("newsletter create: the retry replays the original 201, one newsletter exists", async () => {
    const t = await tenant();
    const body = { name: "Weekly", from_email: "news@example.com", from_name: "Acme" };
    const retry = await crashAndRetry(t, "POST", `${t.ws}/newsletters`, "crash-newsletter-1", body, 201);
    expect(retry.body.data).toMatchObject({ object: "newsletter", name: "Weekly" });
    expect(await count("newsletters", t.workspace.id)).toBe(1);
    await expectSameAsRead(t, retry, `${t.ws}/newsletters/${retry.body.data.id}`);
  });

  it("segment create: the retry replays the original 201, one segment exists", async () => {
    const t = await tenant();
    const body = { name: "VIPs", filter: { tags_any: ["vip"] } };
    const retry = await crashAndRetry(t, "POST", `${t.ws}/segments`, "crash-segment-1", body, 201);
    expect(retry.body.data).toMatchObject({ object: "segment", filter: { tags_any: ["vip"], tags_all: null } });
    expect(await count("segments", t.workspace.id)).toBe(1);
    await expectSameAsRead(t, retry, `${t.ws}/segments/${retry.body.data.id}`);
  });

  it("campaign create: the retry replays the original 201, one campaign exists", async () => {
    const t = await tenant();
    const newsletter = await createNewsletter(t);
    const body = { subject: "Hello", preheader: "Hi", newsletter_id: newsletter.id };
    const retry = await crashAndRetry(t, "POST", `${t.ws}/campaigns`, "crash-campaign-1", body, 201);
    expect(retry.body.data).toMatchObject({ object: "campaign", status: "draft", subject: "Hello" });
    expect(await count("campaigns", t.workspace.id)).toBe(1);
    await expectSameAsRead(t, retry, `${t.ws}/campaigns/${retry.body.data.id}`);
  });

  it("send: the retry replays the original 202 with the one operation, never 409 campaign_not_sendable", async () => {
    const t = await tenant();
    const campaign = await createCampaign(t);
    const path = `${t.ws}/campaigns/${campaign.id}/send`;
    const retry = await crashAndRetry(t, "POST", path, "crash-send-1", { integration_slug: "sandbox" }, 202);
    expect(retry.body.data).toMatchObject({ object: "operation", type: "campaign_send", status: "queued", campaign_id: campaign.id });
    expect(await count("operations", t.workspace.id)).toBe(1);
    const operation = await env.DB.prepare("select id from operations where workspace_id = ?").bind(t.workspace.id).first<{ id: string }>();
    expect(retry.body.data.id).toBe(operation!.id);
    expect((await t.call("GET", `${t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("sending");
  });

  // Writes whose events are conditional: whether the key's record is written follows the write, not
  // the event (a scheduled send writes no campaign.sending; a second unsubscribe writes no event).
  it("scheduled send: the retry replays the original 202, the campaign stays scheduled with one operation", async () => {
    const t = await tenant();
    const campaign = await createCampaign(t, { scheduled_at: new Date(Date.now() + 3_600_000).toISOString() });
    const path = `${t.ws}/campaigns/${campaign.id}/send`;
    const retry = await crashAndRetry(t, "POST", path, "crash-scheduled-1", {}, 202);
    expect(retry.body.data).toMatchObject({ object: "operation", type: "campaign_send", campaign_id: campaign.id });
    expect(await count("operations", t.workspace.id)).toBe(1);
    expect((await t.call("GET", `${t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("scheduled");
  });

  it("an unsubscribe that changes no status: the retry replays the original 200", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "gone@example.com", status: "unsubscribed" } });
    const path = `${t.ws}/subscribers/${created.body.data.id}`;
    const retry = await crashAndRetry(t, "PATCH", path, "crash-patch-2", { name: "Gone", status: "unsubscribed" }, 200);
    expect(retry.body.data).toMatchObject({ name: "Gone", status: "unsubscribed" });
    await expectSameAsRead(t, retry, path);
  });
});

describe("a write whose commit's answer is lost on the way back from D1", () => {
  it("answers from the key's record at once: the original answer, one resource", async () => {
    const t = await tenant();
    const batch = env.DB.batch.bind(env.DB);
    vi.spyOn(env.DB, "batch").mockImplementationOnce(async (statements) => {
      await batch(statements);
      throw new Error("D1_ERROR: Network connection lost.");
    });
    const res = await t.call("POST", `${t.ws}/newsletters`, keyed("lost-answer-1", { name: "N", from_email: "n@example.com" }));
    expect(res.status, res.text).toBe(201);
    expect(await count("newsletters", t.workspace.id)).toBe(1);
    await expectSameAsRead(t, res, `${t.ws}/newsletters/${res.body.data.id}`);
    const again = await t.call("POST", `${t.ws}/newsletters`, keyed("lost-answer-1", { name: "N", from_email: "n@example.com" }));
    expect(again.text).toBe(res.text);
  });
});

describe("a write that fails", () => {
  it("leaves neither the resource nor the key's record behind, so the retry runs anew", async () => {
    const t = await tenant();
    vi.spyOn(env.DB, "batch").mockRejectedValueOnce(new Error("D1 is unavailable"));
    vi.spyOn(console, "error").mockImplementation(() => {});
    const failed = await t.call("POST", `${t.ws}/newsletters`, keyed("failed-write-1", { name: "N", from_email: "n@example.com" }));
    expectError(failed, 500, "internal_error");
    expect(await count("newsletters", t.workspace.id)).toBe(0);
    const records = await env.DB.prepare("select count(*) as n from idempotency_keys").first<{ n: number }>();
    expect(records!.n).toBe(0);

    const retry = await t.call("POST", `${t.ws}/newsletters`, keyed("failed-write-1", { name: "N", from_email: "n@example.com" }));
    expect(retry.status, retry.text).toBe(201);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    expect(await count("newsletters", t.workspace.id)).toBe(1);
  });
});
