import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ByteBudget } from "../src/lib/byte-budget";
import { HELD_MAIL_BYTES, jsonBytes, MAX_BATCH_BYTES, MAX_DELIVERY_ATTEMPTS } from "../src/sending/deliver";
import { TRIES_PER_STEP } from "../src/sending/integrations/resend";
import { HEDGE_AFTER_MS } from "../src/sending/integrations/resend-requests";
import { seedSubscribers, until } from "./helpers";
import { type Fault, mockResend } from "./resend.mock";
import { allDeliveries, createCampaign, createNewsletter } from "./send.fixtures";
import { everyTry, expectEachMailedOnce, expectSentAsResendAnswered, harness, operationOf, resendSend, send, setStatus } from "./send.harness";

/** Three recipients, the second at an address Resend refuses (named `emails[1]` in a strict 422). */
const oneBadAddress = (i: number) => ({ email: i === 1 ? "bad@invalid.example" : `ok${i}@example.com` });

/** Only the named delivery failed, with Resend's reason; the two others were each mailed once and are sent. */
const expectOnlyTheNamedFailed = async (h: Awaited<ReturnType<typeof resendSend>>["h"], resend: ReturnType<typeof mockResend>, campaignId: string) => {
  expect(resend.received.map((r) => r.to[0]).sort()).toEqual(["ok0@example.com", "ok2@example.com"]);
  const deliveries = await allDeliveries(h.t, campaignId);
  expect(deliveries.find((d) => d.email === "bad@invalid.example")).toMatchObject({ status: "failed", error: { code: "resend_validation_error" } });
  expect(deliveries.filter((d) => d.email !== "bad@invalid.example").map((d) => d.status)).toEqual(["sent", "sent"]);
};

// Delivery through Resend, driven message by message (send.harness.ts) against its stand-in
// (resend.mock.ts): batching, pacing, partial failure, refusals.

afterEach(() => {
  vi.restoreAllMocks();
});

describe("delivery through Resend (live credential, mocked provider)", () => {
  it("carries delivery chunks on the delivery queue and starts and fan-out pages on the send queue, so a fan-out never waits behind deliveries", async () => {
    const { h, op } = await resendSend({ recipients: 2_250 });
    await h.drain();
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 2_250, delivered: 2_250, failed: 0 } });
    const via = (type: string) => [...new Set(h.queue.log.filter((m) => (m.body as { type: string }).type === type).map((m) => m.via))];
    // Two fan-out messages (four windows of 500 each, then the rest), 23 chunks of up to 100.
    expect(h.queue.log.filter((m) => (m.body as { type: string }).type === "fanout")).toHaveLength(2);
    expect(h.queue.log.filter((m) => (m.body as { type: string }).type === "deliver")).toHaveLength(23);
    expect(via("start")).toEqual(["newsletter-send"]);
    expect(via("fanout")).toEqual(["newsletter-send"]);
    expect(via("deliver")).toEqual(["newsletter-deliveries"]);
  });

  it("fills Resend's batches for a sparse segment: reads are gathered until a batch is full, so 100 recipients among 3,000 take one request", async () => {
    const h = await harness("live");
    // One subscriber in 30 is tagged: six windows of 500 would have made six batches of about 17.
    await seedSubscribers(h.t.workspace.id, 3_000, (i) => ({ tags: i % 30 === 7 ? ["rare"] : [] }));
    const resend = mockResend();
    const segment = await h.t.call("POST", `${h.t.ws}/segments`, { body: { name: "Rare", filter: { tags_any: ["rare"] } } });
    expect(segment.status, segment.text).toBe(201);
    const campaign = await createCampaign(h.t, { segment_id: segment.body.data.id });
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 100, delivered: 100, failed: 0 } });
    expect(resend.calls).toHaveLength(1);
    expect(resend.received).toHaveLength(100);
    expect(new Set(resend.received.map((r) => r.to[0])).size).toBe(100);
    expect(resend.received.every((r) => Number(/user(\d+)@/.exec(r.to[0]!)?.[1]) % 30 === 7)).toBe(true);
  });

  it("a denser segment across wide reads: 1 in 2 of 3,000 is fifteen full batches (written by two inserts of one window), each recipient mailed once", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 3_000, (i) => ({ tags: i % 2 === 0 ? ["half"] : [] }));
    const resend = mockResend();
    const thirds = await h.t.call("POST", `${h.t.ws}/segments`, { body: { name: "Half", filter: { tags_any: ["half"] } } });
    const campaign = await createCampaign(h.t, { segment_id: thirds.body.data.id });
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 1_500, delivered: 1_500, failed: 0 } });
    expect(resend.calls.map((c) => c.messages.length)).toEqual(Array.from({ length: 15 }, () => 100));
    expect(new Set(resend.received.map((r) => r.to[0])).size).toBe(1_500);
  });

  it("sends every subscriber exactly the message its preview shows (one rendering path)", async () => {
    const h = await harness("live");
    const [first, second] = await seedSubscribers(h.t.workspace.id, 2);
    await env.DB.prepare("UPDATE subscribers SET name = '<i>Ann</i>', tags = '[\"vip\"]', location = 'Oslo', source = 'import' WHERE id = ?").bind(first).run();
    const resend = mockResend();
    const newsletter = await createNewsletter(h.t, { reply_to: "editor@example.com", address: "1 Main St, Oslo" });
    // Every variable a template can read, so that each reaches the preview as it reaches the message.
    const everyVariable =
      "<p>{{ subscriber.email }} {{ subscriber.source }} {{ campaign.subject }} {{ newsletter.name }} {{ newsletter.address }} {{ unsubscribe_url }}</p>";
    const campaign = await createCampaign(h.t, {
      newsletter_id: newsletter.id,
      subject: "{{ subscriber.name | default: 'Friend' }}, your notes",
      preheader: "From {{ subscriber.location | default: 'anywhere' }}",
      html: `<html><body><p>Hi {{ subscriber.name }}</p>{% for t in subscriber.tags %}<b>{{ t | upcase }}</b>{% endfor %}${everyVariable}<a href="https://example.com">Read</a></body></html>`,
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
    expect(ann?.html).toMatch(/<p>\S+@\S+ import &lt;i&gt;Ann&lt;\/i&gt;, your notes \S+ 1 Main St, Oslo https?:\/\/\S+\/u\/\S+<\/p>/);
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
    expectSentAsResendAnswered(resend, deliveries);
    expect(await operationOf(h.t, op.id)).toMatchObject({
      status: "succeeded",
      integration_slug: "resend",
      progress: { total: 3, delivered: 3, failed: 0 },
    });
  });

  it("bounds a batch by the UTF-8 bytes it carries: what would pass MAX_BATCH_BYTES goes in a batch of its own, each recipient mailed once", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 25);
    const resend = mockResend();
    // About 160,000 characters and 400 KB per message (three bytes a character in Japanese): 25 of
    // them are 10 MB, more than one batch may carry.
    const html = `<p>Hi {{ subscriber.name }}</p><p>${"長い記事です。".repeat(19_000)}</p>`;
    const campaign = await createCampaign(h.t, { subject: "Long", html, text: "Plain {{ subscriber.name }}" });
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();

    const keys = [...new Set(resend.calls.map((call) => call.key))];
    expect(keys).toHaveLength(2);
    const utf8 = new TextEncoder();
    const sizeOf = (m: (typeof resend.calls)[number]["messages"][number]) =>
      [m.subject, m.html ?? "", m.text].reduce((sum, part) => sum + utf8.encode(JSON.stringify(part)).length - 2, 0);
    for (const call of resend.calls) expect(call.messages.reduce((sum, m) => sum + sizeOf(m), 0)).toBeLessThanOrEqual(MAX_BATCH_BYTES);
    // As many as fit in the first batch (every message is about the same size), the rest in the second.
    const fit = Math.floor(MAX_BATCH_BYTES / sizeOf(resend.calls[0]!.messages[0]!));
    expect(resend.calls.map((call) => call.messages.length)).toEqual([fit, 25 - fit]);
    expectEachMailedOnce(resend, 25);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 25, delivered: 25, failed: 0 } });
  });

  it("holds at most HELD_MAIL_BYTES of rendered mail across the steps of one queue batch, and mails everyone once", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 400);
    const resend = mockResend();
    // Each batch is answered after 400 ms, so the chunks' steps overlap while they wait.
    resend.inject(...Array.from({ length: 20 }, () => ({ kind: "slow", ms: 400 }) as const));
    // About 90 KB a message: each of the four chunks' steps would hold a full batch (8 MiB) at once,
    // 32 MiB in all.
    const html = `<p>Hi {{ subscriber.email }}</p><p>${"Long read. ".repeat(8_200)}</p>`;
    const campaign = await createCampaign(h.t, { subject: "Long", html, text: "Plain {{ subscriber.email }}" });
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    await h.step(); // fan-out: one message per chunk of 100
    expect(h.queue.messages).toHaveLength(4);
    const takes = vi.spyOn(ByteBudget.prototype, "take");
    await h.drain();

    // Steps held more than one full batch side by side, never more than the budget: the others waited
    // for one to be answered. (Each queue batch has its budget: the most any of them held.)
    const peaks = [...new Set(takes.mock.contexts as ByteBudget[])].map((budget) => budget.peak);
    expect(Math.max(...peaks)).toBeGreaterThan(MAX_BATCH_BYTES);
    expect(Math.max(...peaks)).toBeLessThanOrEqual(HELD_MAIL_BYTES);
    expect(HELD_MAIL_BYTES).toBe(12 * 1024 * 1024);
    expectEachMailedOnce(resend, 400);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 400, delivered: 400, failed: 0 } });
  });

  it("gives each queue batch a budget of its own: two batches the isolate runs at once never wait on each other's", async () => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 200);
    const resend = mockResend();
    resend.inject({ kind: "slow", ms: 200 }, { kind: "slow", ms: 200 });
    const campaign = await createCampaign(h.t, { subject: "Hi", html: "<p>Hi {{ subscriber.email }}</p>" });
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    await h.step(); // fan-out: two chunks
    expect(h.queue.messages).toHaveLength(2);
    const takes = vi.spyOn(ByteBudget.prototype, "take");
    // One chunk a batch, side by side (as the queue may hand one isolate two batches at once).
    await Promise.all([h.step("newsletter-deliveries", 1), h.step("newsletter-deliveries", 1)]);
    expect(new Set(takes.mock.contexts).size).toBe(2);
    expectEachMailedOnce(resend, 200);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 200, delivered: 200, failed: 0 } });
  });

  it("counts a text's bytes in a JSON request as an encoder does", () => {
    const utf8 = new TextEncoder();
    for (const text of ["", "ascii", "café", "長い記事", "😀 emoji", 'say "hi"\n\tback\\slash', "\u0001\u001f", "a\u07ffb\u0800c"]) {
      expect(jsonBytes(text), text).toBe(utf8.encode(JSON.stringify(text)).length - 2);
    }
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

  it("gives up on a provider answering 500 forever: deliveries failed (outcome unknown: a request that failed may have been taken), operation and campaign failed", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 2, faults: Array.from({ length: 100 }, () => ({ kind: "status" as const, status: 500, name: "internal_server_error" })) });
    const warned: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((line: unknown) => void warned.push(String(line)));
    await h.drain();

    expect(resend.calls).toHaveLength(TRIES_PER_STEP * MAX_DELIVERY_ATTEMPTS);
    // Each retry says why, at warn: the provider's trouble, not the service's.
    const retries = warned.map((line) => JSON.parse(line)).filter((line) => line.event === "delivery_retry");
    expect(retries).toHaveLength(MAX_DELIVERY_ATTEMPTS - 1);
    expect(retries[0]).toMatchObject({ level: "warn", operation_id: op.id, deliveries: 2, attempt: 1, retry_after_seconds: expect.any(Number), error: { message: expect.stringContaining("Resend answered 500") } });
    // With backoff: the message waits 2, 4, 8, 16 s after its attempts 1 to 4 (exponential, at most 300 s)…
    expect(retries.map((line) => line.retry_after_seconds)).toEqual([2, 4, 8, 16]);
    // …and within a step, the tries after a 5xx are 250 ms, then 500 ms apart.
    for (let step = 0; step < MAX_DELIVERY_ATTEMPTS; step++) {
      const [first, second, third] = resend.calls.slice(step * TRIES_PER_STEP, (step + 1) * TRIES_PER_STEP).map((c) => c.at);
      expect(second! - first!, `step ${step + 1}`).toBeGreaterThanOrEqual(240);
      expect(third! - second!, `step ${step + 1}`).toBeGreaterThanOrEqual(490);
    }
    for (const d of await allDeliveries(h.t, campaign.id)) {
      expect(d).toMatchObject({ status: "failed", attempts: MAX_DELIVERY_ATTEMPTS, error: { code: "outcome_unknown", message: expect.stringContaining("Resend answered 500") } });
    }
    const final = await operationOf(h.t, op.id);
    expect(final).toMatchObject({ status: "failed", progress: { total: 2, delivered: 0, failed: 2 } });
    expect(final.error.code).toBe("all_deliveries_failed");
    expect(final.completed_at).toMatch(/Z$/);
    const cmp = await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`);
    expect(cmp.body.data).toMatchObject({ status: "failed", sent_at: null });
    // The end is reported once, as a failure.
    const ended = (await h.t.call("GET", `${h.t.ws}/events?limit=100`)).body.data.filter((e: { type: string }) => e.type === "campaign.sent" || e.type === "campaign.failed");
    expect(ended.map((e: { type: string; data: { object: { id: string; status: string } } }) => [e.type, e.data.object.id, e.data.object.status])).toEqual([
      ["campaign.failed", campaign.id, "failed"],
    ]);
  });

  it("gives up on a provider answering 429 forever: nothing was taken, so the deliveries fail with the 429 after their last attempt", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 2 });
    await h.step(); // start
    await h.step(); // fan-out
    // Four attempts already spent on 429s: the last one is this step's.
    await env.DB.prepare("UPDATE deliveries SET attempts = ? WHERE campaign_id = ?").bind(MAX_DELIVERY_ATTEMPTS - 1, campaign.id).run();
    resend.inject(...everyTry({ kind: "status", status: 429, name: "rate_limit_exceeded", retryAfter: 1 }));
    await h.drain();

    expect(resend.calls.map((call) => call.status)).toEqual(Array.from({ length: TRIES_PER_STEP }, () => 429));
    for (const d of await allDeliveries(h.t, campaign.id)) {
      expect(d).toMatchObject({ status: "failed", attempts: MAX_DELIVERY_ATTEMPTS, error: { code: "resend_rate_limit_exceeded" } });
    }
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "failed", progress: { total: 2, delivered: 0, failed: 2 } });
  });

  it("a second ask of a stalled request does not leave once a recipient in it has unsubscribed: nobody is mailed after leaving", async () => {
    const { h, resend, campaign, ids } = await resendSend({ recipients: 3, faults: [{ kind: "stall" }] });
    await h.step(); // start
    await h.step(); // fan-out
    // The request stalls on its way; before its second ask would leave, one of its recipients leaves.
    const delivering = h.drain();
    await until(() => resend.calls.length === 1, 5_000, "the first request");
    await setStatus(h.t, ids[1], "unsubscribed");
    await delivering;

    // The stalled request was never processed, and no second ask left for it: the next try, after its
    // timeout, leaves the one who left out.
    expect(resend.calls[0]?.status).toBe("timeout");
    expect(resend.calls.slice(1).every((call) => call.messages.length === 2)).toBe(true);
    expect(resend.received.map((r) => r.to[0]).sort()).toEqual(["user0@example.com", "user2@example.com"]);
    const left = (await allDeliveries(h.t, campaign.id)).find((d) => d.subscriber_id === ids[1]);
    expect(left).toMatchObject({ status: "failed", error: { code: "recipient_inactive" } });
  });

  it("a recipient rejected in a batch fails alone; the rest of the batch is sent once", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 3, faults: [{ kind: "reject", indexes: [1] }], fields: (i) => ({ email: i === 1 ? "bad@invalid.example" : `ok${i}@example.com` }) });
    await h.drain();

    expect(resend.calls).toHaveLength(1);
    expect(resend.received.map((r) => r.to[0]).sort()).toEqual(["ok0@example.com", "ok2@example.com"]);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.find((d) => d.email === "bad@invalid.example")).toMatchObject({ status: "failed", attempts: 1, error: { code: "resend_rejected" } });
    expectSentAsResendAnswered(resend, deliveries.filter((x) => x.email !== "bad@invalid.example"));
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
      fields: oneBadAddress,
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

  it("a slot the pacer takes back after the last look withdraws that request's number: the request that leaves is still the batch's first", async () => {
    let refusals = 1;
    const { h, resend, campaign, op } = await resendSend({
      recipients: 3,
      // The first slot is taken back (a 429 paused the account past it) after its look numbered the request.
      confirm: async (at) => (refusals-- > 0 ? null : Math.max(at, Date.now())),
      faults: [{ kind: "status", status: 422, name: "validation_error", message: "emails[1].to: Invalid `to` field" }],
      fields: oneBadAddress,
    });
    await h.drain();

    // Resend's refusal of the one request that left is about that request alone: the named delivery
    // fails with its reason, the others go out in a batch of their own (not outcome_unknown).
    await expectOnlyTheNamedFailed(h, resend, campaign.id);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 2, failed: 1 } });
  });

  const strict422 = { kind: "status", status: 422, name: "validation_error", message: "emails[1].to: Invalid `to` field" } as const;
  const rateLimited = { kind: "status", status: 429, name: "rate_limit_exceeded", retryAfter: 1 } as const;

  it.each([
    ["answered at once", [rateLimited, strict422]],
    // The first request's 429 comes back after a second ask left; that ask's strict 422 comes after it.
    ["answered slowly, beside a second ask", [{ ...rateLimited, delayMs: HEDGE_AFTER_MS + 200 }, { ...strict422, delayMs: 600 }]],
  ] as [string, Fault[]][])("a request answered 429 (%s) was not taken: a strict 4xx after it fails the named delivery only", async (_, faults) => {
    const { h, resend, campaign, op } = await resendSend({
      recipients: 3,
      faults,
      fields: oneBadAddress,
    });
    await h.drain();

    expect(resend.calls.slice(0, 2).map((call) => call.status)).toEqual([429, 422]);
    await expectOnlyTheNamedFailed(h, resend, campaign.id);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 2, failed: 1 } });
  });

  it("a strict 4xx answering a second ask while the first went unanswered mails nobody twice: the first may have been taken", async () => {
    const { h, resend, campaign } = await resendSend({
      recipients: 3,
      // The first request is taken and its answer never comes; the ask beside it is refused naming one message.
      faults: [{ kind: "hang" }, strict422],
    });
    await h.drain();

    // The refusal waits for the first request's answer, which never comes (its timeout).
    expect(resend.calls.map((call) => call.status)).toEqual(["timeout", 422]);
    expectEachMailedOnce(resend, 3);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.map((d) => d.error?.code)).toEqual(["outcome_unknown", "outcome_unknown", "outcome_unknown"]);
  });

  it("a strict 4xx answering a second ask is proof once the first request is refused too: the named delivery fails, the rest is sent", async () => {
    const { h, resend, campaign } = await resendSend({
      recipients: 3,
      faults: [
        // The first request answers late, after its second ask was refused: refused as well, so nothing was taken.
        { ...strict422, delayMs: HEDGE_AFTER_MS + 800 },
        { ...strict422, delayMs: 100 },
      ],
      fields: oneBadAddress,
    });
    await h.drain();

    expect(resend.calls.slice(0, 2).map((call) => call.status)).toEqual([422, 422]);
    await expectOnlyTheNamedFailed(h, resend, campaign.id);
  });

  it("a strict 4xx after requests whose answers were lost mails nobody twice: one of those may have been taken, so nobody is sent again", async () => {
    const { h, resend, campaign } = await resendSend({
      recipients: 3,
      faults: [...everyTry({ kind: "timeout" }), { kind: "status", status: 422, name: "validation_error", message: "emails[1].to: Invalid `to` field" }],
    });
    await h.drain();

    expectEachMailedOnce(resend, 3);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.map((d) => d.error?.code)).toEqual(["outcome_unknown", "outcome_unknown", "outcome_unknown"]);
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
