import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { openToken, sealToken, utf8 } from "../src/consent/signed-link";
import { unsubscribeToken } from "../src/consent/unsubscribe-token";
import { sha256Hex } from "../src/lib/crypto";
import { signerFor } from "../src/lib/signing";
import { type ApiResponse, call, createCredential, expectError, tenant } from "./helpers";
import { mockResend } from "./resend.mock";
import { createCampaign, createNewsletter, type Tenant } from "./send.fixtures";

// Double opt-in: a pending subscriber's confirmation link, mailed from a newsletter (or only made),
// whose page asks and whose button confirms. The token is the only authority, bound to the address.

afterEach(() => {
  vi.restoreAllMocks();
});

let ipCounter = 0;
/** Each test speaks from its own address, so the per-IP limit is its own. */
const fromIp = () => ({ "cf-connecting-ip": `203.0.113.${++ipCounter % 250}` });
const page = (method: string, path: string, options: { raw?: BodyInit; headers?: Record<string, string> } = {}) =>
  call(method, path, { ...options, headers: { ...fromIp(), ...options.headers } });
const FORM = { "content-type": "application/x-www-form-urlencoded" };
const confirm = (path: string, raw = "Confirm=Yes") => page("POST", path, { raw, headers: FORM });

const liveTenant = (): Promise<Tenant> => tenant("Acme", "live", { RESEND_API_KEY: "re_test_key", RESEND_MAX_RPS: "1000" });

const pendingSubscriber = async (t: Tenant, email = "grace.hopper@example.com") => {
  const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email, name: "Grace", status: "pending" } });
  expect(created.status, created.text).toBe(201);
  return created.body.data as { id: string; email: string };
};

const requestLink = async (t: Tenant, subscriberId: string, body: Record<string, unknown>) =>
  t.call("POST", `${t.ws}/subscribers/${subscriberId}/confirmation`, { body });

/** The path (`/c/{token}`) of a pending subscriber's link, made without mailing it. */
const linkPath = async (t: Tenant, subscriberId: string, newsletterId: string) => {
  const res = await requestLink(t, subscriberId, { newsletter_id: newsletterId, send: false });
  expect(res.status, res.text).toBe(200);
  return new URL(res.body.data.confirmation_url).pathname;
};

const statusOf = async (t: Tenant, id: string) => (await t.call("GET", `${t.ws}/subscribers/${id}`)).body.data.status as string;
const updatedEvents = async (t: Tenant) => (await t.call("GET", `${t.ws}/events?type=subscriber.updated`)).body.data as unknown[];

const expectPage = (res: ApiResponse, status: number) => {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
  expect(res.headers.get("content-security-policy")).toBe("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'");
  expect(res.headers.get("cache-control")).toBe("no-store");
  expect(res.text).not.toMatch(/<script|<link|<img|src=/i);
};

describe("POST /subscribers/{subscriber_id}/confirmation", () => {
  it("makes the link without mailing it (send: false), for a pending subscriber only", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t, { name: "The Weekly Byte" });
    const sub = await pendingSubscriber(t);
    const res = await requestLink(t, sub.id, { newsletter_id: nl.id, send: false });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({
      object: "subscriber_confirmation",
      subscriber_id: sub.id,
      newsletter_id: nl.id,
      email: sub.email,
      confirmation_url: expect.stringMatching(/^http:\/\/localhost:8787\/c\/[A-Za-z0-9_-]+$/),
      result: null,
    });

    const active = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "active@example.com" } });
    const refused = await requestLink(t, active.body.data.id, { newsletter_id: nl.id });
    expectError(refused, 409, "subscriber_not_pending");
    expect(refused.body.error.message).toBe(`Subscriber ${active.body.data.id} is active: only a pending subscriber is asked to confirm`);
    expectError(await requestLink(t, "sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T", { newsletter_id: nl.id }), 404, "not_found", "subscriber_id");
    const other = await tenant("Other");
    const foreign = await createNewsletter(other);
    expectError(await requestLink(t, sub.id, { newsletter_id: foreign.id }), 400, "resource_missing", "newsletter_id");
    expectError(await requestLink(t, sub.id, {}), 400, "validation_failed", "newsletter_id");
    expectError(await requestLink(t, sub.id, { newsletter_id: nl.id, extra: 1 }), 400, "validation_failed", "extra");
    for (const send of [true, false]) {
      expectError(await requestLink(t, sub.id, { newsletter_id: nl.id, send, integration_slug: "postmark" }), 400, "unknown_integration", "integration_slug");
    }
    // Another workspace's subscriber is not found either.
    expectError(await requestLink(other, sub.id, { newsletter_id: foreign.id }), 404, "not_found");
  });

  it("a live deployment with no integration configured can make the link, but not mail it", async () => {
    const t = await tenant("Acme", "live");
    const nl = await createNewsletter(t);
    const sub = await pendingSubscriber(t);
    expect((await requestLink(t, sub.id, { newsletter_id: nl.id, send: false })).body.data.result).toBeNull();
    expectError(await requestLink(t, sub.id, { newsletter_id: nl.id }), 400, "integration_not_configured", "integration_slug");
    expectError(await requestLink(t, sub.id, { newsletter_id: nl.id, send: false, integration_slug: "resend" }), 400, "unknown_integration", "integration_slug");
  });

  it("needs subscribers:write", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const sub = await pendingSubscriber(t);
    const reader = await createCredential([t.workspace.id], { scopes: ["subscribers:read"] });
    const res = await call("POST", `${t.ws}/subscribers/${sub.id}/confirmation`, { token: reader.token, body: { newsletter_id: nl.id } });
    expectError(res, 403, "insufficient_scope");
  });

  it("a test credential mails it through the sandbox", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const sub = await pendingSubscriber(t);
    const fetchSpy = vi.spyOn(globalThis, "fetch");
    const res = await requestLink(t, sub.id, { newsletter_id: nl.id });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.result).toEqual({ status: "sent", provider_message_id: expect.any(String), error: null });
    expect(fetchSpy).not.toHaveBeenCalled();
  });

  it("a live credential mails it through Resend from the newsletter's sender, once per Idempotency-Key", async () => {
    const t = await liveTenant();
    const nl = await createNewsletter(t, { name: "The Weekly Byte", from_name: "Byte News", from_email: "news@byte.example" });
    const sub = await pendingSubscriber(t);
    const resend = mockResend();
    resend.inject({ kind: "status", status: 500, name: "internal_server_error" });
    const headers = { "idempotency-key": "confirm-grace-0001" };
    const first = await t.call("POST", `${t.ws}/subscribers/${sub.id}/confirmation`, { body: { newsletter_id: nl.id }, headers });
    expectError(first, 503, "provider_unavailable");
    expect(first.headers.get("retry-after")).toMatch(/^\d+$/);
    const res = await t.call("POST", `${t.ws}/subscribers/${sub.id}/confirmation`, { body: { newsletter_id: nl.id }, headers });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.result).toEqual({ status: "sent", provider_message_id: resend.received[0]?.id, error: null });
    const replay = await t.call("POST", `${t.ws}/subscribers/${sub.id}/confirmation`, { body: { newsletter_id: nl.id }, headers });
    expect(replay.text).toBe(res.text);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");

    // Both requests asked under one provider key; one message went out.
    expect(new Set(resend.calls.map((c) => c.key)).size).toBe(1);
    expect(resend.received).toHaveLength(1);
    const [mail] = resend.received;
    expect(mail).toMatchObject({ from: '"Byte News" <news@byte.example>', to: [sub.email], subject: "Confirm your subscription to The Weekly Byte" });
    expect(mail?.html).toContain(`href="${res.body.data.confirmation_url}"`);
    expect(mail?.text).toContain(res.body.data.confirmation_url);
    expect(await statusOf(t, sub.id)).toBe("pending");
  });
});

describe("the confirmation mail's words", () => {
  it("names the newsletter as the footer and pages do: no direction controls, isolated in html", async () => {
    const t = await liveTenant();
    const nl = await createNewsletter(t, { name: "Acme \u202EtseigiD" });
    const sub = await pendingSubscriber(t);
    const resend = mockResend();
    const res = await t.call("POST", `${t.ws}/subscribers/${sub.id}/confirmation`, { body: { newsletter_id: nl.id } });
    expect(res.status, res.text).toBe(200);
    const [mail] = resend.received;
    expect(mail?.subject).toBe("Confirm your subscription to Acme tseigiD");
    expect(mail?.html).toContain("Press the button to start receiving <bdi>Acme tseigiD</bdi>.");
    expect(mail?.text).toMatch(/^Confirm your subscription to Acme tseigiD\n/);
    expect(JSON.stringify(mail)).not.toContain("\u202E");
  });
});

describe("the confirmation link", () => {
  it("GET asks, with the newsletter and the masked address, and changes nothing; POST confirms once, with one event", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t, { name: "The Weekly Byte" });
    const sub = await pendingSubscriber(t);
    const path = await linkPath(t, sub.id, nl.id);

    const asked = await page("GET", path);
    expectPage(asked, 200);
    expect(asked.text).toContain("The Weekly Byte");
    expect(asked.text).toContain('<bdi class="address">g***@example.com</bdi>');
    expect(asked.text).not.toContain("grace.hopper");
    expect(asked.text.match(/<button/g)).toHaveLength(1);
    expect(asked.text).toContain(`action="${path}"`);
    expect(asked.text).toContain('name="Confirm" value="Yes"');
    await page("GET", path);
    expect(await statusOf(t, sub.id)).toBe("pending");
    expect(await updatedEvents(t)).toHaveLength(0);

    const confirmed = await confirm(path);
    expectPage(confirmed, 200);
    expect(confirmed.text).toContain("Your subscription is confirmed");
    expect(await statusOf(t, sub.id)).toBe("active");
    expect(await updatedEvents(t)).toEqual([expect.objectContaining({ type: "subscriber.updated", data: { object: expect.objectContaining({ id: sub.id, status: "active" }) } })]);

    // Again (a double press, the page reloaded): the same answer in other words, nothing more.
    const again = await confirm(path);
    expectPage(again, 200);
    expect(again.text).toContain("You’re subscribed");
    expect((await page("GET", path)).text).toContain("You’re subscribed");
    expect(await updatedEvents(t)).toHaveLength(1);
  });

  it("an empty body confirms too; any other body changes nothing", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const sub = await pendingSubscriber(t);
    const path = await linkPath(t, sub.id, nl.id);
    expectPage(await confirm(path, "List-Unsubscribe=One-Click"), 400);
    expectPage(await page("POST", path, { raw: "{}", headers: { "content-type": "application/json" } }), 415);
    expectPage(await confirm(path, `Confirm=${"x".repeat(20_000)}`), 413);
    // The cap is 8 KiB, as on the unsubscribe pages: one byte over is refused unread, 8 KiB is read (and is no confirmation).
    expectPage(await confirm(path, `Confirm=${"x".repeat(8 * 1024 + 1 - "Confirm=".length)}`), 413);
    expectPage(await confirm(path, `Confirm=${"x".repeat(8 * 1024 - "Confirm=".length)}`), 400);
    expect(await statusOf(t, sub.id)).toBe("pending");
    expectPage(await page("POST", path), 200);
    expect(await statusOf(t, sub.id)).toBe("active");
  });

  it("brings back nobody who unsubscribed or bounced since it was made", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    for (const status of ["unsubscribed", "bounced"]) {
      const sub = await pendingSubscriber(t, `${status}@example.com`);
      const path = await linkPath(t, sub.id, nl.id);
      expect((await t.call("PATCH", `${t.ws}/subscribers/${sub.id}`, { body: { status } })).status).toBe(200);
      expectPage(await page("GET", path), 409);
      const res = await confirm(path);
      expectPage(res, 409);
      expect(res.text).toContain("can’t confirm");
      expect(await statusOf(t, sub.id)).toBe(status);
    }
  });

  it("is invalid once altered, forged, for another address than the subscriber's now, or made for unsubscribing", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const sub = await pendingSubscriber(t);
    const path = await linkPath(t, sub.id, nl.id);
    const token = path.slice("/c/".length);
    const flipped = `${token.slice(0, 10)}${token[10] === "A" ? "B" : "A"}${token.slice(11)}`;
    const campaign = await createCampaign(t, { newsletter_id: nl.id });
    const unsubscribe = await unsubscribeToken(signerFor(env), { subscriberId: sub.id, campaignId: campaign.id });
    for (const bad of [flipped, token.slice(0, -1), `${token}x`, "x", unsubscribe]) {
      const res = await confirm(`/c/${bad}`);
      expectPage(res, 404);
      expect(res.text).toContain("This link is not valid");
    }
    // The subscriber's address changes: a link mailed to the old one confirms nothing.
    expect((await t.call("PATCH", `${t.ws}/subscribers/${sub.id}`, { body: { email: "grace@navy.example" } })).status).toBe(200);
    expectPage(await page("GET", path), 404);
    expectPage(await confirm(path), 404);
    expect(await statusOf(t, sub.id)).toBe("pending");
    // A new link, for the new address, works.
    expectPage(await confirm(await linkPath(t, sub.id, nl.id)), 200);
    expect(await statusOf(t, sub.id)).toBe("active");
  });

  it("carries a keyed digest of the address, so a link lets nobody test guesses of it; links made with the unkeyed one still confirm", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const sub = await pendingSubscriber(t, "Grace.Hopper@Example.com");
    const token = (await linkPath(t, sub.id, nl.id)).slice("/c/".length);
    const [, , digest] = utf8.decode(openToken(token)!.payload).split(" ");
    const unkeyed = (await sha256Hex("grace.hopper@example.com")).slice(0, 16);
    expect(digest).toHaveLength(22);
    expect(digest).not.toBe(unkeyed);
    // The deployment then signs with a CURSOR_SECRET of its own: the link and its digest, made under the service's key, still hold.
    const rotated = await call("GET", `/c/${token}`, { headers: fromIp(), env: { CURSOR_SECRET: "k".repeat(48) } });
    expectPage(rotated, 200);
    expect(rotated.text).toContain("Confirm");
    // A link mailed before the digest was keyed: the same layout, the address's SHA-256.
    const older = await sealToken(
      signerFor(env),
      "confirm",
      new TextEncoder().encode(`${sub.id} ${nl.id} ${unkeyed}`),
      `${sub.id}:${nl.id}:${unkeyed}`,
    );
    expectPage(await page("GET", `/c/${older}`), 200);
    expectPage(await confirm(`/c/${older}`), 200);
    expect(await statusOf(t, sub.id)).toBe("active");
  });

  it("answers other methods with 405 and Allow, and never logs the token", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const sub = await pendingSubscriber(t);
    const path = await linkPath(t, sub.id, nl.id);
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)));
    for (const method of ["HEAD", "PUT", "DELETE"]) {
      const res = await page(method, path);
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("GET, POST");
    }
    await page("GET", `/v1${path}`);
    // A method no route answers names no route (as on the API), whatever the path.
    expect(lines.map((line) => JSON.parse(line)).map((l) => [l.route, l.path])).toEqual([
      [null, "/c/{token}"],
      [null, "/c/{token}"],
      [null, "/c/{token}"],
      ["GET /c/{token}", "/c/{token}"],
    ]);
    expect(lines.join("\n")).not.toContain(path.slice(3));
  });
});
