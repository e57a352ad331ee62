import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import worker from "../src/index";
import { lookBeforeRequest, recordDeliveryResults, withdrawRequestNumber } from "../src/sending/deliveries.repository";
import { FANOUT_RENDER_BUDGET, FANOUT_WINDOW, FANOUT_WINDOWS_PER_MESSAGE, SEGMENT_WINDOW } from "../src/sending/fanout";
import { RESEND_KEY_LIFETIME_MS, TRIES_PER_STEP } from "../src/sending/integrations/resend";
import { HEDGE_AFTER_MS } from "../src/sending/integrations/resend-requests";
import { loadOperationState } from "../src/sending/send.repository";
import { seedSubscribers } from "./helpers";
import { mockResend } from "./resend.mock";
import { allDeliveries, createCampaign, createSegment } from "./send.fixtures";
import { crashingD1, everyTry, expectEachMailedOnce, expectSentAsResendAnswered, harness, operationOf, resendSend, send } from "./send.harness";

// Crashes and redelivery at every step of a send, driven message by message (send.harness.ts):
// nobody mailed twice, nobody lost.

afterEach(() => {
  vi.restoreAllMocks();
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

  it("a batch first asked longer ago than Resend keeps its key is never asked under it again: those it held end outcome_unknown, the rest go in a batch of their own", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 4, faults: everyTry({ kind: "network" }) });
    await h.step(); // start
    await h.step(); // fan-out
    await h.step(); // the chunk: every try fails to connect (Resend may have taken one); its message is retried
    const [first] = resend.calls;
    expect(resend.calls).toHaveLength(TRIES_PER_STEP);
    const asked = await env.DB.prepare(`SELECT id, first_asked_at FROM deliveries WHERE campaign_id = ? ORDER BY id`).bind(campaign.id).all<{ id: string; first_asked_at: number }>();
    expect(asked.results.every((r) => Math.abs(r.first_asked_at - (first?.at ?? 0)) < 5_000)).toBe(true);
    // The retry comes a day later (Resend paused the account, say): one of them had never been asked.
    const [never, ...held] = asked.results.map((r) => r.id);
    await env.DB.prepare(`UPDATE deliveries SET first_asked_at = first_asked_at - ? WHERE campaign_id = ?`).bind(RESEND_KEY_LIFETIME_MS, campaign.id).run();
    await env.DB.prepare(`UPDATE deliveries SET asked_seq = 0, first_asked_at = NULL WHERE id = ?`).bind(never).run();
    await h.drain();

    // Nothing more under the old key; the one never asked went under a key of its own.
    expect(resend.calls.slice(TRIES_PER_STEP).map((c) => c.key)).toEqual([expect.not.stringMatching(first?.key ?? "")]);
    expect(resend.received.map((m) => m.tags?.find((t) => t.name === "delivery_id")?.value)).toEqual([never]);
    const deliveries = await allDeliveries(h.t, campaign.id);
    for (const d of deliveries.filter((d) => held.includes(d.id))) {
      expect(d).toMatchObject({ status: "failed", error: { code: "outcome_unknown", message: expect.stringContaining("older than the provider keeps its key") } });
    }
    expect(deliveries.find((d) => d.id === never)).toMatchObject({ status: "sent" });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 4, delivered: 1, failed: 3 } });
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
    expectSentAsResendAnswered(resend, deliveries);
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
    // Every 40th subscriber matches: 125 per read of a segment's fan-out (SEGMENT_WINDOW), a full
    // batch and more, so each read is a window of its own and chunks of 100 and 25 alternate.
    await seedSubscribers(h.t.workspace.id, 2 * SEGMENT_WINDOW, (i) => ({ tags: i % 40 === 0 ? ["b"] : [] }));
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

  it("a chunk with more members than a batch, read first from a later range, leaves none queued: the range is read again from its start", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 101 });
    await h.step(); // start
    await h.step(); // fan-out: chunks of 100 and 1, a work message each
    // As two redone windows could leave it: one chunk of 101 members, its last one in the later range.
    await env.DB.prepare("UPDATE deliveries SET chunk_end = (SELECT max(subscriber_id) FROM deliveries WHERE campaign_id = ?1) WHERE campaign_id = ?1").bind(campaign.id).run();
    // The later range's message runs first: it reads the chunk's first 100 by id, all before its range.
    h.queue.messages.reverse();
    await h.drain();
    expectEachMailedOnce(resend, 101);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 101, delivered: 101, failed: 0 } });
  });

  it("rows from before chunks were recorded are never read into a planned chunk: each batch is one kind, each recipient mailed once", async () => {
    const { h, resend, campaign, op } = await resendSend({ recipients: 150 });
    await h.step(); // start
    await h.step(); // fan-out: chunks of 100 and 50
    // Every other row of the first chunk, its first included, as a database migrated mid-send would hold it.
    await env.DB.prepare(
      `UPDATE deliveries SET chunk_end = NULL WHERE campaign_id = ?1 AND id IN (SELECT id FROM deliveries WHERE campaign_id = ?1 ORDER BY subscriber_id LIMIT 100)
         AND ((rowid % 2) = 0 OR subscriber_id = (SELECT min(subscriber_id) FROM deliveries WHERE campaign_id = ?1))`,
    ).bind(campaign.id).run();
    const legacy = new Set(
      (await env.DB.prepare("SELECT email FROM deliveries WHERE campaign_id = ? AND chunk_end IS NULL").bind(campaign.id).all<{ email: string }>()).results.map((r) => r.email),
    );
    expect(legacy.size).toBeGreaterThan(0);
    await h.drain();
    for (const call of resend.calls.filter((c) => c.status === 200)) {
      const kinds = new Set(call.messages.map((m) => legacy.has(m.to[0]!)));
      expect(kinds.size, "a batch mixes rows from before chunks with planned ones").toBe(1);
    }
    expectEachMailedOnce(resend, 150);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 150, delivered: 150, failed: 0 } });
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
    expectSentAsResendAnswered(resend, await allDeliveries(h.t, campaign.id));
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
    expectSentAsResendAnswered(resend, await allDeliveries(h.t, campaign.id));
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 5, delivered: 5, failed: 0 } });
  });

  it("a chunk with no provider slot soon enough waits as a fresh message: no request, no attempt spent, no retry of the message", async () => {
    // Every slot is taken for the next minute (other sends of the account).
    const busy = { at: Date.now() + 60_000, waitMs: 60_000, granted: false };
    const { h, resend, campaign, op } = await resendSend({ recipients: 3, reserve: async () => busy });
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

  it("a fan-out redone after a crash that ends its window elsewhere (a subscriber confirmed meanwhile) mails every recipient once: a chunk is read whole by whoever reads it", async () => {
    const h = await harness("live");
    // The first read (5,000 active) holds 99 matches; the pending subscriber 4,999 matches once confirmed.
    const ids = await seedSubscribers(h.t.workspace.id, 2 * SEGMENT_WINDOW, (i) => ({
      tags: (i < 4_950 && i % 50 === 7) || (i >= 5_000 && i % 100 === 7) || i === 4_999 ? ["rare"] : [],
      status: i === 4_999 ? "pending" : "active",
    }));
    const resend = mockResend();
    const segment = await createSegment(h.t, { tags_any: ["rare"] });
    const campaign = await createCampaign(h.t, { segment_id: segment.id });
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.step(); // start
    // The fan-out gathers both reads and writes its deliveries; its enqueue fails, so it is redelivered.
    h.queue.failNextSends = 1;
    await h.step();
    const confirmed = await h.t.call("PATCH", `${h.t.ws}/subscribers/${ids[4_999]}`, { body: { status: "active" } });
    expect(confirmed.status, confirmed.text).toBe(200);
    await h.drain();

    const copies = [...resend.copiesPerRecipient().values()];
    expect(copies.every((n) => n === 1), JSON.stringify(resend.calls.map((c) => c.messages.length))).toBe(true);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.filter((d) => d.status !== "sent")).toEqual([]);
    expect(resend.received).toHaveLength(deliveries.length);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: deliveries.length, delivered: deliveries.length, failed: 0 } });
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

describe("two runners of one chunk (a queue message delivered twice)", () => {
  const queuedChunkOf = async (recipients: number) => {
    const { h, resend, campaign, op } = await resendSend({ recipients });
    await h.step(); // start
    await h.step(); // fan-out
    h.queue.messages = [];
    const ids = (await allDeliveries(h.t, campaign.id)).map((d) => d.id).sort();
    const seqOf = async () => {
      const { results } = await env.DB.prepare(`SELECT id, asked_seq FROM deliveries WHERE campaign_id = ? ORDER BY id`).bind(campaign.id).all<{ id: string; asked_seq: number }>();
      return Object.fromEntries(results.map((r) => [r.id, r.asked_seq]));
    };
    return { h, resend, campaign, op, ids, seqOf };
  };

  it("the look before a request numbers only rows of the batch's latest request: a runner that read the chunk earlier cannot add one back", async () => {
    const { ids, seqOf } = await queuedChunkOf(3);
    const [a = "", b = "", x = ""] = ids;
    // Another runner's request held a and b (x was away then).
    await env.DB.prepare(`UPDATE deliveries SET asked_seq = 1 WHERE id IN (?, ?)`).bind(a, b).run();
    // This runner read the chunk before that and would ask for all three.
    const look = await lookBeforeRequest(env.DB, [a, b, x], ids, Date.now());
    expect(look).toMatchObject({ seq: 2, gone: [], behind: [x] });
    expect(await seqOf()).toEqual({ [a]: 2, [b]: 2, [x]: 0 });
    // It settles by every row's number as the look left it, not as it read them.
    expect(Object.fromEntries(look.seqs)).toEqual({ [a]: 2, [b]: 2, [x]: 0 });
  });

  it("a batch's first request dates its key; later requests keep that date, and a first number withdrawn takes it back", async () => {
    const { ids } = await queuedChunkOf(2);
    const firstAsked = async () => {
      const { results } = await env.DB.prepare(`SELECT first_asked_at FROM deliveries WHERE id IN (?, ?)`).bind(ids[0], ids[1]).all<{ first_asked_at: number | null }>();
      return results.map((r) => r.first_asked_at);
    };
    await lookBeforeRequest(env.DB, ids, ids, 1_000);
    expect(await firstAsked()).toEqual([1_000, 1_000]);
    // Its slot was taken back before it left: no request was made under the key yet.
    expect(await withdrawRequestNumber(env.DB, ids, 1)).toHaveLength(2);
    expect(await firstAsked()).toEqual([null, null]);
    await lookBeforeRequest(env.DB, ids, ids, 2_000);
    await lookBeforeRequest(env.DB, ids, ids, 3_000);
    expect(await firstAsked()).toEqual([2_000, 2_000]);
  });

  it("once another runner settled or held any row of the chunk, a runner that read it before numbers no request and records nothing", async () => {
    const { h, ids, seqOf } = await queuedChunkOf(3);
    const [a = "", b = "", x = ""] = ids;
    const op = await loadOperationState(env.DB, (await env.DB.prepare(`SELECT operation_id FROM deliveries WHERE id = ?`).bind(a).first<{ operation_id: string }>())?.operation_id ?? "");
    if (!op) throw new Error("no operation");
    // Another runner failed x (a strict 4xx naming it) and held a and b for a batch of their own.
    await env.DB.prepare(`UPDATE deliveries SET status = 'failed' WHERE id = ?`).bind(x).run();
    const look = await lookBeforeRequest(env.DB, [a, b, x], ids, Date.now());
    expect(look).toMatchObject({ seq: undefined, gone: [] });
    expect([...look.behind].sort()).toEqual([a, b, x].sort());
    expect(await seqOf()).toEqual({ [a]: 0, [b]: 0, [x]: 0 });
    await recordDeliveryResults(env.DB, op, { sent: [], failed: [a, b].map((id) => ({ id, error: { code: "outcome_unknown", message: "?" }, attempted: false })), retry: [], held: [] }, Date.now(), { ids, seq: 0 });
    expect((await allDeliveries(h.t, op.campaignId)).filter((d) => d.status === "queued").map((d) => d.id).sort()).toEqual([a, b]);
  });

  it("a runner overtaken by another's later request writes nothing: the chunk is settled by the one whose request is the latest", async () => {
    const { h, ids, seqOf } = await queuedChunkOf(2);
    const op = await loadOperationState(env.DB, (await env.DB.prepare(`SELECT operation_id FROM deliveries WHERE id = ?`).bind(ids[0]).first<{ operation_id: string }>())?.operation_id ?? "");
    if (!op) throw new Error("no operation");
    await env.DB.prepare(`UPDATE deliveries SET asked_seq = 2 WHERE id IN (SELECT value FROM json_each(?))`).bind(JSON.stringify(ids)).run();
    // Settled from request 1's answer while request 2 (another runner's) is the latest: nothing changes.
    const sent = ids.map((id) => ({ id, providerMessageId: null }));
    await recordDeliveryResults(env.DB, op, { sent, failed: [], retry: [], held: [] }, Date.now(), { ids, seq: 1 });
    expect((await allDeliveries(h.t, op.campaignId)).map((d) => d.status)).toEqual(["queued", "queued"]);
    expect(await seqOf()).toEqual({ [ids[0] ?? ""]: 2, [ids[1] ?? ""]: 2 });
    // From the latest request's answer, it is.
    await recordDeliveryResults(env.DB, op, { sent, failed: [], retry: [], held: [] }, Date.now(), { ids, seq: 2 });
    expect((await allDeliveries(h.t, op.campaignId)).map((d) => d.status)).toEqual(["sent", "sent"]);
    expect((await operationOf(h.t, op.id)).progress).toMatchObject({ delivered: 2 });
  });
});

describe("a fan-out that renders (the sandbox's)", () => {
  it("hands the rest to the next message once its render budget is spent, mid-window: everyone once, nobody skipped", async () => {
    const h = await harness("test");
    const ids = await seedSubscribers(h.t.workspace.id, 60);
    // About 1.15 MB of html and 1 MB of text a message: 50 of them are over the budget.
    const html = `<p>{{ subscriber.email }}</p>{% for i in (1..100) %}<p>${"x".repeat(11_500)}</p>{% endfor %}`;
    const text = `{{ subscriber.email }} {{ unsubscribe_url }}{% for i in (1..100) %}${"y".repeat(10_000)}{% endfor %}`;
    expect(50 * 100 * (11_500 + 10_000)).toBeGreaterThan(FANOUT_RENDER_BUDGET);
    const campaign = await createCampaign(h.t, { html, text });
    const op = await send(h.t, campaign.id, {});
    await h.step(); // start
    await h.step(); // the first fan-out message: one slice of 50 spends the budget
    expect((await operationOf(h.t, op.id)).progress.total).toBe(50);
    expect((await operationOf(h.t, op.id)).status).toBe("running");
    await h.drain();
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries.map((d) => d.subscriber_id).sort()).toEqual([...ids].sort());
    expect(deliveries.every((d) => d.status === "sent")).toBe(true);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 60, delivered: 60, failed: 0 } });
  }, 60_000);
});
