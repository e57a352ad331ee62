import { createExecutionContext, createMessageBatch, createScheduledController, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import worker from "../src/index";
import { MAX_DELIVERY_ATTEMPTS } from "../src/sending/deliver";
import { FANOUT_WINDOW, FANOUT_WINDOWS_PER_MESSAGE } from "../src/sending/fanout";
import { TRIES_PER_STEP } from "../src/sending/integrations/resend";
import { HEDGE_AFTER_MS } from "../src/sending/integrations/resend-requests";
import { expectError, seedSubscribers } from "./helpers";
import { type Fault, mockResend } from "./resend.mock";
import { allDeliveries, createCampaign, createNewsletter, createSegment, type Tenant } from "./send.fixtures";
import { harness, operationOf, send } from "./send.harness";

// These tests drive the queue handler themselves, message by message, so faults can be injected
// between the steps: the app and the consumer get an env whose SEND_QUEUE keeps what is sent.

/**
 * A D1 binding on which the batch containing a statement with `sql` in it throws instead of running,
 * like an isolate dying just before that write: once, after letting `skip` such batches through.
 */
const crashingD1 = (sql: string, skip = 0) => {
  const crashes = { left: 1, skip };
  const statementsSql = new WeakMap<D1PreparedStatement, string>();
  const db = {
    prepare: (query: string) => {
      const statement = env.DB.prepare(query);
      const bind = statement.bind.bind(statement);
      statement.bind = (...values: unknown[]) => {
        const bound = bind(...values);
        statementsSql.set(bound, query);
        return bound;
      };
      statementsSql.set(statement, query);
      return statement;
    },
    batch: async (statements: D1PreparedStatement[]) => {
      if (crashes.left > 0 && statements.some((s) => statementsSql.get(s)?.includes(sql)) && crashes.skip-- <= 0) {
        crashes.left--;
        throw new Error("injected: isolate died");
      }
      return env.DB.batch(statements);
    },
    exec: (query: string) => env.DB.exec(query),
    dump: () => env.DB.dump(),
    withSession: (c?: string) => env.DB.withSession(c),
  } as unknown as D1Database;
  return { db, crashes };
};

afterEach(() => {
  vi.restoreAllMocks();
});


/**
 * A live send through the Resend mock to `recipients` new subscribers (`fields` as seedSubscribers
 * takes them), the mock answering with `faults` first.
 */
const resendSend = async (options: { recipients: number; faults?: Fault[]; fields?: Parameters<typeof seedSubscribers>[2] }) => {
  const h = await harness("live");
  const ids = await seedSubscribers(h.t.workspace.id, options.recipients, options.fields);
  const resend = mockResend();
  resend.inject(...(options.faults ?? []));
  const campaign = await createCampaign(h.t);
  const op = await send(h.t, campaign.id, { integration_slug: "resend" });
  return { h, ids, resend, campaign, op };
};

/** The same fault for every try of one step. */
const everyTry = (fault: Fault): Fault[] => Array.from({ length: TRIES_PER_STEP }, () => fault);

const setStatus = async (t: Tenant, subscriberId: string | undefined, status: string) =>
  expect((await t.call("PATCH", `${t.ws}/subscribers/${subscriberId}`, { body: { status } })).status).toBe(200);

describe("delivery through Resend (live credential, mocked provider)", () => {
  it("sends every subscriber exactly the message its preview shows (one rendering path)", async () => {
    const h = await harness("live");
    const [first, second] = await seedSubscribers(h.t.workspace.id, 2);
    await env.DB.prepare("UPDATE subscribers SET name = '<i>Ann</i>', tags = '[\"vip\"]', location = 'Oslo' WHERE id = ?").bind(first).run();
    const resend = mockResend();
    const newsletter = await createNewsletter(h.t, { reply_to: "editor@example.com" });
    const campaign = await createCampaign(h.t, {
      newsletter_id: newsletter.id,
      subject: "{{ subscriber.name | default: 'Friend' }}, your notes",
      preheader: "From {{ subscriber.location | default: 'anywhere' }}",
      html: '<html><body><p>Hi {{ subscriber.name }}</p>{% for t in subscriber.tags %}<b>{{ t | upcase }}</b>{% endfor %}<a href="https://example.com">Read</a></body></html>',
    });
    await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();

    expect(resend.calls).toHaveLength(1);
    const received = resend.received.map(({ id: _id, ...message }) => message);
    expect(received).toHaveLength(2);
    for (const id of [first, second]) {
      const preview = await h.t.call("POST", `${h.t.ws}/campaigns/${campaign.id}/preview`, { body: { subscriber_id: id } });
      expect(preview.status, preview.text).toBe(200);
      const p = preview.body.data;
      const got = received.find((r) => r.to[0] === p.to);
      const { tags, ...message } = got ?? { tags: undefined };
      expect(message).toEqual({ from: p.from, reply_to: p.reply_to, to: [p.to], subject: p.subject, html: p.html, text: p.text, headers: p.headers });
      expect(tags).toEqual([{ name: "delivery_id", value: expect.stringMatching(/^dlv_/) }]);
      expect(p.reply_to).toBe("editor@example.com");
    }
    const ann = received.find((r) => r.subject === "<i>Ann</i>, your notes");
    expect(ann?.html).toContain("<p>Hi &lt;i&gt;Ann&lt;/i&gt;</p><b>VIP</b>");
    expect(ann?.html).toContain(">From Oslo\n&#847;&zwnj;&nbsp;");
    expect(received.find((r) => r.subject === "Friend, your notes")?.text).toContain("Read <https://example.com>");
  });

  it("sends a chunk as one batch request with permissive validation and the chunk's idempotency key", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 3);
    const resend = mockResend();
    const campaign = await createCampaign(h.t, { subject: "Launch", preheader: "It is out" });
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();

    expect(resend.calls).toHaveLength(1);
    const [call] = resend.calls;
    expect(call).toMatchObject({ url: "https://api.resend.com/emails/batch", auth: "Bearer re_test_key", validation: "permissive" });
    const deliveries = await allDeliveries(h.t, campaign.id);
    const ids = deliveries.map((d) => d.id).sort();
    expect(call?.key).toMatch(new RegExp(`^${op.id}:${ids[0]}\\.\\.${ids[2]}:[0-9a-f]{16}$`));
    for (const m of call?.messages ?? []) {
      expect(m.from).toBe('"Acme News" <news@example.com>');
      expect(m.subject).toBe("Launch");
      expect(Object.keys(m.headers).sort()).toEqual(["List-Unsubscribe", "List-Unsubscribe-Post"]);
    }
    const byEmail = new Map(resend.received.map((r) => [r.to[0], r.id]));
    for (const d of deliveries) {
      expect(d).toMatchObject({ status: "sent", attempts: 1, provider_message_id: byEmail.get(d.email), error: null });
    }
    expect(await operationOf(h.t, op.id)).toMatchObject({
      status: "succeeded",
      integration_slug: "resend",
      progress: { total: 3, delivered: 3, failed: 0 },
    });
  });

  it("waits out a 429's Retry-After (every sender paused), then retries the message under the same key", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 3, faults: everyTry({ kind: "status", status: 429, name: "rate_limit_exceeded", retryAfter: 1 }) });

    await h.step(); // start
    await h.step(); // fan-out
    const first = await h.step(); // delivery: every try rate limited
    expect(first.retryMessages).toHaveLength(1);
    expect(first.retryMessages[0]?.delaySeconds).toBeGreaterThanOrEqual(1);
    // Each try after a 429 left no earlier than its Retry-After.
    for (let i = 1; i < resend.calls.length; i++) {
      expect((resend.calls[i]?.at ?? 0) - (resend.calls[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(990);
    }
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "running", progress: { total: 3, delivered: 0, failed: 0 } });
    for (const d of await allDeliveries(h.t, campaign.id)) {
      expect(d).toMatchObject({ status: "queued", attempts: 1, error: { code: "resend_rate_limit_exceeded" } });
    }

    await h.drain();
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 3, failed: 0 } });
    expect(new Set(resend.calls.map((c) => c.key)).size).toBe(1);
    expect(resend.received).toHaveLength(3);
    for (const d of await allDeliveries(h.t, campaign.id)) expect(d).toMatchObject({ status: "sent", attempts: 2, error: null });
  });

  it("gives up on a provider answering 500 forever: deliveries failed, operation and campaign failed", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 2, faults: Array.from({ length: 100 }, () => ({ kind: "status" as const, status: 500, name: "internal_server_error" })) });
    await h.drain();

    expect(resend.calls).toHaveLength(TRIES_PER_STEP * MAX_DELIVERY_ATTEMPTS);
    for (const d of await allDeliveries(h.t, campaign.id)) {
      expect(d).toMatchObject({ status: "failed", attempts: MAX_DELIVERY_ATTEMPTS, error: { code: "resend_internal_server_error" } });
    }
    const final = await operationOf(h.t, op.id);
    expect(final).toMatchObject({ status: "failed", progress: { total: 2, delivered: 0, failed: 2 } });
    expect(final.error.code).toBe("all_deliveries_failed");
    expect(final.completed_at).toMatch(/Z$/);
    const cmp = await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`);
    expect(cmp.body.data).toMatchObject({ status: "failed", sent_at: null });
  });

  it("a recipient rejected in a batch fails alone; the rest of the batch is sent once", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 3, faults: [{ kind: "reject", indexes: [1] }], fields: (i) => ({ email: i === 1 ? "bad@invalid.example" : `ok${i}@example.com` }) });
    await h.drain();

    expect(resend.calls).toHaveLength(1);
    expect(resend.received.map((r) => r.to[0]).sort()).toEqual(["ok0@example.com", "ok2@example.com"]);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.find((d) => d.email === "bad@invalid.example")).toMatchObject({ status: "failed", attempts: 1, error: { code: "resend_rejected" } });
    const byEmail = new Map(resend.received.map((r) => [r.to[0], r.id]));
    for (const d of deliveries.filter((x) => x.email !== "bad@invalid.example")) expect(d.provider_message_id).toBe(byEmail.get(d.email));
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 2, failed: 1 } });
  });

  it.each([
    ["answered at once", []],
    // The second key's requests are taken, and every answer is lost: its retry asks under that key again.
    ["whose answers are lost", everyTry({ kind: "timeout" })],
  ] as [string, Fault[]][])("a strict 4xx naming one message fails that delivery only; the others go as a batch of their own, %s, each mailed once", async (_, then) => {
    const { h, resend, campaign, op } = await resendSend({
      recipients: 3,
      faults: [{ kind: "status", status: 422, name: "validation_error", message: "emails[1].to: Invalid `to` field" }, ...then],
      fields: (i) => ({ email: i === 1 ? "bad@invalid.example" : `ok${i}@example.com` }),
    });
    await h.drain();

    expect(resend.received.map((r) => r.to[0]).sort()).toEqual(["ok0@example.com", "ok2@example.com"]);
    expect([...resend.copiesPerRecipient().values()].every((n) => n === 1)).toBe(true);
    // The rest is a batch of its own, under the key every later read of those rows makes.
    const keys = [...new Set(resend.calls.map((call) => call.key))];
    expect(keys).toHaveLength(2);
    expect(resend.calls.filter((call) => call.key === keys[1]).every((call) => call.messages.length === 2)).toBe(true);
    const bad = (await allDeliveries(h.t, campaign.id)).find((d) => d.email === "bad@invalid.example");
    expect(bad).toMatchObject({ status: "failed", attempts: 1, error: { code: "resend_validation_error" } });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 2, failed: 1 } });
  });

  it("a request Resend refuses for good (a 4xx) fails the deliveries in it with Resend's reason: no other key is tried, nobody is mailed", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 3, faults: [{ kind: "status", status: 422, name: "validation_error", message: "Invalid `from` field" }] });
    await h.drain();

    expect(resend.calls).toHaveLength(1);
    expect(resend.received).toHaveLength(0);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.every((d) => d.status === "failed" && d.attempts === 1 && d.error?.code === "resend_validation_error")).toBe(true);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "failed", progress: { total: 3, delivered: 0, failed: 3 } });
  });
});

describe("crashes and redelivery", () => {
  it("a batch that keeps failing to connect is retried by its message under the same key: nobody twice, nobody lost", async () => {
    const { h, ids, resend, campaign, op } = await resendSend({ recipients: 100, faults: everyTry({ kind: "network" }) });
    await h.drain();

    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(100);
    expect(new Set(deliveries.map((d) => d.subscriber_id))).toEqual(new Set(ids));
    expect(deliveries.every((d) => d.status === "sent" && d.attempts === 2)).toBe(true);
    // One batch of 100: every try within the first message failed, its retry asked under the same key.
    expect(resend.calls).toHaveLength(TRIES_PER_STEP + 1);
    expect(new Set(resend.calls.map((c) => c.key)).size).toBe(1);
    expect([...resend.copiesPerRecipient().values()].every((n) => n === 1)).toBe(true);
    expect(resend.received).toHaveLength(100);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 100, delivered: 100, failed: 0 } });
  });

  it("a consumer that dies after Resend answered and before recording: redelivery asks under the same key, nobody mailed twice", async () => {
    const { db, crashes } = crashingD1("SET status = 'sent'");
    const h = await harness("live", { DB: db });
    await seedSubscribers(h.t.workspace.id, 30);
    const resend = mockResend();
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();

    expect(crashes.left).toBe(0);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(30);
    expect(deliveries.every((d) => d.status === "sent" && d.attempts === 1)).toBe(true);
    expect(resend.calls).toHaveLength(2);
    expect(resend.calls[1]?.key).toBe(resend.calls[0]?.key);
    // Resend answered the repeat from its record: 30 messages, and the ids recorded are the first answer's.
    expect(resend.received).toHaveLength(30);
    const byEmail = new Map(resend.received.map((r) => [r.to[0], r.id]));
    for (const d of deliveries) expect(d.provider_message_id).toBe(byEmail.get(d.email));
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 30, delivered: 30, failed: 0 } });
  });

  it("a request that timed out after Resend accepted it is asked again under its key and sends nothing twice", async () => {
    const { h, resend, op } = await resendSend({ recipients: 5, faults: [{ kind: "timeout" }] });
    await h.drain();

    expect(resend.calls.map((c) => c.status)).toEqual(["timeout", 200]);
    expect(resend.calls[1]?.key).toBe(resend.calls[0]?.key);
    expect(resend.received).toHaveLength(5);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 5, delivered: 5, failed: 0 } });
  });

  it("a batch accepted in a request whose answer was lost, retried after a recipient left: recorded sent (it was), nobody mailed twice", async () => {
    // Every try of the first message times out after Resend accepted the batch (the first try).
    const { h, ids, resend, campaign, op } = await resendSend({ recipients: 5, faults: everyTry({ kind: "timeout" }) });
    await h.step(); // start
    await h.step(); // fan-out
    const first = await h.step(); // the chunk: accepted, but no answer came back
    expect(first.retryMessages).toHaveLength(1);
    // Before the retry, a recipient leaves: the retry's batch differs, and Resend refuses the key with it.
    const gone = ids[1];
    await h.t.call("PATCH", `${h.t.ws}/subscribers/${gone}`, { body: { status: "unsubscribed" } });
    await h.drain();

    expect(resend.calls.at(-1)?.status).toBe(409);
    expect(resend.received).toHaveLength(5);
    expect([...resend.copiesPerRecipient().values()].every((n) => n === 1)).toBe(true);
    const deliveries = await allDeliveries(h.t, campaign.id);
    // The accepted batch had all five, the one who left since included.
    expect(deliveries.every((d) => d.status === "sent" && d.provider_message_id === null)).toBe(true);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 5, delivered: 5, failed: 0 } });
    // Every message carried its delivery's tag, so the provider's feedback can still find each one.
    const tags = new Map(resend.received.map((m) => [m.to[0], m.tags]));
    for (const d of deliveries) expect(tags.get(d.email)).toEqual([{ name: "delivery_id", value: d.id }]);
  });

  it("the sweeper's restart of stalled delivery asks each chunk as the fan-out planned it: a batch accepted before a crash is not mailed again", async () => {
    const h = await harness("live");
    // Every 4th subscriber matches: 125 per fan-out window, so chunks of 100 and 25 alternate.
    await seedSubscribers(h.t.workspace.id, 2 * FANOUT_WINDOW, (i) => ({ tags: i % 4 === 0 ? ["b"] : [] }));
    const resend = mockResend();
    const segment = await createSegment(h.t, { tags_any: ["b"] });
    const campaign = await createCampaign(h.t, { segment_id: segment.id });
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    await h.step(); // fan-out: 250 deliveries queued, in chunks of 100, 25, 100, 25
    expect(h.queue.messages.filter((m) => (m.body as { type: string }).type === "deliver")).toHaveLength(4);
    // The first chunk is sent; the second is accepted by Resend, but every answer is lost.
    resend.inject({ kind: "ok" }, ...everyTry({ kind: "timeout" }));
    const [firstChunk, secondChunk] = h.queue.messages.splice(0, 2);
    h.queue.messages = [firstChunk, secondChunk].filter((m) => m !== undefined);
    await h.step();
    // The consumer dies with every message in flight (lost); ten minutes later the sweeper restarts
    // delivery for the whole campaign.
    h.queue.messages = [];
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now() + 11 * 60_000, cron: "* * * * *" }), h.env);
    expect(h.queue.messages.map((m) => m.body)).toEqual([{ type: "deliver", operation_id: op.id, from: null, to: null }]);
    await h.drain();

    expect(resend.received).toHaveLength(250);
    expect([...resend.copiesPerRecipient().values()].every((n) => n === 1)).toBe(true);
    // The second chunk was asked again under its first key (Resend answered from its record).
    const keyed = new Map<string, number>();
    for (const call of resend.calls) if (call.key) keyed.set(call.key, (keyed.get(call.key) ?? 0) + 1);
    expect([...keyed.values()].sort((a, b) => b - a)[0]).toBeGreaterThan(1);
    expect(keyed.size).toBe(4);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 250, delivered: 250, failed: 0 } });
  });

  it("deliveries queued before chunks were recorded (no chunk_end) are read by range: each sent once, none lost", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 250);
    const resend = mockResend();
    const campaign = await createCampaign(h.t, {});
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    await h.step(); // fan-out: 250 deliveries queued
    // As a database migrated in the middle of this send would hold them.
    await env.DB.prepare("UPDATE deliveries SET chunk_end = NULL WHERE campaign_id = ?").bind(campaign.id).run();
    await h.drain();
    expect(resend.received).toHaveLength(250);
    expect([...resend.copiesPerRecipient().values()].every((n) => n === 1)).toBe(true);
    expect(resend.calls.every((call) => call.messages.length <= 100)).toBe(true);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 250, delivered: 250, failed: 0 } });
  });

  it("an answer lost on the way back costs one more request, not a timeout: a second ask under the key answers, the first is abandoned", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 5, faults: [{ kind: "hang" }] });
    await h.drain();

    // The first request was accepted and never answered; the second, under the same key, got its
    // answer, and the first was given up on by the client rather than left to time out.
    expect(resend.calls.map((c) => c.status)).toEqual(["abandoned", 200]);
    expect(resend.calls[1]?.key).toBe(resend.calls[0]?.key);
    expect((resend.calls[1]?.at ?? 0) - (resend.calls[0]?.at ?? 0)).toBeGreaterThanOrEqual(HEDGE_AFTER_MS - 10);
    expect(resend.received).toHaveLength(5);
    const byEmail = new Map(resend.received.map((r) => [r.to[0], r.id]));
    for (const d of await allDeliveries(h.t, campaign.id)) {
      expect(d).toMatchObject({ status: "sent", attempts: 1, provider_message_id: byEmail.get(d.email) });
    }
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 5, delivered: 5, failed: 0 } });
  });

  it("asks a third time when the second ask is lost too", async () => {
    const { h, resend, op } = await resendSend({ recipients: 5, faults: [{ kind: "hang" }, { kind: "hang" }] });
    await h.drain();

    expect(resend.calls.map((c) => c.status)).toEqual(["abandoned", "abandoned", 200]);
    expect(new Set(resend.calls.map((c) => c.key)).size).toBe(1);
    expect(resend.received).toHaveLength(5);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 5, delivered: 5, failed: 0 } });
  });

  it("a slow answer is waited for: Resend's 409 for a key in progress stops further asks", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 5, faults: [{ kind: "slow", ms: HEDGE_AFTER_MS * 2 }] });
    await h.drain();

    // One ask after HEDGE_AFTER_MS met the first still in progress; none followed it, and the first
    // request's own answer settled the batch.
    expect(resend.calls.map((c) => c.status)).toEqual([200, 409]);
    expect(resend.received).toHaveLength(5);
    const byEmail = new Map(resend.received.map((r) => [r.to[0], r.id]));
    for (const d of await allDeliveries(h.t, campaign.id)) {
      expect(d).toMatchObject({ status: "sent", attempts: 1, provider_message_id: byEmail.get(d.email) });
    }
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 5, delivered: 5, failed: 0 } });
  });

  it("a chunk with no provider slot soon enough waits as a fresh message: no request, no attempt spent, no retry of the message", async () => {
    // Every slot is taken for the next minute (other sends of the account).
    const busy = { at: Date.now() + 60_000, waitMs: 60_000, granted: false };
    const pacer = { reserve: async () => busy, pause: async () => undefined, confirm: async (at: number) => Math.max(at, Date.now()), restart: async () => true };
    const h = await harness("live", { RESEND_PACER: { idFromName: () => ({}), get: () => pacer } as unknown as Env["RESEND_PACER"] });
    await seedSubscribers(h.t.workspace.id, 3);
    const resend = mockResend();
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    await h.step(); // fan-out
    const deliver = h.queue.messages[0];
    const result = await h.step(); // the chunk: no slot within MAX_SLOT_WAIT_MS

    expect(result.retryMessages).toEqual([]);
    expect(resend.calls).toEqual([]);
    expect(h.queue.messages).toEqual([{ body: deliver?.body, attempts: 1, delaySeconds: 60 }]);
    for (const d of await allDeliveries(h.t, campaign.id)) expect(d).toMatchObject({ status: "queued", attempts: 0, error: null });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "running", progress: { total: 3, delivered: 0, failed: 0 } });
  });

  it("a fan-out that dies after creating deliveries and before enqueueing them creates none twice and loses none", async () => {
    const h = await harness("live");
    const ids = await seedSubscribers(h.t.workspace.id, 1_200);
    const resend = mockResend();
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start → first fan-out message
    h.queue.failNextSends = 1;
    const crashed = await h.step(); // fan-out: 500 deliveries written (queued), then the enqueue fails
    expect(crashed.retryMessages).toHaveLength(1);
    expect((await operationOf(h.t, op.id)).progress).toEqual({ total: 500, delivered: 0, failed: 0 });
    await h.drain();

    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(1_200);
    expect(new Set(deliveries.map((d) => d.subscriber_id))).toEqual(new Set(ids));
    expect(resend.received).toHaveLength(1_200);
    expect([...resend.copiesPerRecipient().values()].every((n) => n === 1)).toBe(true);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 1_200, delivered: 1_200, failed: 0 } });
  });

  it("a sandbox fan-out window's settled deliveries and its position commit together: a crash leaves neither, the retry creates each once", async () => {
    const { db, crashes } = crashingD1("SET fanout_cursor");
    const h = await harness("test", { DB: db });
    const ids = await seedSubscribers(h.t.workspace.id, 1_200);
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, {});
    await h.step(); // start
    const crashed = await h.step(); // fan-out: the batch with the first window's deliveries and its position dies
    expect(crashes.left).toBe(0);
    expect(crashed.retryMessages).toHaveLength(1);
    expect((await operationOf(h.t, op.id)).progress).toEqual({ total: 0, delivered: 0, failed: 0 });
    expect(await allDeliveries(h.t, campaign.id)).toHaveLength(0);
    await h.drain();

    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(1_200);
    expect(new Set(deliveries.map((d) => d.subscriber_id))).toEqual(new Set(ids));
    expect(deliveries.every((d) => d.status === "sent" && d.attempts === 1 && d.provider_message_id === `sandbox_${d.id}`)).toBe(true);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 1_200, delivered: 1_200, failed: 0 } });
  });

  it("a fan-out message that dies in its third window resumes from the second window's end, counting none twice", async () => {
    const { db, crashes } = crashingD1("SET fanout_cursor", 2);
    const h = await harness("test", { DB: db });
    const audience = FANOUT_WINDOW * FANOUT_WINDOWS_PER_MESSAGE + 500;
    const ids = await seedSubscribers(h.t.workspace.id, audience);
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, {});
    await h.step(); // start
    const crashed = await h.step(); // windows 1 and 2 committed; window 3's batch (rows and position) dies
    expect(crashes.left).toBe(0);
    expect(crashed.retryMessages).toHaveLength(1);
    expect((await operationOf(h.t, op.id)).progress).toEqual({ total: 2 * FANOUT_WINDOW, delivered: 2 * FANOUT_WINDOW, failed: 0 });
    await h.drain();

    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(audience);
    expect(new Set(deliveries.map((d) => d.subscriber_id))).toEqual(new Set(ids));
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: audience, delivered: audience, failed: 0 } });
  });

  // A fan-out message works through FANOUT_WINDOWS_PER_MESSAGE windows, then enqueues the next
  // message. Sandbox enqueues nothing else; resend first enqueues each window's delivery chunks
  // (one sendBatch per window).
  const pastOneMessage = FANOUT_WINDOW * FANOUT_WINDOWS_PER_MESSAGE + 500;
  it.each([
    { integration: "sandbox", mode: "test", sendsBefore: 0 },
    { integration: "resend", mode: "live", sendsBefore: FANOUT_WINDOWS_PER_MESSAGE },
  ] as const)(
    "a $integration fan-out that dies after moving its position and before enqueueing the next message resumes on redelivery",
    async ({ integration, mode, sendsBefore }) => {
      const h = await harness(mode);
      mockResend();
      await seedSubscribers(h.t.workspace.id, pastOneMessage);
      const campaign = await createCampaign(h.t);
      const op = await send(h.t, campaign.id, { integration_slug: integration });
      await h.step(); // start
      h.queue.passSends = sendsBefore;
      h.queue.failNextSends = 1;
      const crashed = await h.step();
      expect(crashed.retryMessages).toHaveLength(1);
      expect((await operationOf(h.t, op.id)).progress.total).toBe(FANOUT_WINDOW * FANOUT_WINDOWS_PER_MESSAGE);
      await h.drain();
      const deliveries = await allDeliveries(h.t, campaign.id);
      expect(deliveries).toHaveLength(pastOneMessage);
      expect(new Set(deliveries.map((d) => d.subscriber_id)).size).toBe(pastOneMessage);
      expect(await operationOf(h.t, op.id)).toMatchObject({
        status: "succeeded",
        progress: { total: pastOneMessage, delivered: pastOneMessage },
      });
    },
  );

  it.each([
    { integration: "sandbox", mode: "test" },
    { integration: "resend", mode: "live" },
  ] as const)("duplicate messages never create or count a $integration delivery twice", async ({ integration, mode }) => {
    const h = await harness(mode);
    const resend = mockResend();
    await seedSubscribers(h.t.workspace.id, 40);
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: integration });
    // Every message delivered twice, as at-least-once delivery allows.
    for (let i = 0; i < 20 && h.queue.messages.length > 0; i++) {
      h.queue.messages = h.queue.messages.flatMap((m) => [m, { ...m }]);
      await h.step();
    }
    await h.drain();
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(40);
    expect(new Set(deliveries.map((d) => d.subscriber_id)).size).toBe(40);
    // Resend may be asked twice for one batch, always under the batch's key: each recipient gets one copy.
    if (integration === "resend") {
      expect(resend.received).toHaveLength(40);
      expect(new Set(resend.calls.map((c) => c.key)).size).toBe(1);
    }
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 40, delivered: 40, failed: 0 } });
  });
});

describe("the audience", () => {
  it("is evaluated when the send starts: a subscriber created during the fan-out is not in it", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 3);
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "sandbox" });
    await h.step(); // start
    await new Promise((r) => setTimeout(r, 5));
    const late = await h.t.call("POST", `${h.t.ws}/subscribers`, { body: { email: "late@example.com" } });
    expect(late.status).toBe(201);
    await h.drain();
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.map((d) => d.email).sort()).toEqual(["user0@example.com", "user1@example.com", "user2@example.com"]);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3 } });
  });
});

describe("a message that cannot be rendered for its subscriber", () => {
  for (const integration of ["resend", "sandbox"] as const) {
    it(`fails that delivery alone with render_failed and 0 attempts, never reaching the integration (${integration})`, async () => {
      const h = await harness("live");
      const resend = mockResend();
      await seedSubscribers(h.t.workspace.id, 3);
      // A name that takes the subject past 998 characters; the sample subscriber's does not.
      const long = await h.t.call("POST", `${h.t.ws}/subscribers`, { body: { email: "long@example.com", name: "L".repeat(200) } });
      expect(long.status, long.text).toBe(201);
      const campaign = await createCampaign(h.t, { subject: "{{ subscriber.name }}".repeat(5) });
      const op = await send(h.t, campaign.id, { integration_slug: integration });
      await h.drain();
      const deliveries = await allDeliveries(h.t, campaign.id);
      const failed = deliveries.find((d) => d.subscriber_id === long.body.data.id);
      expect(failed).toMatchObject({ status: "failed", attempts: 0, provider_message_id: null, error: { code: "render_failed" } });
      expect(deliveries.filter((d) => d.status === "sent")).toHaveLength(3);
      if (integration === "resend") expect(resend.received.map((r) => r.to[0])).not.toContain("long@example.com");
      expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 4, delivered: 3, failed: 1 } });
    });
  }
});

describe("a campaign saved under earlier checks that today's refuse", () => {
  it("previews as a 400 naming the field, and sends as undeliverable messages (render_failed), never a failing step", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 3);
    const resend = mockResend();
    const campaign = await createCampaign(h.t);
    // Written as an older version of the service accepted it (a value inside <script>).
    await env.DB.prepare("UPDATE campaigns SET html = ? WHERE id = ?").bind('<p>Hi</p><script>var n = "{{ subscriber.name }}";</script>', campaign.id).run();
    const preview = await h.t.call("POST", `${h.t.ws}/campaigns/${campaign.id}/preview`);
    expectError(preview, 400, "validation_failed", "html");
    expect(preview.body.error.message).toContain("inside <script>");
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();
    expect(resend.calls).toEqual([]);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(3);
    for (const d of deliveries) expect(d).toMatchObject({ status: "failed", attempts: 0, error: { code: "render_failed", message: expect.stringContaining("inside <script>") } });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "failed", progress: { total: 3, delivered: 0, failed: 3 } });
  });
});

describe("consent at delivery time", () => {
  it("never mails a subscriber who unsubscribed after the fan-out picked them", async () => {
    const { h, ids, resend, campaign, op } = await resendSend({ recipients: 5 });
    await h.step(); // start
    await h.step(); // fan-out: five deliveries queued
    const gone = ids[2];
    const patched = await h.t.call("PATCH", `${h.t.ws}/subscribers/${gone}`, { body: { status: "unsubscribed" } });
    expect(patched.status, patched.text).toBe(200);
    await h.drain();

    const sentTo = resend.received.map((r) => r.to[0]);
    expect(sentTo).toHaveLength(4);
    expect(sentTo).not.toContain("user2@example.com");
    const skipped = (await allDeliveries(h.t, campaign.id)).find((d) => d.subscriber_id === gone);
    expect(skipped).toMatchObject({ status: "failed", attempts: 0, provider_message_id: null, error: { code: "recipient_inactive" } });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 5, delivered: 4, failed: 1 } });
  });

  it("one left out of a request that Resend took, who comes back before the retry, is mailed in a batch of their own, never recorded sent unmailed", async () => {
    const { h, ids, resend, campaign, op } = await resendSend({ recipients: 3 });
    await h.step(); // start
    await h.step(); // fan-out: three deliveries queued
    const [away] = ids;
    await setStatus(h.t, away, "unsubscribed");
    // Resend takes the request (the two others), and every answer is lost.
    resend.inject(...everyTry({ kind: "timeout" }));
    await h.step();
    expect(resend.received.map((m) => m.to[0]).sort()).toEqual(["user1@example.com", "user2@example.com"]);
    // The step's record is lost too (a crash before it was written): only what left before the request stays.
    await env.DB.prepare("UPDATE deliveries SET attempts = 0, error = NULL WHERE campaign_id = ?").bind(campaign.id).run();
    await setStatus(h.t, away, "active");
    await h.drain();

    // The retry asked under the batch's key with the same two (answered from Resend's record); the
    // one who came back went in a request of their own, under another key.
    expect(resend.calls.some((call) => call.status === 409)).toBe(false);
    expect([...resend.copiesPerRecipient().entries()].sort()).toEqual([
      ["user0@example.com", 1],
      ["user1@example.com", 1],
      ["user2@example.com", 1],
    ]);
    const mailed = resend.calls.filter((call) => call.status === 200 || call.status === "timeout");
    expect(new Set(mailed.map((call) => call.key)).size).toBe(2);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.every((d) => d.status === "sent")).toBe(true);
    expect(deliveries.find((d) => d.subscriber_id === away)?.provider_message_id).toMatch(/^re_/);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 3, failed: 0 } });
  });

  it("one in a refused request, left out of the next (which Resend took), who comes back, is never added back under the key: mailed in a batch of their own", async () => {
    const { h, ids, resend, campaign, op } = await resendSend({ recipients: 3 });
    const [away] = ids;
    await h.step(); // start
    await h.step(); // fan-out
    // Every try of the first step is refused (500): nobody is mailed.
    resend.inject(...everyTry({ kind: "status", status: 500, name: "internal_server_error" }));
    await h.step();
    expect(resend.received).toHaveLength(0);
    // The first leaves; the next step's request (the two others) is taken, and its answers are lost.
    await setStatus(h.t, away, "unsubscribed");
    resend.inject(...everyTry({ kind: "timeout" }));
    await h.step();
    expect(resend.received.map((m) => m.to[0]).sort()).toEqual(["user1@example.com", "user2@example.com"]);
    // They come back before the batch is asked again.
    await setStatus(h.t, away, "active");
    await h.drain();

    expect(resend.calls.some((call) => call.status === 409)).toBe(false);
    expect([...resend.copiesPerRecipient().entries()].sort()).toEqual([
      ["user0@example.com", 1],
      ["user1@example.com", 1],
      ["user2@example.com", 1],
    ]);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.find((d) => d.subscriber_id === away)).toMatchObject({ status: "sent", provider_message_id: expect.stringMatching(/^re_/) });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 3, failed: 0 } });
  });

  it.each([
    // Which request Resend took is not known here any more (the first, with them).
    ["comes back", "active"],
    // Their leaving says nothing of the request they were in: not "recipient_inactive, nothing was sent".
    ["stays away", "unsubscribed"],
  ])("one left out of a later request than one Resend may have taken, who %s, is never sent again: failed outcome_unknown, no second copy", async (_, status) => {
    const { h, ids, resend, campaign, op } = await resendSend({ recipients: 3 });
    const [away] = ids;
    await h.step(); // start
    await h.step(); // fan-out
    // The first step's request (all three) is taken; its answers are lost.
    resend.inject(...everyTry({ kind: "timeout" }));
    await h.step();
    // The first leaves: the next request (the two others) is refused.
    await setStatus(h.t, away, "unsubscribed");
    resend.inject(...everyTry({ kind: "status", status: 500, name: "internal_server_error" }));
    await h.step();
    await setStatus(h.t, away, status);
    await h.drain();

    expect(resend.calls.at(-1)?.status).toBe(409);
    expect([...resend.copiesPerRecipient().values()].every((n) => n === 1)).toBe(true);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.find((d) => d.subscriber_id === away)).toMatchObject({ status: "failed", error: { code: "outcome_unknown" } });
    expect(deliveries.filter((d) => d.subscriber_id !== away).every((d) => d.status === "sent")).toBe(true);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 2, failed: 1 } });
  });

  it("one in earlier steps' refused requests only, left out of two requests of a later step, is never recorded sent: outcome_unknown; one left out of the last alone was mailed", async () => {
    let reserves = 0;
    let onReserve: (n: number) => Promise<void> = async () => {};
    const pacer = {
      reserve: async () => {
        await onReserve(++reserves);
        return { at: Date.now(), waitMs: 0, granted: true };
      },
      pause: async () => undefined,
      confirm: async (at: number) => Math.max(at, Date.now()),
      restart: async () => true,
    };
    const h = await harness("live", { RESEND_PACER: { idFromName: () => ({}), get: () => pacer } as unknown as Env["RESEND_PACER"] });
    const [a = "", x = "", z = "", b = ""] = await seedSubscribers(h.t.workspace.id, 4);
    const resend = mockResend();
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    await h.step(); // fan-out
    // Step 1: every request (all four) is refused: nobody is mailed.
    resend.inject(...everyTry({ kind: "status", status: 500, name: "internal_server_error" }));
    await h.step();
    expect(resend.received).toHaveLength(0);
    // x leaves. Step 2: the request without x is taken (its answer lost); z leaves before the next
    // request, which Resend refuses as the key's other content.
    await setStatus(h.t, x, "unsubscribed");
    const before = reserves;
    onReserve = async (n) => {
      if (n === before + 2) await setStatus(h.t, z, "unsubscribed");
    };
    resend.inject({ kind: "timeout" });
    await h.drain();

    expect(resend.calls.slice(-2).map((call) => call.status)).toEqual(["timeout", 409]);
    expect(resend.received.map((m) => m.to[0]).sort()).toEqual(["user0@example.com", "user2@example.com", "user3@example.com"]);
    const deliveries = new Map((await allDeliveries(h.t, campaign.id)).map((d) => [d.subscriber_id, d]));
    expect(deliveries.get(a)?.status).toBe("sent");
    expect(deliveries.get(b)?.status).toBe("sent");
    // z was in the request taken (left out of the last alone): mailed, recorded sent.
    expect(deliveries.get(z)?.status).toBe("sent");
    // x was never mailed; which request Resend took is unknown here, so it is never sent again.
    expect(deliveries.get(x)).toMatchObject({ status: "failed", error: { code: "outcome_unknown" } });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 4, delivered: 3, failed: 1 } });
  });

  it("never mails one who leaves, or changes address, while the batch waits for its provider slot (looked at again right before the request)", async () => {
    // A pacer that hands out a slot 400 ms away: the chunk is read and rendered, then waits.
    const pacer = {
      reserve: async () => ({ at: Date.now() + 400, waitMs: 400, granted: true }),
      pause: async () => undefined,
      confirm: async (at: number) => Math.max(at, Date.now()),
      restart: async () => true,
    };
    const h = await harness("live", { RESEND_PACER: { idFromName: () => ({}), get: () => pacer } as unknown as Env["RESEND_PACER"] });
    const ids = await seedSubscribers(h.t.workspace.id, 5);
    const resend = mockResend();
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    await h.step(); // fan-out: five deliveries queued
    const delivering = h.step();
    await new Promise((r) => setTimeout(r, 150));
    expect(resend.calls).toHaveLength(0);
    const [left, moved] = [ids[1], ids[3]];
    expect((await h.t.call("PATCH", `${h.t.ws}/subscribers/${left}`, { body: { status: "unsubscribed" } })).status).toBe(200);
    expect((await h.t.call("PATCH", `${h.t.ws}/subscribers/${moved}`, { body: { email: "moved@example.com" } })).status).toBe(200);
    await delivering;
    await h.drain();

    expect(resend.received.map((r) => r.to[0]).sort()).toEqual(["user0@example.com", "user2@example.com", "user4@example.com"]);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.find((d) => d.subscriber_id === left)).toMatchObject({ status: "failed", attempts: 0, error: { code: "recipient_inactive" } });
    expect(deliveries.find((d) => d.subscriber_id === moved)).toMatchObject({ status: "failed", attempts: 0, email: "user3@example.com", error: { code: "recipient_changed" } });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 5, delivered: 3, failed: 2 } });
  });

  it("looks again before every request of a batch: one who leaves while a failed request waits for its retry is left out of the retry, with no attempt counted", async () => {
    let slots = 0;
    const pacer = {
      reserve: async () => ({ at: Date.now() + (++slots === 1 ? 60 : 400), waitMs: 400, granted: true }),
      pause: async () => undefined,
      confirm: async (at: number) => Math.max(at, Date.now()),
      restart: async () => true,
    };
    const h = await harness("live", { RESEND_PACER: { idFromName: () => ({}), get: () => pacer } as unknown as Env["RESEND_PACER"] });
    const ids = await seedSubscribers(h.t.workspace.id, 4);
    const resend = mockResend();
    resend.inject({ kind: "status", status: 500, name: "internal_server_error" });
    const campaign = await createCampaign(h.t);
    await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    await h.step(); // fan-out
    const delivering = h.step();
    // The first request (all four) answers 500; its retry waits for a slot 400 ms away.
    await vi.waitFor(() => expect(resend.calls).toHaveLength(1), { timeout: 2_000, interval: 10 });
    expect((await h.t.call("PATCH", `${h.t.ws}/subscribers/${ids[2]}`, { body: { status: "unsubscribed" } })).status).toBe(200);
    await delivering;
    await h.drain();
    expect(resend.calls.map((c) => c.messages.length)).toEqual([4, 3]);
    expect(resend.received.map((r) => r.to[0]).sort()).toEqual(["user0@example.com", "user1@example.com", "user3@example.com"]);
    // It was in the first request, which Resend refused: it was never mailed, and is recorded so.
    const left = (await allDeliveries(h.t, campaign.id)).find((d) => d.subscriber_id === ids[2]);
    expect(left).toMatchObject({ status: "failed", error: { code: "recipient_inactive" } });
  });

  it("never mails an old address: a subscriber whose email changed after the fan-out fails recipient_changed (a change of case is no change)", async () => {
    const { h, ids, resend, campaign } = await resendSend({ recipients: 3 });
    await h.step(); // start
    await h.step(); // fan-out
    await h.t.call("PATCH", `${h.t.ws}/subscribers/${ids[0]}`, { body: { email: "new0@example.com" } });
    await h.t.call("PATCH", `${h.t.ws}/subscribers/${ids[1]}`, { body: { email: "USER1@example.com" } });
    await h.drain();
    expect(resend.received.map((r) => r.to[0]).sort()).toEqual(["user1@example.com", "user2@example.com"]);
    const changed = (await allDeliveries(h.t, campaign.id)).find((d) => d.subscriber_id === ids[0]);
    expect(changed).toMatchObject({ status: "failed", attempts: 0, provider_message_id: null, error: { code: "recipient_changed" } });
  });
});

describe("queue edges", () => {
  it("acks messages that are malformed or name an operation that no longer exists", async () => {
    const h = await harness("test");
    h.queue.messages.push(
      { body: { type: "start", operation_id: "op_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }, attempts: 1 },
      { body: { type: "deliver", operation_id: "op_01JD6Q3Z6W9X8B4N2M5K7P1R3T", from: null, to: null }, attempts: 1 },
      { body: { type: "nonsense" }, attempts: 1 },
      { body: "not even an object", attempts: 1 },
    );
    const result = await h.step();
    expect(result.explicitAcks).toHaveLength(4);
    expect(result.retryMessages).toEqual([]);
  });

  it("a dead-lettered message ends its operation and campaign failed, never running forever", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 5);
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, {});
    await h.step(); // start: running
    const [dead] = h.queue.messages.splice(0, 1);
    h.queue.messages.push({ body: dead?.body, attempts: 11 });
    const result = await h.step("newsletter-send-dlq");
    expect(result.explicitAcks).toHaveLength(1);

    const final = await operationOf(h.t, op.id);
    expect(final.status).toBe("failed");
    expect(final.error.code).toBe("send_step_exhausted");
    expect(final.completed_at).not.toBeNull();
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("failed");
  });

  it("a send dead-lettered mid-delivery leaves no delivery queued: one in a request Resend may have taken ends outcome_unknown, one never asked send_step_exhausted", async () => {
    const { h, campaign, op, resend } = await resendSend({ recipients: 150 });
    await h.step(); // start
    await h.step(); // fan-out: chunks of 100 and 50
    const [firstChunk, secondChunk] = h.queue.messages.splice(0, 2);
    h.queue.messages = firstChunk ? [firstChunk] : [];
    // The first chunk's requests time out (Resend may have taken one); the second is never handled.
    resend.inject(...everyTry({ kind: "timeout" }));
    await h.step();
    const [retried] = h.queue.messages.splice(0, 1);
    expect(secondChunk).toBeDefined();
    h.queue.messages.push({ body: retried?.body, attempts: 11 });
    await h.step("newsletter-send-dlq");

    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.filter((d) => d.status === "queued")).toEqual([]);
    const codes = new Map<string, number>();
    for (const d of deliveries) codes.set(String(d.error?.code), (codes.get(String(d.error?.code)) ?? 0) + 1);
    expect(Object.fromEntries(codes)).toEqual({ outcome_unknown: 100, send_step_exhausted: 50 });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "failed", progress: { total: 150, delivered: 0, failed: 150 } });
    const stats = (await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}/stats`)).body.data;
    expect(stats).toMatchObject({ queued: 0, failed: 150 });
  });

  it("retries a step that throws, with exponential backoff", async () => {
    const h = await harness("test");
    const campaign = await createCampaign(h.t);
    await send(h.t, campaign.id, {});
    h.queue.failNextSends = 1;
    const first = await h.step(); // start cannot enqueue its fan-out
    expect(first.retryMessages).toEqual([{ msgId: expect.any(String), delaySeconds: 2 }]);
    h.queue.failNextSends = 1;
    const second = await h.step();
    expect(second.retryMessages[0]?.delaySeconds).toBe(4);
    await h.drain();
  });
});

describe("scheduling and the sweeper", () => {
  it("a send only waiting for a provider slot is not taken for a stalled one: the sweeper adds no second delivery chain", async () => {
    // A pacer with no slot in reach, as under a long backlog of other sends.
    const far = { at: Date.now() + 60_000, waitMs: 60_000, granted: false };
    const pacer = { reserve: async () => far, pause: async () => {}, confirm: async (at: number) => Math.max(at, Date.now()), restart: async () => true };
    const namespace = { idFromName: () => ({}), get: () => pacer } as unknown as Env["RESEND_PACER"];
    const h = await harness("live", { RESEND_PACER: namespace });
    await seedSubscribers(h.t.workspace.id, 3);
    const resend = mockResend();
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    await h.step(); // fan-out
    await h.step(); // delivery: no slot, asked for again in a minute
    expect(resend.calls).toEqual([]);
    expect(h.queue.messages.map((m) => [m.body, m.delaySeconds])).toEqual([[{ type: "deliver", operation_id: op.id, from: null, to: null }, 60]]);
    // Its last change was long ago; its last wait just now.
    await env.DB.prepare("UPDATE operations SET updated_at = ?2 WHERE id = ?1").bind(op.id, Date.now() - 11 * 60_000).run();
    const sweep = () => worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), h.env);
    await sweep();
    expect(h.queue.messages).toHaveLength(1);
    // Without a wait on record for ten minutes, it is stalled, and the sweeper restarts its delivery.
    await env.DB.prepare("UPDATE operations SET heartbeat_at = ?2 WHERE id = ?1").bind(op.id, Date.now() - 11 * 60_000).run();
    await sweep();
    expect(h.queue.messages.map((m) => m.body)).toContainEqual({ type: "deliver", operation_id: op.id, from: null, to: null });
    expect(h.queue.messages).toHaveLength(2);
  });

  it("unscheduling cancels a scheduled send before it starts: the campaign is a draft again, its send failed send_unscheduled, its start does nothing", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 3);
    const campaign = await createCampaign(h.t, { scheduled_at: new Date(Date.now() + 3600_000).toISOString() });
    const op = await send(h.t, campaign.id, {});
    expect(h.queue.messages.map((m) => m.body)).toEqual([{ type: "start", operation_id: op.id }]);
    const path = `${h.t.ws}/campaigns/${campaign.id}/unschedule`;

    const res = await h.t.call("POST", path, { headers: { "idempotency-key": "unschedule-0001" } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ id: campaign.id, status: "draft", scheduled_at: null });
    expect(await operationOf(h.t, op.id)).toMatchObject({
      status: "failed",
      error: { code: "send_unscheduled", message: expect.any(String) },
      completed_at: expect.stringMatching(/Z$/),
    });
    // A retry with the key replays; without it, the draft is no longer scheduled.
    const replay = await h.t.call("POST", path, { headers: { "idempotency-key": "unschedule-0001" } });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(res.body);
    expectError(await h.t.call("POST", path), 409, "campaign_not_scheduled");
    expectError(await h.t.call("POST", path, { body: { now: true } }), 400, "validation_failed");
    expectError(await h.t.call("POST", `${h.t.ws}/campaigns/cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T/unschedule`), 404, "not_found");

    // The start message, when it comes, finds nothing to start.
    await h.drain();
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "failed", progress: { total: 0 } });
    expect(await allDeliveries(h.t, campaign.id)).toEqual([]);
    // The draft can be sent again: now, since it has no time any more.
    const again = await send(h.t, campaign.id, {});
    await h.drain();
    expect(await operationOf(h.t, again.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 3 } });
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("sent");
    expectError(await h.t.call("POST", path), 409, "campaign_not_scheduled");
  });

  it("a scheduled send that has started cannot be unscheduled", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 2);
    const soon = await createCampaign(h.t, { scheduled_at: new Date(Date.now() + 3600_000).toISOString() });
    const op = await send(h.t, soon.id, {});
    // Its time comes and its start message is delivered: the start commits first, and wins.
    await env.DB.prepare("UPDATE operations SET start_at = ?2 WHERE id = ?1").bind(op.id, Date.now() - 1_000).run();
    await h.step();
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${soon.id}`)).body.data.status).toBe("sending");
    expectError(await h.t.call("POST", `${h.t.ws}/campaigns/${soon.id}/unschedule`), 409, "campaign_not_scheduled");
    await h.drain();
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded" });
  });

  it("a send scheduled beyond the queue's 12 h delay is started by the cron sweep when it is due", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 3);
    const startAt = Date.now() + 13 * 3600_000;
    const campaign = await createCampaign(h.t, { scheduled_at: new Date(startAt).toISOString() });
    const op = await send(h.t, campaign.id, {});
    expect(h.queue.messages).toEqual([]);
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("scheduled");

    const sweepAt = async (time: number) => {
      const ctx = createExecutionContext();
      await worker.scheduled(createScheduledController({ scheduledTime: time, cron: "* * * * *" }), h.env);
    };
    await sweepAt(Date.now());
    expect(h.queue.messages).toEqual([]);
    await sweepAt(startAt - 30_000);
    expect(h.queue.messages).toEqual([{ body: { type: "start", operation_id: op.id }, attempts: 1, delaySeconds: 30 }]);
  });

  it("a scheduled send moved earlier gets a start timed for its new time; moved later, its start sleeps again", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 2);
    const campaign = await createCampaign(h.t, { scheduled_at: new Date(Date.now() + 3600_000).toISOString() });
    const op = await send(h.t, campaign.id, {});
    expect(h.queue.messages.map((m) => m.delaySeconds)).toEqual([3600]);
    h.queue.messages = [];
    const patch = (scheduledAt: string | null) => h.t.call("PATCH", `${h.t.ws}/campaigns/${campaign.id}`, { body: { scheduled_at: scheduledAt } });

    const later = await patch(new Date(Date.now() + 7200_000).toISOString());
    expect(later.status, later.text).toBe(200);
    // No new message: the one queued, arriving first, goes back to sleep until the new time.
    expect(h.queue.messages).toEqual([]);
    const soon = await patch(new Date(Date.now() + 5_000).toISOString());
    expect(soon.status, soon.text).toBe(200);
    expect(h.queue.messages).toEqual([{ body: { type: "start", operation_id: op.id }, attempts: 1, delaySeconds: 5 }]);
    const row = await h.env.DB.prepare("SELECT start_at FROM operations WHERE id = ?").bind(op.id).first<{ start_at: number }>();
    expect(row?.start_at).toBe(Date.parse(soon.body.data.scheduled_at));
  });

  it("a scheduled campaign's scheduled_at cannot be cleared (409, nothing changes); a draft's can", async () => {
    const h = await harness("test");
    const at = new Date(Date.now() + 3600_000).toISOString();
    const campaign = await createCampaign(h.t, { subject: "Later", scheduled_at: at });
    const draft = await h.t.call("PATCH", `${h.t.ws}/campaigns/${campaign.id}`, { body: { scheduled_at: null } });
    expect(draft.body.data).toMatchObject({ status: "draft", scheduled_at: null });
    await h.t.call("PATCH", `${h.t.ws}/campaigns/${campaign.id}`, { body: { scheduled_at: at } });
    const op = await send(h.t, campaign.id, {});
    h.queue.messages = [];
    const cleared = await h.t.call("PATCH", `${h.t.ws}/campaigns/${campaign.id}`, { body: { subject: "Now", scheduled_at: null } });
    expectError(cleared, 409, "campaign_not_editable", "scheduled_at");
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`)).body.data).toMatchObject({ status: "scheduled", scheduled_at: at, subject: "Later" });
    const row = await h.env.DB.prepare("SELECT status, start_at FROM operations WHERE id = ?").bind(op.id).first();
    expect(row).toEqual({ status: "queued", start_at: Date.parse(at) });
    expect(h.queue.messages).toEqual([]);
  });

  it("a start that arrives before its time goes back to sleep instead of starting early", async () => {
    const h = await harness("test");
    const startAt = Date.now() + 13 * 3600_000;
    const campaign = await createCampaign(h.t, { scheduled_at: new Date(startAt).toISOString() });
    const op = await send(h.t, campaign.id, {});
    h.queue.messages.push({ body: { type: "start", operation_id: op.id }, attempts: 1 });
    await h.step();
    expect(h.queue.messages).toEqual([{ body: { type: "start", operation_id: op.id }, attempts: 1, delaySeconds: 12 * 3600 }]);
    expect((await operationOf(h.t, op.id)).status).toBe("queued");
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("scheduled");
  });

  it("re-enqueues a fan-out or delivery whose message was lost, once it has made no progress for a while", async () => {
    const h = await harness("live");
    mockResend();
    await seedSubscribers(h.t.workspace.id, 10);
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    h.queue.messages = []; // the fan-out message is lost
    const sweepAt = (time: number) =>
      worker.scheduled(createScheduledController({ scheduledTime: time, cron: "* * * * *" }), h.env);
    await sweepAt(Date.now() + 30_000);
    expect(h.queue.messages).toEqual([]); // not stalled yet
    await sweepAt(Date.now() + 3 * 60_000);
    expect(h.queue.messages.map((m) => m.body)).toEqual([{ type: "fanout", operation_id: op.id, after: null }]);
    await h.step(); // fan-out: deliveries created (queued), fan-out done
    h.queue.messages = []; // the delivery message is lost
    expect((await operationOf(h.t, op.id)).status).toBe("running");
    await sweepAt(Date.now() + 3 * 60_000);
    expect(h.queue.messages).toEqual([]); // deliveries may still be retrying: wait longer
    await sweepAt(Date.now() + 11 * 60_000);
    expect(h.queue.messages.map((m) => m.body)).toEqual([{ type: "deliver", operation_id: op.id, from: null, to: null }]);
    await h.drain();
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 10, delivered: 10 } });
  });

  it("a send whose enqueue failed is still answered 202, and the sweeper starts it", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 3);
    const campaign = await createCampaign(h.t);
    h.queue.failNextSends = 1;
    const op = await send(h.t, campaign.id, {});
    expect(h.queue.messages).toEqual([]);
    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now() + 2 * 60_000 }), h.env);
    expect(h.queue.messages.map((m) => m.body)).toEqual([{ type: "start", operation_id: op.id }]);
    await h.drain();
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 3 } });
  });
});
