import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { expectError, seedSubscribers } from "./helpers";
import { mockResend } from "./resend.mock";
import { allDeliveries, createCampaign } from "./send.fixtures";
import { everyTry, expectEachMailedOnce, harness, operationOf, pacerStub, resendSend, send, setStatus } from "./send.harness";

// Who a send reaches: the audience when it starts, messages that cannot be rendered, and consent
// looked at again right before each provider request (a batch's membership across its requests).

afterEach(() => {
  vi.restoreAllMocks();
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
  // Each written as an older version of the service accepted it: a value inside <script>; an
  // expression the engine reads as another (false, whatever the subscriber), which is never sent so.
  it.each([
    ['<p>Hi</p><script>var n = "{{ subscriber.name }}";</script>', "inside <script>"],
    ["<p>{% if subscriber.email and %}Hello{% else %}Wrong branch{% endif %}</p>", 'ends with "and"'],
  ])("previews as a 400 naming the field, and sends as undeliverable messages (render_failed), never a failing step: %s", async (html, problem) => {
    const h = await harness("live");
    await seedSubscribers(h.t.workspace.id, 3);
    const resend = mockResend();
    const campaign = await createCampaign(h.t);
    await env.DB.prepare("UPDATE campaigns SET html = ? WHERE id = ?").bind(html, campaign.id).run();
    const preview = await h.t.call("POST", `${h.t.ws}/campaigns/${campaign.id}/preview`);
    expectError(preview, 400, "validation_failed", "html");
    expect(preview.body.error.message).toContain(problem);
    const op = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();
    expect(resend.calls).toEqual([]);
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(3);
    for (const d of deliveries) expect(d).toMatchObject({ status: "failed", attempts: 0, error: { code: "render_failed", message: expect.stringContaining(problem) } });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "failed", progress: { total: 3, delivered: 0, failed: 3 } });
  });

  it("test-sends as a 400 naming the field; through the sandbox, sends as render_failed messages too, and the campaign fails at once", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 3);
    const campaign = await createCampaign(h.t);
    await env.DB.prepare("UPDATE campaigns SET html = ? WHERE id = ?").bind('<p>Hi</p><script>var n = "{{ subscriber.name }}";</script>', campaign.id).run();
    const test = await h.t.call("POST", `${h.t.ws}/campaigns/${campaign.id}/test`, { body: { emails: ["me@example.com"] } });
    expectError(test, 400, "validation_failed", "html");
    expect(test.body.error.message).toContain("inside <script>");
    const op = await send(h.t, campaign.id, {});
    await h.drain();
    const deliveries = await allDeliveries(h.t, campaign.id);
    expect(deliveries).toHaveLength(3);
    for (const d of deliveries) expect(d).toMatchObject({ status: "failed", attempts: 0, provider_message_id: null, error: { code: "render_failed", message: expect.stringContaining("inside <script>") } });
    expect(await operationOf(h.t, op.id)).toMatchObject({ status: "failed", integration_slug: "sandbox", progress: { total: 3, delivered: 0, failed: 3 } });
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("failed");
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
    expectEachMailedOnce(resend, 3);
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
    expectEachMailedOnce(resend, 3);
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
    const reserve = async () => {
      await onReserve(++reserves);
      return { at: Date.now(), waitMs: 0, granted: true };
    };
    const h = await harness("live", { RESEND_PACER: pacerStub(reserve) });
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
    const { h, ids, resend, campaign, op } = await resendSend({ recipients: 5, reserve: async () => ({ at: Date.now() + 400, waitMs: 400, granted: true }) });
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
    const { h, ids, resend, campaign } = await resendSend({ recipients: 4, reserve: async () => ({ at: Date.now() + (++slots === 1 ? 60 : 400), waitMs: 400, granted: true }) });
    resend.inject({ kind: "status", status: 500, name: "internal_server_error" });
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
