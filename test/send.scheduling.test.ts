import { createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import worker from "../src/index";
import { deliveryInsertStatements } from "../src/sending/fanout.repository";
import { loadOperationState, markOperationRunning, type OperationState } from "../src/sending/send.repository";
import { expectError, seedSubscribers, tripsOf, until } from "./helpers";
import { mockResend } from "./resend.mock";
import { allDeliveries, createCampaign } from "./send.fixtures";
import { everyTry, harness, operationOf, resendSend, send } from "./send.harness";

// The queue's edges (malformed, dead-lettered and failing messages), scheduled sends and the
// cron sweeper.

afterEach(() => {
  vi.restoreAllMocks();
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
    // Reported once, as a failure.
    const ended = (await h.t.call("GET", `${h.t.ws}/events?limit=100`)).body.data.filter((e: { type: string }) => e.type === "campaign.sent" || e.type === "campaign.failed");
    expect(ended.map((e: { type: string; data: { object: { id: string } } }) => [e.type, e.data.object.id])).toEqual([["campaign.failed", campaign.id]]);
  });

  it("canceling a sending campaign stops its send: the rest of the audience is never mailed, the campaign and its send end failed", async () => {
    const { h, campaign, op, resend } = await resendSend({ recipients: 150 });
    await h.step(); // start
    await h.step(); // fan-out: chunks of 100 and 50
    const [firstChunk, secondChunk] = h.queue.messages.splice(0, 2);
    h.queue.messages = firstChunk ? [firstChunk] : [];
    await h.step(); // the first 100 are mailed

    const path = `${h.t.ws}/campaigns/${campaign.id}/cancel`;
    const res = await h.t.call("POST", path, { headers: { "idempotency-key": "cancel-send-0001" } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ id: campaign.id, status: "failed", sent_at: null });
    // One D1 batch, like every write (test/round-trips.test.ts).
    expect(tripsOf(res)).toMatchObject({ db: 1, kv: 1 });
    const replay = await h.t.call("POST", path, { headers: { "idempotency-key": "cancel-send-0001" } });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(res.body);
    // The second chunk's message still comes: it finds nothing to do.
    h.queue.messages.push(secondChunk as (typeof h.queue.messages)[number]);
    await h.drain();

    expect(resend.received).toHaveLength(100);
    const deliveries = await allDeliveries(h.t, campaign.id);
    const codes = new Map<string, number>();
    for (const d of deliveries) codes.set(`${d.status} ${d.error?.code ?? ""}`.trim(), (codes.get(`${d.status} ${d.error?.code ?? ""}`.trim()) ?? 0) + 1);
    expect(Object.fromEntries(codes)).toEqual({ sent: 100, "failed send_canceled": 50 });
    const final = await operationOf(h.t, op.id);
    expect(final).toMatchObject({ status: "failed", error: { code: "send_canceled" }, progress: { total: 150, delivered: 100, failed: 50 } });
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}/stats`)).body.data).toMatchObject({ queued: 0, sent: 100, failed: 50 });
    const events = (await h.t.call("GET", `${h.t.ws}/events?type=campaign.failed`)).body.data;
    expect(events.map((e: { data: { object: { id: string; status: string } } }) => e.data.object)).toMatchObject([{ id: campaign.id, status: "failed" }]);

    // Not sending any more: 409, and nothing changes.
    const again = await h.t.call("POST", path);
    expectError(again, 409, "campaign_not_sending");
    expect((await h.t.call("GET", `${h.t.ws}/events?type=campaign.failed`)).body.data).toHaveLength(1);
    // A failed campaign is not sent again (a new campaign reaches the rest); it can be archived.
    expectError(await h.t.call("POST", `${h.t.ws}/campaigns/${campaign.id}/send`, { body: {} }), 409, "campaign_not_sendable");
    expect((await h.t.call("POST", `${h.t.ws}/campaigns/${campaign.id}/archive`)).body.data).toMatchObject({ status: "archived", sent_at: null });
  });

  it("a step whose Resend request is on its way when the cancel commits writes nothing after it: the ended send keeps its numbers and its updated_at", async () => {
    const { h, campaign, op, resend } = await resendSend({ recipients: 150, faults: [{ kind: "slow", ms: 300 }] });
    await h.step(); // start
    await h.step(); // fan-out: chunks of 100 and 50
    h.queue.messages.splice(1);
    const stepping = h.step(); // the first chunk's request: Resend takes 300 ms to answer
    await until(() => resend.calls.length === 1, 5_000, "the chunk's request");
    expect((await h.t.call("POST", `${h.t.ws}/campaigns/${campaign.id}/cancel`)).status).toBe(200);
    const ended = await operationOf(h.t, op.id);
    await stepping; // Resend took the 100: the step finds its rows no longer queued

    expect(resend.received).toHaveLength(100);
    expect(ended).toMatchObject({ status: "failed", progress: { total: 150, delivered: 0, failed: 150 } });
    expect(ended.updated_at).toBe(ended.completed_at);
    expect(await operationOf(h.t, op.id)).toEqual(ended);
    const codes = (await allDeliveries(h.t, campaign.id)).map((d: { error: { code: string } | null }) => d.error?.code);
    expect(codes.filter((c: string | undefined) => c === "outcome_unknown")).toHaveLength(100);
    expect(codes.filter((c: string | undefined) => c === "send_canceled")).toHaveLength(50);
  });

  it("cancel answers 409 campaign_not_sending for a draft or a scheduled campaign, 404 for another workspace's", async () => {
    const h = await harness("test");
    const draft = await createCampaign(h.t);
    const refused = await h.t.call("POST", `${h.t.ws}/campaigns/${draft.id}/cancel`);
    expectError(refused, 409, "campaign_not_sending");
    expect(refused.body.error.message).toContain("this one is draft");
    const scheduled = await createCampaign(h.t, { scheduled_at: new Date(Date.now() + 3_600_000).toISOString() });
    await send(h.t, scheduled.id, {});
    expect((await h.t.call("POST", `${h.t.ws}/campaigns/${scheduled.id}/cancel`)).body.error.message).toContain("unscheduled instead");
    const other = await harness("test");
    expectError(await other.t.call("POST", `${other.t.ws}/campaigns/${draft.id}/cancel`), 404, "not_found", "campaign_id");
  });

  it("a fan-out page written after its send ended adds no delivery: nothing would ever deliver it", async () => {
    const h = await harness("test");
    const [subscriber] = await seedSubscribers(h.t.workspace.id, 1);
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, {});
    await h.step(); // start: running
    // A fan-out step read the operation while it ran; meanwhile a dead-lettered copy of it ends the send.
    const [fanout] = h.queue.messages.splice(0, 1);
    h.queue.messages.push({ body: fanout?.body, attempts: 11 });
    await h.step("newsletter-send-dlq");
    expect((await operationOf(h.t, op.id)).status).toBe("failed");
    const page = { workspaceId: h.t.workspace.id, campaignId: campaign.id, operationId: op.id, now: Date.now(), settle: undefined };
    const row = { id: "dlv_01M8ZZZZZZZZZZZZZZZZZZZZZZ", subscriberId: subscriber as string, email: "user0@example.com" };
    await env.DB.batch(deliveryInsertStatements(env.DB, { ...page, rows: [row] }));
    expect(await allDeliveries(h.t, campaign.id)).toEqual([]);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "failed", progress: { total: 0 } });
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
    const { h, resend, op } = await resendSend({ recipients: 3, reserve: async () => far });
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
    expect(h.queue.log.at(-1)).toEqual({ body: { type: "deliver", operation_id: op.id, from: null, to: null }, via: "newsletter-deliveries" });
    expect(h.queue.messages).toHaveLength(2);
  });

  it("unscheduling cancels a scheduled send before it starts: the campaign is a draft again, its send failed send_unscheduled, its start does nothing", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 3);
    const campaign = await createCampaign(h.t, { scheduled_at: new Date(Date.now() + 3600_000).toISOString() });
    const op = await send(h.t, campaign.id, {});
    expect(h.queue.messages.map((m) => m.body)).toEqual([{ type: "start", operation_id: op.id }]);
    // Scheduled is not a draft: a second send is refused, and makes no second operation.
    expectError(await h.t.call("POST", `${h.t.ws}/campaigns/${campaign.id}/send`, { body: {} }), 409, "campaign_not_sendable");
    expect(h.queue.messages).toHaveLength(1);
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
    // While it sends, it is neither edited, archived nor sent again.
    expectError(await h.t.call("PATCH", `${h.t.ws}/campaigns/${soon.id}`, { body: { subject: "Changed" } }), 409, "campaign_not_editable");
    expectError(await h.t.call("POST", `${h.t.ws}/campaigns/${soon.id}/archive`), 409, "campaign_not_editable");
    expectError(await h.t.call("POST", `${h.t.ws}/campaigns/${soon.id}/send`, { body: {} }), 409, "campaign_not_sendable");
    await h.drain();
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${soon.id}`)).body.data).toMatchObject({ status: "sent", subject: "Hello" });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded" });
  });

  /** A subscriber who joins now: a few milliseconds after what came before, and before what comes next. */
  const joinsNow = async (h: Awaited<ReturnType<typeof harness>>, email: string): Promise<string> => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    const joined = await h.t.call("POST", `${h.t.ws}/subscribers`, { body: { email } });
    await new Promise((resolve) => setTimeout(resolve, 5));
    return joined.body.data.id;
  };

  /** The send succeeded to `total` recipients, `subscriberId` among them. */
  const expectReached = async (h: Awaited<ReturnType<typeof harness>>, operationId: string, campaignId: string, subscriberId: string, total: number) => {
    expect(await operationOf(h.t, operationId)).toMatchObject({ status: "succeeded", progress: { total } });
    expect((await allDeliveries(h.t, campaignId)).map((d) => d.subscriber_id)).toContain(subscriberId);
  };

  it("a scheduled send's audience is taken when it starts: a subscriber who joins between the request and the start is in it", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 2);
    const campaign = await createCampaign(h.t, { scheduled_at: new Date(Date.now() + 3600_000).toISOString() });
    const op = await send(h.t, campaign.id, {});
    const joined = await joinsNow(h, "joined-later@example.com");
    // Its time comes (moved to now): the start reads the audience as it stands then.
    await env.DB.prepare("UPDATE operations SET start_at = ?2 WHERE id = ?1").bind(op.id, Date.now()).run();
    await h.drain();
    await expectReached(h, op.id, campaign.id, joined, 3);
  });

  it("a draft whose scheduled_at has passed is sent now, to the audience of now", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 2);
    const campaign = await createCampaign(h.t, { scheduled_at: new Date(Date.now() + 200).toISOString() });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const joined = await joinsNow(h, "after-the-time@example.com");
    const op = await send(h.t, campaign.id, {});
    await h.drain();
    await expectReached(h, op.id, campaign.id, joined, 3);
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

  it("a start that read its send as due before a reschedule moved it later does not start it: the PATCH's 200 holds", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 2);
    const campaign = await createCampaign(h.t, { scheduled_at: new Date(Date.now() + 3600_000).toISOString() });
    const op = await send(h.t, campaign.id, {});
    // The hour has passed: the start step reads the operation, due...
    await h.env.DB.prepare("UPDATE operations SET start_at = ? WHERE id = ?").bind(Date.now() - 1_000, op.id).run();
    const read = (await loadOperationState(h.env.DB, op.id)) as OperationState;
    expect(read.startAt).toBeLessThan(Date.now());
    // ...and before it marks it running, a PATCH moves the send an hour later.
    const later = new Date(Date.now() + 3600_000).toISOString();
    const moved = await h.t.call("PATCH", `${h.t.ws}/campaigns/${campaign.id}`, { body: { scheduled_at: later } });
    expect(moved.body.data).toMatchObject({ status: "scheduled", scheduled_at: later });
    expect(await markOperationRunning(h.env.DB, read, Date.now())).toBe(false);
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "queued" });
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`)).body.data).toMatchObject({ status: "scheduled", scheduled_at: later });
    expect((await h.t.call("GET", `${h.t.ws}/events?type=campaign.sending`)).body.data).toEqual([]);
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
    await worker.scheduled(createScheduledController({ scheduledTime: Date.now() + 2 * 60_000 }), h.env);
    expect(h.queue.messages.map((m) => m.body)).toEqual([{ type: "start", operation_id: op.id }]);
    await h.drain();
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "succeeded", progress: { total: 3, delivered: 3 } });
  });
});
