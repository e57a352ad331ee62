import { createExecutionContext, createMessageBatch, createScheduledController, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../src/app";
import worker from "../src/index";
import { FANOUT_WINDOW, FANOUT_WINDOWS_PER_MESSAGE, MAX_DELIVERY_ATTEMPTS } from "../src/sending/pipeline";
import { createCredential, createWorkspace, seedSubscribers, type CallOptions } from "./helpers";
import { allDeliveries, CapturedQueue, createCampaign, type Tenant } from "./send.fixtures";

// These tests drive the queue handler themselves, message by message, so faults can be injected
// between the steps: the app and the consumer get an env whose SEND_QUEUE keeps what is sent.

const app = createApp();

const harness = async (mode: "test" | "live" = "live", overrides: Partial<Env> = {}) => {
  const queue = new CapturedQueue();
  const testEnv = { ...env, RESEND_API_KEY: "re_test_key", SEND_QUEUE: queue.asBinding(), ...overrides } as Env;
  const workspace = await createWorkspace();
  const credential = await createCredential([workspace.id], { mode });
  const call = async (method: string, path: string, options: Omit<CallOptions, "token"> = {}) => {
    const headers = new Headers(options.headers);
    headers.set("authorization", `Bearer ${credential.token}`);
    if (options.body !== undefined) headers.set("content-type", "application/json");
    const res = await app.fetch(
      new Request(`https://api.example.test${path}`, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
      }),
      testEnv,
      createExecutionContext(),
    );
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text };
  };
  const t: Tenant = { workspace, credential, token: credential.token, ws: `/v1/workspaces/${workspace.id}`, call };

  let nextId = 0;
  /** Hands up to 10 captured messages to the consumer; retried ones go back with attempts + 1. */
  const step = async (queueName = "newsletter-send") => {
    const taken = queue.messages.splice(0, 10);
    const batch = createMessageBatch(
      queueName,
      taken.map((m) => ({ id: `msg-${nextId++}`, timestamp: Date.now(), attempts: m.attempts, body: m.body })),
    );
    // getQueueResult does not report retry delays: read them off the calls.
    const retrySpies = batch.messages.map((message) => vi.spyOn(message, "retry"));
    const ctx = createExecutionContext();
    await worker.queue(batch, testEnv);
    const result = await getQueueResult(batch, ctx);
    const retryMessages: { msgId: string; delaySeconds?: number }[] = [];
    batch.messages.forEach((message, i) => {
      const retried = result.retryMessages.some((r) => r.msgId === message.id);
      if (retried) {
        const delaySeconds = retrySpies[i]?.mock.calls[0]?.[0]?.delaySeconds;
        retryMessages.push({ msgId: message.id, delaySeconds });
        queue.messages.push({ body: message.body, attempts: (taken[i]?.attempts ?? 1) + 1, delaySeconds });
      } else expect(result.explicitAcks).toContain(message.id);
    });
    return { ...result, retryMessages };
  };
  const drain = async (maxSteps = 200) => {
    for (let i = 0; i < maxSteps && queue.messages.length > 0; i++) await step();
    expect(queue.messages).toEqual([]);
  };
  return { t, queue, env: testEnv, step, drain };
};

const operationOf = async (t: Tenant, id: string) => (await t.call("GET", `${t.ws}/operations/${id}`)).body.data;

const send = async (t: Tenant, campaignId: string, body: Record<string, unknown>) => {
  const res = await t.call("POST", `${t.ws}/campaigns/${campaignId}/send`, { body });
  expect(res.status, res.text).toBe(202);
  return res.body.data as { id: string };
};

const resendCalls = (spy: { mock: { calls: unknown[][] } }) =>
  spy.mock.calls.map(([input, init]) => {
    const headers = new Headers((init as RequestInit).headers);
    return {
      url: String(input),
      key: headers.get("idempotency-key"),
      auth: headers.get("authorization"),
      body: JSON.parse(String((init as RequestInit).body)) as { to: string[]; from: string; subject: string },
    };
  });

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });

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

/** Resend answering every request with success, its message id derived from the idempotency key. */
const resendAlwaysOk = () =>
  vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) =>
    json(200, { id: `re_${new Headers(init?.headers).get("idempotency-key")}` }),
  );

afterEach(() => {
  vi.restoreAllMocks();
});

describe("delivery through Resend (live credential, mocked provider)", () => {
  it("sends every subscriber exactly the message its preview shows (one rendering path)", async () => {
    const h = await harness("live");
    const [first, second] = await seedSubscribers(h.t.workspace.id, 2);
    await env.DB.prepare("UPDATE subscribers SET name = '<i>Ann</i>', tags = '[\"vip\"]', location = 'Oslo' WHERE id = ?").bind(first).run();
    const fetchSpy = resendAlwaysOk();
    const campaign = await createCampaign(h.t, {
      subject: "{{ subscriber.name | default: 'Friend' }}, your notes",
      preheader: "From {{ subscriber.location | default: 'anywhere' }}",
      html: '<html><body><p>Hi {{ subscriber.name }}</p>{% for t in subscriber.tags %}<b>{{ t | upcase }}</b>{% endfor %}<a href="https://example.com">Read</a></body></html>',
    });
    await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();

    const received = fetchSpy.mock.calls.map(([, init]) => JSON.parse(String((init as RequestInit).body)) as Record<string, unknown>);
    expect(received).toHaveLength(2);
    for (const id of [first, second]) {
      const preview = await h.t.call("POST", `${h.t.ws}/campaigns/${campaign.id}/preview`, { body: { subscriber_id: id } });
      expect(preview.status, preview.text).toBe(200);
      const p = preview.body.data;
      const got = received.find((r) => (r.to as string[])[0] === p.to);
      expect(got).toEqual({ from: p.from, to: [p.to], subject: p.subject, html: p.html, text: p.text, headers: p.headers });
    }
    const ann = received.find((r) => r.subject === "<i>Ann</i>, your notes");
    expect(ann?.html).toContain("<p>Hi &lt;i&gt;Ann&lt;/i&gt;</p><b>VIP</b>");
    expect(ann?.html).toContain(">From Oslo</div>");
    expect(received.find((r) => r.subject === "Friend, your notes")?.text).toContain("Read <https://example.com>");
  });

  it("sends each recipient once over HTTPS with the delivery id as the idempotency key", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 3);
    const fetchSpy = vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) => {
      const key = new Headers(init?.headers).get("idempotency-key");
      return json(200, { id: `re_${key}` });
    });
    const campaign = await createCampaign(h.t, { subject: "Launch", preheader: "It is out" });
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();

    const calls = resendCalls(fetchSpy);
    expect(calls).toHaveLength(3);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(new Set(calls.map((c) => c.key))).toEqual(new Set(deliveries.map((d) => d.id)));
    for (const c of calls) {
      expect(c.url).toBe("https://api.resend.com/emails");
      expect(c.auth).toBe("Bearer re_test_key");
      expect(c.body.from).toBe('"Acme News" <news@example.com>');
      expect(c.body.subject).toBe("Launch");
    }
    for (const d of deliveries) {
      expect(d).toMatchObject({ status: "sent", attempts: 1, provider_message_id: `re_${d.id}`, error: null });
    }
    expect(await operationOf(h.t, op.id)).toMatchObject({
      status: "succeeded",
      integration_slug: "resend",
      progress: { total: 3, delivered: 3, failed: 0 },
    });
  });

  it("retries a 429 with backoff (honouring Retry-After) and then records the send", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 3);
    const seen = new Set<string>();
    vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) => {
      const key = new Headers(init?.headers).get("idempotency-key") ?? "";
      if (!seen.has(key)) {
        seen.add(key);
        return json(429, { name: "rate_limit_exceeded", message: "Too many requests" }, { "retry-after": "7" });
      }
      return json(200, { id: `re_${key}` });
    });
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });

    await h.step(); // start
    await h.step(); // fan-out
    const first = await h.step(); // delivery: every call rate limited
    expect(first.retryMessages).toHaveLength(1);
    expect(first.retryMessages[0]?.delaySeconds).toBeGreaterThanOrEqual(7);
    let progress = await operationOf(h.t, op.id);
    expect(progress).toMatchObject({ status: "running", progress: { total: 3, delivered: 0, failed: 0 } });
    const waiting = await allDeliveries(h.t, campaign.id);
    for (const d of waiting) expect(d).toMatchObject({ status: "queued", attempts: 1, error: { code: "resend_rate_limit_exceeded" } });

    await h.drain();
    progress = await operationOf(h.t, op.id);
    expect(progress).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 3, failed: 0 } });
    for (const d of await allDeliveries(h.t, campaign.id)) {
      expect(d).toMatchObject({ status: "sent", attempts: 2, provider_message_id: `re_${d.id}`, error: null });
    }
  });

  it("gives up on a provider answering 500 forever: deliveries failed, operation and campaign failed", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 2);
    const fetchSpy = vi.spyOn(globalThis, "fetch").mockImplementation(async () => json(500, { name: "internal_server_error", message: "boom" }));
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();

    expect(fetchSpy).toHaveBeenCalledTimes(2 * MAX_DELIVERY_ATTEMPTS);
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

  it("fails a delivery the provider rejects with another 4xx at once, and still succeeds the send", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 3, (i) => ({ email: i === 1 ? "bad@invalid.example" : `ok${i}@example.com` }));
    const fetchSpy = vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) => {
      const body = JSON.parse(String(init?.body)) as { to: string[] };
      if (body.to[0] === "bad@invalid.example") return json(422, { name: "validation_error", message: "Invalid `to` field" });
      return json(200, { id: "re_ok" });
    });
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();

    expect(fetchSpy).toHaveBeenCalledTimes(3);
    const bad = (await allDeliveries(h.t, campaign.id)).find((d) => d.email === "bad@invalid.example");
    expect(bad).toMatchObject({ status: "failed", attempts: 1, error: { code: "resend_validation_error" } });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 2, failed: 1 } });
  });
});

describe("crashes and redelivery", () => {
  it("a network failure half-way through a chunk: the retry sends only the rest, nobody twice, nobody lost", async () => {
    const h = await harness("live");
    const ids = await seedSubscribers(h.t.workspace.id, 20);
    let calls = 0;
    vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) => {
      calls++;
      if (calls > 10 && calls <= 15) throw new TypeError("injected: connection reset");
      return json(200, { id: `re_${new Headers(init?.headers).get("idempotency-key")}` });
    });
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();

    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(20);
    expect(new Set(deliveries.map((d) => d.subscriber_id))).toEqual(new Set(ids));
    expect(deliveries.every((d) => d.status === "sent")).toBe(true);
    expect(deliveries.filter((d) => d.attempts === 2)).toHaveLength(5);
    expect(calls).toBe(25);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 20, delivered: 20, failed: 0 } });
  });

  it("a consumer that dies after calling the provider and before recording: redelivery reuses the idempotency keys", async () => {
    const { db, crashes } = crashingD1("SET status = 'sent'");
    const h = await harness("live", { DB: db });
    await seedSubscribers(h.t.workspace.id, 30);
    const keys: string[] = [];
    vi.spyOn(globalThis, "fetch").mockImplementation(async (_input, init) => {
      const key = new Headers(init?.headers).get("idempotency-key") ?? "";
      keys.push(key);
      return json(200, { id: `re_${key}` });
    });
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();

    expect(crashes.left).toBe(0);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(30);
    expect(new Set(deliveries.map((d) => d.subscriber_id)).size).toBe(30);
    expect(deliveries.every((d) => d.status === "sent" && d.attempts === 1)).toBe(true);
    // The crashed chunk was handed over again under the same keys, so the provider sends it once.
    expect(new Set(keys)).toEqual(new Set(deliveries.map((d) => d.id)));
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 30, delivered: 30, failed: 0 } });
  });

  it("a fan-out that dies after creating deliveries and before enqueueing them creates none twice and loses none", async () => {
    const h = await harness("live");
    const ids = await seedSubscribers(h.t.workspace.id, 1_200);
    const fetchSpy = resendAlwaysOk();
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
    expect(fetchSpy).toHaveBeenCalledTimes(1_200);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 1_200, delivered: 1_200, failed: 0 } });
  });

  it("a sandbox fan-out that dies after creating its settled deliveries and before moving its position counts none twice", async () => {
    const { db, crashes } = crashingD1("SET fanout_cursor");
    const h = await harness("test", { DB: db });
    const ids = await seedSubscribers(h.t.workspace.id, 1_200);
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, {});
    await h.step(); // start
    const crashed = await h.step(); // fan-out: 500 deliveries created already sent, then the position update dies
    expect(crashes.left).toBe(0);
    expect(crashed.retryMessages).toHaveLength(1);
    expect((await operationOf(h.t, op.id)).progress).toEqual({ total: 500, delivered: 500, failed: 0 });
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
    const crashed = await h.step(); // windows 1 and 2 committed; window 3's rows written, its position update dies
    expect(crashes.left).toBe(0);
    expect(crashed.retryMessages).toHaveLength(1);
    expect((await operationOf(h.t, op.id)).progress).toEqual({ total: 3 * FANOUT_WINDOW, delivered: 3 * FANOUT_WINDOW, failed: 0 });
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
      resendAlwaysOk();
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
    const fetchSpy = resendAlwaysOk();
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
    // Resend may be asked twice for one delivery, always under that delivery's idempotency key.
    if (integration === "resend") expect(new Set(resendCalls(fetchSpy).map((c) => c.key))).toEqual(new Set(deliveries.map((d) => d.id)));
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 40, delivered: 40, failed: 0 } });
  });
});

describe("consent at delivery time", () => {
  it("never mails a subscriber who unsubscribed after the fan-out picked them", async () => {
    const h = await harness("live");
    const ids = await seedSubscribers(h.t.workspace.id, 5);
    const fetchSpy = vi.spyOn(globalThis, "fetch").mockImplementation(async () => json(200, { id: "re_ok" }));
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    await h.step(); // fan-out: five deliveries queued
    const gone = ids[2];
    const patched = await h.t.call("PATCH", `${h.t.ws}/subscribers/${gone}`, { body: { status: "unsubscribed" } });
    expect(patched.status, patched.text).toBe(200);
    await h.drain();

    const sentTo = resendCalls(fetchSpy).map((c) => c.body.to[0]);
    expect(sentTo).toHaveLength(4);
    expect(sentTo).not.toContain("user2@example.com");
    const skipped = (await allDeliveries(h.t, campaign.id)).find((d) => d.subscriber_id === gone);
    expect(skipped).toMatchObject({ status: "failed", attempts: 0, provider_message_id: null, error: { code: "recipient_inactive" } });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 5, delivered: 4, failed: 1 } });
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
    resendAlwaysOk();
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
