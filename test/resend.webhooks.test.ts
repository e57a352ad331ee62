import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../src/app";
import { CONFIRMATION_MESSAGE_TTL_MS, RECEIPT_TTL_MS, sweepWebhooks } from "../src/webhooks/sweep";
import { expectError, seedSubscribers } from "./helpers";
import { mockResend } from "./resend.mock";
import { allDeliveries, CapturedQueue, createCampaign, createNewsletter, type Delivery, previewLinkPath } from "./send.fixtures";
import { createEndpoint } from "./webhooks.fixtures";
import { harness, send } from "./send.harness";

const SECRET = `whsec_${btoa("resend-webhook-test-secret-32byte")}`;
const OTHER_SECRET = `whsec_${btoa("another-secret-entirely-32-bytes")}`;
const app = createApp();

afterEach(() => {
  vi.restoreAllMocks();
});

type Signed = { id?: string; secret?: string; at?: Date; body: string; signedBody?: string; headers?: Record<string, string> };

const post = async (testEnv: Env, { id = `msg_${crypto.randomUUID()}`, secret = SECRET, at = new Date(), body, signedBody = body, headers }: Signed) => {
  const signature = new Webhook(secret).sign(id, at, signedBody);
  const res = await app.fetch(
    new Request("https://api.example.test/webhooks/resend", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "svix-id": id,
        "svix-timestamp": String(Math.floor(at.getTime() / 1000)),
        "svix-signature": signature,
        ...headers,
      },
      body,
    }),
    testEnv,
    createExecutionContext(),
  );
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text };
};

const event = (type: string, emailId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ type, created_at: "2026-11-02T10:00:00.000Z", data: { email_id: emailId, to: ["x@example.com"], ...extra } });

/** A live send of `n` recipients through the mocked Resend: its deliveries have provider message ids. */
const sentCampaign = async (n: number) => {
  const h = await harness("live", { RESEND_WEBHOOK_SECRET: SECRET });
  await seedSubscribers(h.t.workspace.id, n);
  mockResend();
  const campaign = await createCampaign(h.t);
  await send(h.t, campaign.id, { integration_slug: "resend" });
  await h.drain();
  vi.restoreAllMocks();
  const deliveries = await allDeliveries(h.t, campaign.id);
  const delivery = async (id: string) => (await allDeliveries(h.t, campaign.id)).find((d) => d.id === id) as Delivery;
  const subscriberStatus = async (id: string) => (await h.t.call("GET", `${h.t.ws}/subscribers/${id}`)).body.data.status as string;
  const stats = async () => (await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}/stats`)).body;
  return { h, campaign, deliveries, delivery, subscriberStatus, stats };
};

const snapshot = async () => ({
  deliveries: (await env.DB.prepare("SELECT * FROM deliveries ORDER BY id").all()).results,
  subscribers: (await env.DB.prepare("SELECT id, status, status_source, updated_at FROM subscribers ORDER BY id").all()).results,
  receipts: (await env.DB.prepare("SELECT count(*) AS n FROM webhook_receipts").first<{ n: number }>())?.n,
});

describe("POST /webhooks/resend: bad input changes nothing", () => {
  it("answers 404 when RESEND_WEBHOOK_SECRET is not set, for every method (a 405 would tell the route exists)", async () => {
    const unset = { ...env, RESEND_WEBHOOK_SECRET: undefined } as Env;
    const res = await post(unset, { body: event("email.delivered", "re_1") });
    expectError(res, 404, "not_found");
    const other = (method: string, testEnv: Env) =>
      app.fetch(new Request("https://api.example.test/v1/webhooks/resend", { method }), testEnv, createExecutionContext());
    for (const method of ["GET", "PUT", "DELETE"]) expect((await other(method, unset)).status).toBe(404);
    const configured = await other("GET", { ...env, RESEND_WEBHOOK_SECRET: SECRET } as Env);
    expect(configured.status).toBe(405);
    expect(configured.headers.get("allow")).toBe("POST");
  });

  it("verifies the signature over the body's own bytes: a byte-order mark is part of it, and bytes that are not UTF-8 cannot be signed (401)", async () => {
    const testEnv = { ...env, RESEND_WEBHOOK_SECRET: SECRET } as Env;
    // Signed with its BOM, the body verifies (then is no JSON object); signed without it, it does not.
    const withBom = `\uFEFF${event("email.delivered", "re_1")}`;
    expectError(await post(testEnv, { body: withBom }), 400, "invalid_json");
    expectError(await post(testEnv, { body: withBom, signedBody: withBom.slice(1) }), 401, "invalid_signature");
    const bytes = new Uint8Array([...new TextEncoder().encode('{"type":"email.delivered","data":{"email_id":"re_'), 0xff, 0xfe, ...new TextEncoder().encode('"}}')]);
    const res = await app.fetch(
      new Request("https://api.example.test/webhooks/resend", { method: "POST", headers: { "content-type": "application/json" }, body: bytes }),
      testEnv,
      createExecutionContext(),
    );
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "invalid_signature",
      message: "The webhook signature could not be verified: the body is not UTF-8 text, which is what Resend signs",
    });
  });

  it("401 invalid_signature: no signature, a wrong one, another secret, an old timestamp, one that is not a whole number, a body altered after signing", async () => {
    const s = await sentCampaign(1);
    const emailId = s.deliveries[0]?.provider_message_id ?? "";
    const body = event("email.delivered", emailId);
    const before = await snapshot();
    const cases: Signed[] = [
      { body, headers: { "svix-signature": "" } },
      { body, headers: { "svix-id": "", "svix-timestamp": "", "svix-signature": "" } },
      { body, headers: { "svix-signature": "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" } },
      { body, secret: OTHER_SECRET },
      { body, at: new Date(Date.now() - 6 * 60_000) },
      { body, at: new Date(Date.now() + 6 * 60_000) },
      { body: event("email.bounced", emailId, { bounce: { type: "Permanent" } }), signedBody: body },
      // Signed over the number alone, sent with more around it: the signature covers the header as sent.
      ...["abc", ".9", "e0"].map((tail) => ({ body, headers: { "svix-timestamp": `${Math.floor(Date.now() / 1000)}${tail}` } })),
    ];
    for (const c of cases) expectError(await post(s.h.env, c), 401, "invalid_signature");
    // A missing header is named; Standard Webhooks' names instead of Svix's are pointed out.
    const unsigned = await post(s.h.env, { body, headers: { "svix-id": "", "svix-timestamp": "", "svix-signature": "" } });
    expect(unsigned.body.error.message).toBe("The webhook signature could not be verified: missing svix-id, svix-timestamp, svix-signature");
    const renamed = await post(s.h.env, { body, headers: { "svix-signature": "", "webhook-signature": "v1,AAAA" } });
    expect(renamed.body.error.message).toBe(
      "The webhook signature could not be verified: missing svix-signature (this request has webhook-* headers: Resend sends svix-id, svix-timestamp and svix-signature)",
    );
    expect(await snapshot()).toEqual(before);
  });

  it("400 invalid_json for a signed body that is not a JSON object; 413 for a 1 MB body; nothing changes", async () => {
    const s = await sentCampaign(1);
    const before = await snapshot();
    expectError(await post(s.h.env, { body: "{not json" }), 400, "invalid_json");
    expectError(await post(s.h.env, { body: "[1,2]" }), 400, "invalid_json");
    const emailId = s.deliveries[0]?.provider_message_id ?? "";
    const big = JSON.stringify({ type: "email.delivered", data: { email_id: emailId, pad: "x".repeat(1024 * 1024) } });
    expectError(await post(s.h.env, { body: big }), 413, "payload_too_large");
    expect(await snapshot()).toEqual(before);
    // The route's cap is 256 KiB, not the API's 64 KiB: a large event within it is applied.
    const large = event("email.delivered", emailId, { subject: "x".repeat(200 * 1024) });
    const applied = await post(s.h.env, { body: large });
    expect(applied.status, applied.text).toBe(200);
    expect(applied.body.data.result).toBe("applied");
  });

  it("200 ignored for unknown event types and unknown email ids", async () => {
    const s = await sentCampaign(1);
    const before = await snapshot();
    const unknownType = await post(s.h.env, { body: event("contact.created", s.deliveries[0]?.provider_message_id ?? "") });
    expect(unknownType.status, unknownType.text).toBe(200);
    expect(unknownType.body.data).toMatchObject({ object: "webhook_receipt", type: "contact.created", result: "ignored" });
    const unknownId = await post(s.h.env, { body: event("email.delivered", "re_nobody") });
    expect(unknownId.body.data.result).toBe("ignored");
    const after = await snapshot();
    expect(after.deliveries).toEqual(before.deliveries);
    expect(after.subscribers).toEqual(before.subscribers);
  });
});

describe("POST /webhooks/resend: effects", () => {
  it("delivered, opened and clicked (first time only), and a duplicate svix-id is a no-op", async () => {
    const s = await sentCampaign(1);
    const d = s.deliveries[0] as Delivery;
    const id = d.provider_message_id ?? "";
    expect((await post(s.h.env, { id: "msg_delivered", body: event("email.delivered", id) })).body.data.result).toBe("applied");
    expect(await s.delivery(d.id)).toMatchObject({ status: "delivered" });

    // Sent on 2 November, at 10:00.
    await env.DB.prepare("UPDATE deliveries SET created_at = ? WHERE id = ?").bind(Date.parse("2026-11-02T10:00:00.000Z"), d.id).run();
    const report = (type: string, at: string) => post(s.h.env, { body: JSON.stringify({ type, created_at: at, data: { email_id: id } }) });
    expect((await report("email.opened", "2026-11-02T10:05:00.000Z")).body.data.result).toBe("applied");
    expect((await report("email.opened", "2026-11-02T11:00:00.000Z")).body.data.result).toBe("ignored");
    await report("email.clicked", "2026-11-02T10:06:00.000Z");
    expect(await s.delivery(d.id)).toMatchObject({ opened_at: "2026-11-02T10:05:00.000Z", clicked_at: "2026-11-02T10:06:00.000Z" });
    // Reports come in any order: the earliest open is the first, and a report's time is kept between
    // the send and its arrival (a clock at 1970 is the send's time; one years ahead, no earlier open).
    expect((await report("email.opened", "2026-11-02T10:02:00.000Z")).body.data.result).toBe("applied");
    expect((await report("email.clicked", "+275760-09-13T00:00:00.000Z")).body.data.result).toBe("ignored");
    expect(await s.delivery(d.id)).toMatchObject({ opened_at: "2026-11-02T10:02:00.000Z", clicked_at: "2026-11-02T10:06:00.000Z" });
    await report("email.opened", "1970-01-01T00:00:00.000Z");
    expect(await s.delivery(d.id)).toMatchObject({ opened_at: "2026-11-02T10:00:00.000Z" });

    const before = await snapshot();
    const again = await post(s.h.env, { id: "msg_delivered", body: event("email.delivered", id) });
    expect(again.status).toBe(200);
    expect(again.body.data.result).toBe("duplicate");
    expect(await snapshot()).toEqual(before);
  });

  it("a permanent bounce bounces the delivery and the subscriber; a transient one only the delivery; never backwards", async () => {
    const s = await sentCampaign(2);
    const [hard, soft] = s.deliveries as [Delivery, Delivery];
    await post(s.h.env, { body: event("email.bounced", hard.provider_message_id ?? "", { bounce: { type: "Permanent", subType: "General" } }) });
    await post(s.h.env, { body: event("email.bounced", soft.provider_message_id ?? "", { bounce: { type: "Transient" } }) });
    expect(await s.delivery(hard.id)).toMatchObject({ status: "bounced", bounce_type: "Permanent" });
    expect(await s.subscriberStatus(hard.subscriber_id)).toBe("bounced");
    expect(await s.delivery(soft.id)).toMatchObject({ status: "bounced", bounce_type: "Transient" });
    expect(await s.subscriberStatus(soft.subscriber_id)).toBe("active");
    // A delivered report arriving after the bounce leaves it bounced.
    const late = await post(s.h.env, { body: event("email.delivered", hard.provider_message_id ?? "") });
    expect(late.body.data.result).toBe("ignored");
    expect(await s.delivery(hard.id)).toMatchObject({ status: "bounced" });
  });

  it("a permanent bounce of an address the subscriber has since changed leaves the new address alone; a complaint follows the person", async () => {
    const s = await sentCampaign(3);
    const [bounced, complained, cased] = s.deliveries as [Delivery, Delivery, Delivery];
    for (const [d, to] of [[bounced, "moved-on@example.com"], [complained, "also-moved@example.com"], [cased, cased.email.toUpperCase()]] as const) {
      expect((await s.h.t.call("PATCH", `${s.h.t.ws}/subscribers/${d.subscriber_id}`, { body: { email: to } })).status).toBe(200);
    }
    const hard = await post(s.h.env, { body: event("email.bounced", bounced.provider_message_id ?? "", { bounce: { type: "Permanent" } }) });
    expect(hard.body.data.result).toBe("applied");
    expect(await s.delivery(bounced.id)).toMatchObject({ status: "bounced", bounce_type: "Permanent" });
    expect(await s.subscriberStatus(bounced.subscriber_id)).toBe("active");
    await post(s.h.env, { body: event("email.complained", complained.provider_message_id ?? "") });
    expect(await s.subscriberStatus(complained.subscriber_id)).toBe("unsubscribed");
    const events = (await s.h.t.call("GET", `${s.h.t.ws}/events`)).body.data.map((e: { type: string }) => e.type);
    expect(events.filter((t: string) => t === "subscriber.bounced")).toEqual([]);
    // A change of letter case alone is the same address: the bounce reaches it.
    await post(s.h.env, { body: event("email.bounced", cased.provider_message_id ?? "", { bounce: { type: "Permanent" } }) });
    expect(await s.subscriberStatus(cased.subscriber_id)).toBe("bounced");
  });

  it("a complaint marks the delivery complained and unsubscribes the subscriber; a redelivered one changes nothing again", async () => {
    const s = await sentCampaign(1);
    const d = s.deliveries[0] as Delivery;
    await post(s.h.env, { id: "msg_complaint", body: event("email.complained", d.provider_message_id ?? "") });
    expect(await s.delivery(d.id)).toMatchObject({ status: "complained" });
    expect(await s.subscriberStatus(d.subscriber_id)).toBe("unsubscribed");
    // Resubscribed by the API afterwards: the same event delivered again must not undo that.
    await s.h.t.call("PATCH", `${s.h.t.ws}/subscribers/${d.subscriber_id}`, { body: { status: "active" } });
    expect((await post(s.h.env, { id: "msg_complaint", body: event("email.complained", d.provider_message_id ?? "") })).body.data.result).toBe("duplicate");
    expect(await s.subscriberStatus(d.subscriber_id)).toBe("active");
  });
});

describe("POST /webhooks/resend: feedback about a confirmation mail", () => {
  /** A live tenant whose pending subscribers were each mailed a confirmation through (mocked) Resend. */
  const confirmationsMailed = async (emails: string[]) => {
    const h = await harness("live", { RESEND_WEBHOOK_SECRET: SECRET });
    const nl = await createNewsletter(h.t, { name: "The Weekly Byte" });
    mockResend();
    const mailed: { id: string; email: string; messageId: string }[] = [];
    for (const email of emails) {
      const sub = (await h.t.call("POST", `${h.t.ws}/subscribers`, { body: { email, status: "pending" } })).body.data;
      const res = await h.t.call("POST", `${h.t.ws}/subscribers/${sub.id}/confirmation`, { body: { newsletter_id: nl.id } });
      expect(res.body.data.result.status, res.text).toBe("sent");
      mailed.push({ id: sub.id, email, messageId: res.body.data.result.provider_message_id });
    }
    vi.restoreAllMocks();
    const statusOf = async (id: string) => (await h.t.call("GET", `${h.t.ws}/subscribers/${id}`)).body.data.status as string;
    return { h, mailed, statusOf };
  };

  it("a permanent bounce bounces its subscriber and a complaint unsubscribes them, each with its event; a transient bounce changes nothing", async () => {
    const { h, mailed, statusOf } = await confirmationsMailed(["dead@example.com", "angry@example.com", "busy@example.com", "moved@example.com"]);
    const [dead, angry, busy, moved] = mailed as [(typeof mailed)[number], (typeof mailed)[number], (typeof mailed)[number], (typeof mailed)[number]];
    const bounced = await post(h.env, { id: "msg_confirm_bounce", body: event("email.bounced", dead.messageId, { bounce: { type: "Permanent" } }) });
    expect(bounced.body.data.result).toBe("applied");
    expect(await statusOf(dead.id)).toBe("bounced");
    expect((await post(h.env, { body: event("email.complained", angry.messageId) })).body.data.result).toBe("applied");
    expect(await statusOf(angry.id)).toBe("unsubscribed");
    expect((await post(h.env, { body: event("email.bounced", busy.messageId, { bounce: { type: "Transient" } }) })).body.data.result).toBe("ignored");
    expect(await statusOf(busy.id)).toBe("pending");
    // An address changed since the mail: its bounce says nothing of the new one.
    await h.t.call("PATCH", `${h.t.ws}/subscribers/${moved.id}`, { body: { email: "elsewhere@example.com" } });
    expect((await post(h.env, { body: event("email.bounced", moved.messageId, { bounce: { type: "Permanent" } }) })).body.data.result).toBe("ignored");
    expect(await statusOf(moved.id)).toBe("pending");

    const events = (await h.t.call("GET", `${h.t.ws}/events`)).body.data as { type: string; data: { object: { id: string; status: string } } }[];
    const about = (type: string) => events.filter((e) => e.type === type).map((e) => e.data.object);
    expect(about("subscriber.bounced")).toMatchObject([{ id: dead.id, status: "bounced" }]);
    expect(about("subscriber.unsubscribed")).toMatchObject([{ id: angry.id, status: "unsubscribed" }]);
    // Redelivered: nothing again.
    const again = await post(h.env, { id: "msg_confirm_bounce", body: event("email.bounced", dead.messageId, { bounce: { type: "Permanent" } }) });
    expect(again.body.data.result).toBe("duplicate");
    expect((await h.t.call("GET", `${h.t.ws}/events?type=subscriber.bounced`)).body.data).toHaveLength(1);
  });

  it("a complaint stays what it is: a later permanent bounce of the same confirmation mail changes nothing, whatever the API did since", async () => {
    const { h, mailed, statusOf } = await confirmationsMailed(["complains@example.com"]);
    const [one] = mailed as [(typeof mailed)[number]];
    await post(h.env, { body: event("email.complained", one.messageId) });
    expect(await statusOf(one.id)).toBe("unsubscribed");
    await h.t.call("PATCH", `${h.t.ws}/subscribers/${one.id}`, { body: { status: "active" } });
    expect((await post(h.env, { body: event("email.bounced", one.messageId, { bounce: { type: "Permanent" } }) })).body.data.result).toBe("ignored");
    expect(await statusOf(one.id)).toBe("active");
  });

  it("keeps a confirmation mail's record 30 days: the sweeper drops older ones, and their feedback is then ignored", async () => {
    const { h, mailed, statusOf } = await confirmationsMailed(["old@example.com", "new@example.com"]);
    const [old, recent] = mailed as [(typeof mailed)[number], (typeof mailed)[number]];
    const count = async () => (await env.DB.prepare("SELECT count(*) AS n FROM confirmation_messages WHERE workspace_id = ?").bind(h.t.workspace.id).first<{ n: number }>())?.n;
    expect(await count()).toBe(2);
    await env.DB.prepare("UPDATE confirmation_messages SET created_at = ? WHERE provider_message_id = ?").bind(Date.now() - CONFIRMATION_MESSAGE_TTL_MS - 1, old.messageId).run();
    await sweepWebhooks(h.env, Date.now());
    expect(await count()).toBe(1);
    expect((await post(h.env, { body: event("email.complained", old.messageId) })).body.data.result).toBe("ignored");
    expect(await statusOf(old.id)).toBe("pending");
    expect((await post(h.env, { body: event("email.complained", recent.messageId) })).body.data.result).toBe("applied");
  });
});

describe("POST /webhooks/resend: what later events may change", () => {
  it("a bounce's type only ever hardens: Transient after Permanent keeps Permanent; none on a complained delivery", async () => {
    const s = await sentCampaign(3);
    const [hard, soft, complained] = s.deliveries as [Delivery, Delivery, Delivery];
    const bounce = (d: Delivery, type: string) => post(s.h.env, { body: event("email.bounced", d.provider_message_id ?? "", { bounce: { type } }) });
    await bounce(hard, "Permanent");
    expect((await bounce(hard, "Transient")).body.data.result).toBe("ignored");
    expect(await s.delivery(hard.id)).toMatchObject({ status: "bounced", bounce_type: "Permanent" });
    await bounce(soft, "Transient");
    await bounce(soft, "Permanent");
    expect(await s.delivery(soft.id)).toMatchObject({ status: "bounced", bounce_type: "Permanent" });
    expect(await s.subscriberStatus(soft.subscriber_id)).toBe("bounced");
    // Each change of the delivery has its event: the bounce, then its hardening; none for the ignored one.
    const events = (await s.h.t.call("GET", `${s.h.t.ws}/events?type=delivery.bounced`)).body.data as { data: { object: { id: string; bounce_type: string } } }[];
    const typesOf = (id: string) => events.filter((e) => e.data.object.id === id).map((e) => e.data.object.bounce_type).reverse();
    expect(typesOf(soft.id)).toEqual(["Transient", "Permanent"]);
    expect(typesOf(hard.id)).toEqual(["Permanent"]);
    await post(s.h.env, { body: event("email.complained", complained.provider_message_id ?? "") });
    const late = await bounce(complained, "Permanent");
    expect(await s.delivery(complained.id)).toMatchObject({ status: "complained", bounce_type: null });
    // Nor on the complainer: the complaint stays what keeps the address out, and nothing is reported.
    expect(late.body.data.result).toBe("ignored");
    expect(await s.subscriberStatus(complained.subscriber_id)).toBe("unsubscribed");
    const bounced = (await s.h.t.call("GET", `${s.h.t.ws}/events?type=subscriber.bounced`)).body.data as { data: { object: { id: string } } }[];
    expect(bounced.map((e) => e.data.object.id)).not.toContain(complained.subscriber_id);
    // Even after the API brought the complainer back: the bounce is for the message complained about.
    await s.h.t.call("PATCH", `${s.h.t.ws}/subscribers/${complained.subscriber_id}`, { body: { status: "active" } });
    expect((await bounce(complained, "Permanent")).body.data.result).toBe("ignored");
    expect(await s.subscriberStatus(complained.subscriber_id)).toBe("active");
  });

  it("finds a delivery whose message id was never learnt by its delivery_id tag, and learns the id", async () => {
    const s = await sentCampaign(2);
    const [a, b] = s.deliveries as [Delivery, Delivery];
    // As a batch accepted in a request whose answer was lost leaves them: sent, no message id.
    await env.DB.prepare("UPDATE deliveries SET provider_message_id = NULL WHERE id IN (?, ?)").bind(a.id, b.id).run();
    const bounced = await post(s.h.env, {
      body: event("email.bounced", "re_learnt_a", { bounce: { type: "Permanent" }, tags: [{ name: "delivery_id", value: a.id }] }),
    });
    expect(bounced.body.data.result).toBe("applied");
    expect(await s.delivery(a.id)).toMatchObject({ status: "bounced", provider_message_id: "re_learnt_a" });
    expect(await s.subscriberStatus(a.subscriber_id)).toBe("bounced");
    // Later events name the message id alone; the older object form of tags is read too.
    await post(s.h.env, { body: event("email.delivered", "re_learnt_b", { tags: { delivery_id: b.id } }) });
    await post(s.h.env, { body: event("email.opened", "re_learnt_b") });
    expect(await s.delivery(b.id)).toMatchObject({ status: "delivered", provider_message_id: "re_learnt_b", opened_at: expect.any(String) });
    // A tag never moves an id a delivery already has, nor claims an id another delivery has.
    await post(s.h.env, { body: event("email.complained", "re_other", { tags: [{ name: "delivery_id", value: b.id }] }) });
    expect(await s.delivery(b.id)).toMatchObject({ status: "delivered", provider_message_id: "re_learnt_b" });
  });

  it("a report that comes before its request's answer is 409 delivery_in_flight, changes nothing, and is applied when Resend sends it again", async () => {
    const s = await sentCampaign(2);
    const [a, b] = s.deliveries as [Delivery, Delivery];
    // As a request Resend took leaves its deliveries until its answer is recorded: queued, asked, no message id.
    await env.DB.prepare("UPDATE deliveries SET status = 'queued', provider_message_id = NULL, asked_seq = 1 WHERE id = ?").bind(a.id).run();
    const before = await snapshot();
    const id = "msg_in_flight_1";
    const complaint = event("email.complained", "re_in_flight_a", { tags: [{ name: "delivery_id", value: a.id }] });
    const early = await post(s.h.env, { id, body: complaint });
    expect(early.status, early.text).toBe(409);
    expect(early.body.error.code).toBe("delivery_in_flight");
    expect(early.headers.get("retry-after")).toBe("5");
    expect(await snapshot()).toEqual(before);
    // The answer is recorded; Resend sends the event again under its svix-id.
    await env.DB.prepare("UPDATE deliveries SET status = 'sent', provider_message_id = 're_in_flight_a' WHERE id = ?").bind(a.id).run();
    const again = await post(s.h.env, { id, body: complaint });
    expect(again.body.data.result).toBe("applied");
    expect(await s.delivery(a.id)).toMatchObject({ status: "complained" });
    expect(await s.subscriberStatus(a.subscriber_id)).toBe("unsubscribed");
    // A delivery never in a request is no message Resend took: ignored, as an unknown id.
    await env.DB.prepare("UPDATE deliveries SET status = 'queued', provider_message_id = NULL, asked_seq = 0 WHERE id = ?").bind(b.id).run();
    const never = await post(s.h.env, { body: event("email.bounced", "re_never", { bounce: { type: "Permanent" }, tags: [{ name: "delivery_id", value: b.id }] }) });
    expect(never.status).toBe(200);
    expect(never.body.data.result).toBe("ignored");
  });

  it("a report of a message recorded outcome_unknown proves it was sent: the delivery takes the report's status, and the counts follow", async () => {
    const s = await sentCampaign(2);
    const [a, b] = s.deliveries as [Delivery, Delivery];
    // As a send that could not tell whether Resend took their request leaves them: failed, no message id.
    const unknown = JSON.stringify({ code: "outcome_unknown", message: "It was in a request to the provider that may have taken it" });
    await env.DB.prepare("UPDATE deliveries SET status = 'failed', error = ?, provider_message_id = NULL WHERE id IN (?, ?)").bind(unknown, a.id, b.id).run();
    await env.DB.prepare("UPDATE operations SET failed = 2, delivered = 0 WHERE campaign_id = ?").bind(s.campaign.id).run();

    const delivered = await post(s.h.env, { body: event("email.delivered", "re_late_a", { tags: [{ name: "delivery_id", value: a.id }] }) });
    expect(delivered.body.data.result).toBe("applied");
    expect(await s.delivery(a.id)).toMatchObject({ status: "delivered", provider_message_id: "re_late_a", error: null, attempts: 1 });
    await post(s.h.env, { body: event("email.bounced", "re_late_b", { bounce: { type: "Permanent" }, tags: [{ name: "delivery_id", value: b.id }] }) });
    expect(await s.delivery(b.id)).toMatchObject({ status: "bounced", provider_message_id: "re_late_b", error: null });
    expect((await s.stats()).data).toMatchObject({ delivered: 1, bounced: 1, failed: 0 });
    const operation = (await env.DB.prepare("SELECT failed, delivered FROM operations WHERE campaign_id = ?").bind(s.campaign.id).first()) as { failed: number; delivered: number };
    expect(operation).toEqual({ failed: 0, delivered: 2 });
    // A delivery that failed for a reason of its own is not moved by a report.
    await env.DB.prepare("UPDATE deliveries SET status = 'failed', error = ? WHERE id = ?").bind(JSON.stringify({ code: "resend_validation_error", message: "no" }), a.id).run();
    expect((await post(s.h.env, { body: event("email.delivered", "re_late_a") })).body.data.result).toBe("ignored");
    expect(await s.delivery(a.id)).toMatchObject({ status: "failed" });
  });

  it("a complaint from an address that left through its unsubscribe link keeps it from coming back through that link", async () => {
    const s = await sentCampaign(1);
    const d = s.deliveries[0] as Delivery;
    // The link of the message as sent (the preview renders it with the same code and token).
    const link = await previewLinkPath(s.h.t, s.campaign.id, d.subscriber_id);
    const page = (path: string) => app.fetch(new Request(`https://api.example.test${path}`, { method: "POST" }), s.h.env, createExecutionContext());
    expect((await page(link)).status).toBe(200);
    expect(await s.subscriberStatus(d.subscriber_id)).toBe("unsubscribed");
    await post(s.h.env, { body: event("email.complained", d.provider_message_id ?? "") });
    expect((await page(`${link}/resubscribe`)).status).toBe(409);
    expect(await s.subscriberStatus(d.subscriber_id)).toBe("unsubscribed");
  });
});

describe("receipts", () => {
  it("the sweeper drops receipts a week old, and keeps newer ones", async () => {
    const now = Date.now();
    const insert = env.DB.prepare("INSERT INTO webhook_receipts (svix_id, event_type, received_at) VALUES (?, 'email.delivered', ?)");
    await env.DB.batch([insert.bind("msg_old", now - RECEIPT_TTL_MS - 1), insert.bind("msg_recent", now - RECEIPT_TTL_MS + 60_000)]);
    await sweepWebhooks(env, now);
    const left = await env.DB.prepare("SELECT svix_id FROM webhook_receipts ORDER BY svix_id").all<{ svix_id: string }>();
    expect(left.results.map((r) => r.svix_id)).toEqual(["msg_recent"]);
  });
});

describe("POST /webhooks/resend: outgoing events (outbox)", () => {
  const eventsOf = async (s: Awaited<ReturnType<typeof sentCampaign>>) =>
    ((await s.h.t.call("GET", `${s.h.t.ws}/events?limit=100`)).body.data as { type: string; data: { object: { id: string; status: string } } }[])
      .filter((e) => e.type.startsWith("delivery.") || e.type === "subscriber.bounced" || e.type === "subscriber.unsubscribed")
      .map((e) => [e.type, e.data.object.id, e.data.object.status]);

  it("hands the events it writes to the webhook queue when an endpoint takes them", async () => {
    const s = await sentCampaign(1);
    await createEndpoint(s.h.t, { events: ["delivery.bounced", "subscriber.bounced"] });
    const [hard] = s.deliveries as [Delivery];
    const queue = new CapturedQueue();
    const bounce = event("email.bounced", hard.provider_message_id ?? "", { bounce: { type: "Permanent" } });
    expect((await post({ ...s.h.env, WEBHOOK_QUEUE: queue.asBinding() }, { body: bounce })).status).toBe(200);
    const written = (await s.h.t.call("GET", `${s.h.t.ws}/events?limit=2`)).body.data as { id: string; type: string }[];
    expect(written.map((e) => e.type).sort()).toEqual(["delivery.bounced", "subscriber.bounced"]);
    await vi.waitFor(() => expect(queue.messages).toHaveLength(2));
    expect(queue.messages.map((m) => m.body).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual(
      written.map((e) => ({ type: "dispatch", event_id: e.id })).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    );
  });

  it("a permanent bounce writes delivery.bounced and subscriber.bounced with the rows as they became; a duplicate writes none", async () => {
    const s = await sentCampaign(2);
    const [hard, soft] = s.deliveries as [Delivery, Delivery];
    const bounce = event("email.bounced", hard.provider_message_id ?? "", { bounce: { type: "Permanent" } });
    await post(s.h.env, { id: "msg_hard", body: bounce });
    await post(s.h.env, { id: "msg_hard", body: bounce });
    await post(s.h.env, { body: event("email.bounced", soft.provider_message_id ?? "", { bounce: { type: "Transient" } }) });
    await post(s.h.env, { body: event("email.delivered", hard.provider_message_id ?? "") });
    expect((await eventsOf(s)).sort()).toEqual(
      [
        ["delivery.bounced", hard.id, "bounced"],
        ["delivery.bounced", soft.id, "bounced"],
        ["subscriber.bounced", hard.subscriber_id, "bounced"],
      ].sort(),
    );
  });

  it("a complaint writes delivery.complained and subscriber.unsubscribed once; for an address already unsubscribed, only the delivery's", async () => {
    const s = await sentCampaign(2);
    const [first, second] = s.deliveries as [Delivery, Delivery];
    await s.h.t.call("PATCH", `${s.h.t.ws}/subscribers/${second.subscriber_id}`, { body: { status: "unsubscribed" } });
    const before = (await eventsOf(s)).length;
    await post(s.h.env, { id: "msg_c1", body: event("email.complained", first.provider_message_id ?? "") });
    await post(s.h.env, { id: "msg_c1", body: event("email.complained", first.provider_message_id ?? "") });
    await post(s.h.env, { body: event("email.complained", second.provider_message_id ?? "") });
    // Newest first: the events these complaints wrote are the first ones listed.
    expect((await eventsOf(s)).slice(0, -before || undefined).sort()).toEqual(
      [
        ["delivery.complained", first.id, "complained"],
        ["delivery.complained", second.id, "complained"],
        ["subscriber.unsubscribed", first.subscriber_id, "unsubscribed"],
      ].sort(),
    );
  });
});

describe("GET /campaigns/{id}/stats", () => {
  it("counts every delivery state, opens, clicks and unsubscribes exactly", async () => {
    const s = await sentCampaign(6);
    const [a, b, c, d] = s.deliveries as [Delivery, Delivery, Delivery, Delivery];
    await post(s.h.env, { body: event("email.delivered", a.provider_message_id ?? "") });
    await post(s.h.env, { body: event("email.delivered", b.provider_message_id ?? "") });
    await post(s.h.env, { body: event("email.opened", b.provider_message_id ?? "") });
    await post(s.h.env, { body: event("email.clicked", b.provider_message_id ?? "") });
    await post(s.h.env, { body: event("email.bounced", c.provider_message_id ?? "", { bounce: { type: "Permanent" } }) });
    await post(s.h.env, { body: event("email.complained", d.provider_message_id ?? "") });
    await env.DB.prepare("UPDATE deliveries SET unsubscribed_at = 1 WHERE id = ?").bind(a.id).run();

    const res = await s.stats();
    expect(res.data).toEqual({
      object: "campaign_stats",
      campaign_id: s.campaign.id,
      recipients: 6,
      queued: 0,
      sent: 2,
      delivered: 2,
      bounced: 1,
      complained: 1,
      failed: 0,
      opened: 1,
      clicked: 1,
      unsubscribed: 1,
    });
  });

  it("zero for a campaign never sent; 404 for one in another workspace", async () => {
    const s = await sentCampaign(1);
    const draft = await createCampaign(s.h.t);
    const res = await s.h.t.call("GET", `${s.h.t.ws}/campaigns/${draft.id}/stats`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ recipients: 0, sent: 0, delivered: 0, opened: 0 });
    const other = await harness("live");
    expectError(await other.t.call("GET", `${other.t.ws}/campaigns/${s.campaign.id}/stats`), 404, "not_found");
  });
});
