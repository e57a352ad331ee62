import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { readUnsubscribeToken, unsubscribeToken } from "../src/consent/unsubscribe-token";
import { signerFor } from "../src/lib/signing";
import { secondsLeftInWindow } from "../src/middleware/auth";
import { type ApiResponse, call, createCredential, tenant } from "./helpers";
import { createCampaign, createNewsletter, previewLinkPath, sendCampaign, type Tenant, waitForOperation } from "./send.fixtures";

// The unsubscribe link of every message: RFC 8058 one-click POSTs from mailbox providers, and the
// hosted page for people. The token is the only authority; nothing reveals more than it names.

afterEach(() => {
  vi.restoreAllMocks();
});

const ONE_CLICK = { "content-type": "application/x-www-form-urlencoded" };
let ipCounter = 0;
/** Each test speaks from its own address, so the per-IP limit (40 a minute in tests) is its own. */
const fromIp = () => ({ "cf-connecting-ip": `198.51.100.${++ipCounter % 250}` });

const page = (method: string, path: string, options: { raw?: BodyInit; headers?: Record<string, string> } = {}) =>
  call(method, path, { ...options, headers: { ...fromIp(), ...options.headers } });

const oneClick = (token: string, extra: Record<string, string> = {}) =>
  page("POST", `/u/${token}`, { raw: "List-Unsubscribe=One-Click", headers: { ...ONE_CLICK, ...extra } });

/** A subscriber who received a sent campaign: the situation every real link comes from. */
const recipient = async (t: Tenant, options: { email?: string; status?: string; newsletterName?: string } = {}) => {
  const created = await t.call("POST", `${t.ws}/subscribers`, {
    body: { email: options.email ?? "ada.lovelace@example.com", name: "Ada", ...(options.status && { status: options.status }) },
  });
  expect(created.status, created.text).toBe(201);
  const newsletter = await createNewsletter(t, { name: options.newsletterName ?? "The Weekly Byte" });
  const campaign = await createCampaign(t, { newsletter_id: newsletter.id });
  const operation = await sendCampaign(t, campaign.id);
  await waitForOperation(t, operation.id);
  const subscriberId = created.body.data.id as string;
  const token = await unsubscribeToken(signerFor(env), { subscriberId, campaignId: campaign.id });
  return { subscriberId, campaignId: campaign.id, token };
};

const subscriberOf = async (t: Tenant, id: string) => (await t.call("GET", `${t.ws}/subscribers/${id}`)).body.data;

const delivery = (campaignId: string, subscriberId: string) =>
  env.DB.prepare("select unsubscribed_at from deliveries where campaign_id = ? and subscriber_id = ?")
    .bind(campaignId, subscriberId)
    .first<{ unsubscribed_at: number | null }>();

const expectPageHeaders = (res: ApiResponse) => {
  expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
  expect(res.headers.get("content-security-policy")).toBe(
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  );
  expect(res.headers.get("cache-control")).toBe("no-store");
  expect(res.headers.get("referrer-policy")).toBe("no-referrer");
  expect(res.headers.get("x-robots-tag")).toBe("noindex");
  expect(res.headers.get("x-content-type-options")).toBe("nosniff");
};

/** Self-contained: no script, no external resource of any kind. */
const expectSelfContained = (html: string) => {
  expect(html).not.toMatch(/<script|<link|<img|<iframe|@import|url\(|src=/i);
  expect(html).toMatch(/<meta name="viewport" content="width=device-width,initial-scale=1">/);
};

describe("GET /u/{token}", () => {
  it("shows the newsletter and the masked address with one button, and changes nothing", async () => {
    const t = await tenant();
    const r = await recipient(t);
    const before = await subscriberOf(t, r.subscriberId);
    const res = await page("GET", `/u/${r.token}`);
    expect(res.status).toBe(200);
    expectPageHeaders(res);
    expectSelfContained(res.text);
    expect(res.text).toContain("The Weekly Byte");
    expect(res.text).toContain('<bdi class="address">a***@example.com</bdi>');
    expect(res.text).not.toContain("ada.lovelace");
    expect(res.text.match(/<button/g)).toHaveLength(1);
    expect(res.text).toContain(`action="/u/${r.token}"`);
    // Mail scanners follow links: a GET, even repeated, is never a state change.
    await page("GET", `/u/${r.token}`);
    expect(await subscriberOf(t, r.subscriberId)).toEqual(before);
    expect((await delivery(r.campaignId, r.subscriberId))!.unsubscribed_at).toBeNull();
  });

  it("fits a phone whatever the name: long words wrap, and the masked address breaks after its @, not inside a word", async () => {
    const t = await tenant();
    const r = await recipient(t, { newsletterName: "TheExtraordinarilyLongNewsletterNameWithoutAnySpacesWhatsoever_2026Edition" });
    const res = await page("GET", `/u/${r.token}`);
    const style = res.text.match(/<style>([\s\S]*)<\/style>/)?.[1] ?? "";
    expect(style).toMatch(/main\{[^}]*min-width:0;[^}]*overflow-wrap:anywhere/);
    expect(style).not.toContain("break-all");
    expect(res.text).toMatch(/<bdi class="address">a\*\*\*@[^<]+<\/bdi>/);
  });

  it("escapes what it shows", async () => {
    const t = await tenant();
    const r = await recipient(t, { newsletterName: `<img src=x onerror=alert(1)> & "News"` });
    const res = await page("GET", `/u/${r.token}`);
    expect(res.text).toContain("&lt;img src=x onerror=alert(1)&gt; &amp; &quot;News&quot;");
    expect(res.text).not.toContain("<img");
  });

  it("isolates the name: direction controls in it turn nothing after it, and a right-to-left name reads as written", async () => {
    const t = await tenant();
    // An override, a stray PDI before it (which would close the page's own isolate), an isolate never closed, a mark.
    const r = await recipient(t, { newsletterName: "A\u2069\u202Ebc\u2067 \u200Fעברית" });
    const shown = "Abc \u200Fעברית";
    for (const res of [await page("GET", `/u/${r.token}`), await oneClick(r.token)]) {
      expect(res.text).not.toMatch(/[\u202A-\u202E\u2066\u2067]/);
      // Everywhere the name shows, it stands in an isolate of its own, closed before the page's words go on.
      const body = res.text.replace(/<title>[^<]*<\/title>/, "");
      expect(body).not.toContain("\u2069");
      expect(body.split(shown).length - 1).toBe(body.split(`<bdi>${shown}</bdi>`).length - 1);
      expect(body).toContain(`<bdi>${shown}</bdi>`);
      // The title's isolate is the only one: FSI, the name, PDI.
      expect(res.text.match(/<title>([^<]*)<\/title>/)?.[1]).toMatch(new RegExp(`\u2068${shown}\u2069$`));
    }
  });
});

describe("POST /u/{token}", () => {
  it("one-click (RFC 8058): the subscriber is unsubscribed and the delivery records it, in one write; a repeat changes nothing more", async () => {
    const t = await tenant();
    const r = await recipient(t);
    const res = await oneClick(r.token);
    expect(res.status).toBe(200);
    expectPageHeaders(res);
    expectSelfContained(res.text);
    expect(res.text).toContain("You’re unsubscribed");
    expect(res.text).toContain(`action="/u/${r.token}/resubscribe"`);
    const after = await subscriberOf(t, r.subscriberId);
    expect(after.status).toBe("unsubscribed");
    const recorded = (await delivery(r.campaignId, r.subscriberId))!.unsubscribed_at;
    expect(recorded).toBeGreaterThan(0);

    const again = await oneClick(r.token);
    expect(again.status).toBe(200);
    expect(again.text).toBe(res.text);
    expect(await subscriberOf(t, r.subscriberId)).toEqual(after);
    expect((await delivery(r.campaignId, r.subscriberId))!.unsubscribed_at).toBe(recorded);
  });

  it("writes nothing when any part of the write fails: the delivery's unsubscribed_at and the status change together or not at all", async () => {
    const t = await tenant();
    const r = await recipient(t);
    // The subscriber's half of the batch fails (as a D1 error mid-batch would).
    await env.DB.exec("CREATE TRIGGER refuse_status BEFORE UPDATE OF status ON subscribers BEGIN SELECT RAISE(ABORT, 'refused'); END");
    vi.spyOn(console, "error").mockImplementation(() => {});
    const failed = await oneClick(r.token);
    expect(failed.status).toBe(500);
    expect((await delivery(r.campaignId, r.subscriberId))!.unsubscribed_at).toBeNull();
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("active");
    expect((await t.call("GET", `${t.ws}/events?type=subscriber.unsubscribed`)).body.data).toEqual([]);

    await env.DB.exec("DROP TRIGGER refuse_status");
    expect((await oneClick(r.token)).status).toBe(200);
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("unsubscribed");
    expect((await delivery(r.campaignId, r.subscriberId))!.unsubscribed_at).toBeGreaterThan(0);
  });

  it("accepts an empty body, a multipart one-click, one ending in a line break and the page's own form", async () => {
    const t = await tenant();
    const a = await recipient(t, { email: "a@example.com" });
    expect((await page("POST", `/u/${a.token}`)).status).toBe(200);
    expect((await subscriberOf(t, a.subscriberId)).status).toBe("unsubscribed");

    const b = await recipient(t, { email: "b@example.com" });
    const form = new FormData();
    form.set("List-Unsubscribe", "One-Click");
    expect((await page("POST", `/u/${b.token}`, { raw: form })).status).toBe(200);
    expect((await subscriberOf(t, b.subscriberId)).status).toBe("unsubscribed");

    // Multipart as browsers and HTTP libraries encode it: the boundary has upper-case letters (and
    // the media type may too), and the boundary is case-sensitive.
    const upper = await recipient(t, { email: "upper@example.com" });
    const multipart = "--XyZ\r\nContent-Disposition: form-data; name=\"List-Unsubscribe\"\r\n\r\nOne-Click\r\n--XyZ--\r\n";
    const res = await page("POST", `/u/${upper.token}`, { raw: multipart, headers: { "content-type": "Multipart/Form-Data; boundary=XyZ" } });
    expect(res.status, res.text).toBe(200);
    expect((await subscriberOf(t, upper.subscriberId)).status).toBe("unsubscribed");

    // The RFC 8058 body followed by a line break, as some clients send it.
    const crlf = await recipient(t, { email: "crlf@example.com" });
    expect((await page("POST", `/u/${crlf.token}`, { raw: "List-Unsubscribe=One-Click\r\n", headers: ONE_CLICK })).status).toBe(200);
    expect((await subscriberOf(t, crlf.subscriberId)).status).toBe("unsubscribed");

    // The page's form posts exactly what a mailbox provider does.
    const c = await recipient(t, { email: "c@example.com" });
    const shown = await page("GET", `/u/${c.token}`);
    expect(shown.text).toContain('<input type="hidden" name="List-Unsubscribe" value="One-Click">');
    expect((await oneClick(c.token)).status).toBe(200);
    expect((await subscriberOf(t, c.subscriberId)).status).toBe("unsubscribed");
  });

  it("a pending subscriber is unsubscribed too; a bounced one stays bounced", async () => {
    const t = await tenant();
    const pending = await recipient(t, { email: "p@example.com", status: "pending" });
    await oneClick(pending.token);
    expect((await subscriberOf(t, pending.subscriberId)).status).toBe("unsubscribed");

    const bounced = await recipient(t, { email: "b@example.com" });
    await env.DB.prepare("update subscribers set status = 'bounced', status_source = 'bounce' where id = ?").bind(bounced.subscriberId).run();
    const res = await oneClick(bounced.token);
    expect(res.status).toBe(200);
    expect(res.text).toContain("You’re unsubscribed");
    expect(res.text).not.toContain("/resubscribe");
    expect((await subscriberOf(t, bounced.subscriberId)).status).toBe("bounced");
    // Nothing was unsubscribed through this link: its delivery records nothing.
    expect((await delivery(bounced.campaignId, bounced.subscriberId))!.unsubscribed_at).toBeNull();
    // And resubscribing through the link never brings a bounced address back.
    const back = await page("POST", `/u/${bounced.token}/resubscribe`, { raw: "List-Unsubscribe=One-Click", headers: ONE_CLICK });
    expect(back.status).toBe(409);
    expect((await subscriberOf(t, bounced.subscriberId)).status).toBe("bounced");
  });

  it("a token of another campaign records on that campaign's delivery only", async () => {
    const t = await tenant();
    const first = await recipient(t);
    const newsletter = await createNewsletter(t);
    const second = await createCampaign(t, { newsletter_id: newsletter.id });
    await waitForOperation(t, (await sendCampaign(t, second.id)).id);
    const otherToken = await unsubscribeToken(signerFor(env), { subscriberId: first.subscriberId, campaignId: second.id });
    await oneClick(otherToken);
    expect((await delivery(second.id, first.subscriberId))!.unsubscribed_at).toBeGreaterThan(0);
    expect((await delivery(first.campaignId, first.subscriberId))!.unsubscribed_at).toBeNull();
    // The first campaign's link did not unsubscribe them, so it cannot resubscribe them either.
    expect((await page("POST", `/u/${first.token}/resubscribe`)).status).toBe(409);
    expect((await page("POST", `/u/${otherToken}/resubscribe`)).status).toBe(200);
  });

  it("refuses an unexpected content type, a form without the one-click field and a huge body, changing nothing", async () => {
    const t = await tenant();
    const r = await recipient(t);
    const json = await page("POST", `/u/${r.token}`, { raw: '{"unsubscribe":true}', headers: { "content-type": "application/json" } });
    expect(json.status).toBe(415);
    expectPageHeaders(json);
    const wrong = await page("POST", `/u/${r.token}`, { raw: "List-Unsubscribe=Maybe", headers: ONE_CLICK });
    expect((await page("POST", `/u/${r.token}`, { raw: "List-Unsubscribe=One-Clicked", headers: ONE_CLICK })).status).toBe(400);
    expect(wrong.status).toBe(400);
    // Each says what to do where it can be done: these pages have no button of their own.
    expect(json.text).toContain("Open the link in the email again and press the button on its page.");
    expect(wrong.text).toContain("Incomplete request");
    expect(wrong.text).toContain("The form did not say what to do (List-Unsubscribe=One-Click).");
    for (const answer of [json, wrong]) expect(answer.text).not.toMatch(/<form|<button/);
    const huge = await page("POST", `/u/${r.token}`, { raw: `List-Unsubscribe=One-Click&pad=${"x".repeat(1024 * 1024)}`, headers: ONE_CLICK });
    expect(huge.status).toBe(413);
    // The cap is 8 KiB: one byte over is refused, a body of 8 KiB exactly is read.
    const padded = (bytes: number) => `List-Unsubscribe=One-Click&pad=${"x".repeat(bytes - "List-Unsubscribe=One-Click&pad=".length)}`;
    expect((await page("POST", `/u/${r.token}`, { raw: padded(8 * 1024 + 1), headers: ONE_CLICK })).status).toBe(413);
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("active");
    expect((await delivery(r.campaignId, r.subscriberId))!.unsubscribed_at).toBeNull();
    expect((await page("POST", `/u/${r.token}`, { raw: padded(8 * 1024), headers: ONE_CLICK })).status).toBe(200);
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("unsubscribed");
  });
});

describe("POST /u/{token}/resubscribe", () => {
  it("brings back a subscriber who left through this link, once; repeating answers the same", async () => {
    const t = await tenant();
    const r = await recipient(t);
    await oneClick(r.token);
    const res = await page("POST", `/u/${r.token}/resubscribe`, { raw: "List-Unsubscribe=One-Click", headers: ONE_CLICK });
    expect(res.status).toBe(200);
    expectPageHeaders(res);
    expect(res.text).toContain("You’re subscribed again");
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("active");
    const again = await page("POST", `/u/${r.token}/resubscribe`);
    expect(again.status).toBe(200);
    // Nothing changed this time: the page says subscribed, not "again".
    expect(again.text).toContain("You’re subscribed</h1>");
    expect(again.text).not.toContain("subscribed again");
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("active");
    // Someone who never left is told the same, and nothing changes.
    const stayed = await recipient(t, { email: "stayed@example.com" });
    const never = await page("POST", `/u/${stayed.token}/resubscribe`);
    expect(never.status).toBe(200);
    expect(never.text).not.toContain("subscribed again");
    expect((await subscriberOf(t, stayed.subscriberId)).status).toBe("active");
    // The link works again after that: unsubscribe, resubscribe, unsubscribe.
    await oneClick(r.token);
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("unsubscribed");
  });

  it("never brings back an address unsubscribed otherwise (API, complaint)", async () => {
    const t = await tenant();
    const r = await recipient(t);
    await oneClick(r.token);
    // Later a complaint comes in for the same address (the provider feedback sets this).
    await env.DB.prepare("update subscribers set status_source = 'complaint' where id = ?").bind(r.subscriberId).run();
    expect((await page("POST", `/u/${r.token}/resubscribe`)).status).toBe(409);
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("unsubscribed");

    // Left through the link once, then the API brought them back and unsubscribed them again: the
    // API's unsubscribe stands; the old link cannot undo it.
    const viaApi = await recipient(t, { email: "api@example.com" });
    await oneClick(viaApi.token);
    const path = `${t.ws}/subscribers/${viaApi.subscriberId}`;
    expect((await t.call("PATCH", path, { body: { status: "active" } })).status).toBe(200);
    const patched = await t.call("PATCH", path, { body: { status: "unsubscribed" } });
    expect(patched.status).toBe(200);
    const shown = await page("GET", `/u/${viaApi.token}`);
    expect(shown.text).toContain("You’re unsubscribed");
    expect(shown.text).not.toContain("/resubscribe");
    expect((await page("POST", `/u/${viaApi.token}/resubscribe`)).status).toBe(409);
  });

  it("only the link they last left through brings them back: an older link cannot undo a newer unsubscribe", async () => {
    const t = await tenant();
    const x = await recipient(t);
    const newsletter = await createNewsletter(t);
    const second = await createCampaign(t, { newsletter_id: newsletter.id });
    await waitForOperation(t, (await sendCampaign(t, second.id)).id);
    const y = await unsubscribeToken(signerFor(env), { subscriberId: x.subscriberId, campaignId: second.id });
    // Left through X, came back through X, left through Y: X's page no longer offers a way back.
    await oneClick(x.token);
    expect((await page("POST", `/u/${x.token}/resubscribe`)).status).toBe(200);
    await oneClick(y);
    const shown = await page("GET", `/u/${x.token}`);
    expect(shown.text).not.toContain("/resubscribe");
    expect((await page("POST", `/u/${x.token}/resubscribe`)).status).toBe(409);
    expect((await subscriberOf(t, x.subscriberId)).status).toBe("unsubscribed");
    // Y's does; and after coming back through Y and leaving through X again, X's does and Y's not.
    expect((await page("GET", `/u/${y}`)).text).toContain(`action="/u/${y}/resubscribe"`);
    expect((await page("POST", `/u/${y}/resubscribe`)).status).toBe(200);
    await oneClick(x.token);
    expect((await page("POST", `/u/${y}/resubscribe`)).status).toBe(409);
    expect((await page("POST", `/u/${x.token}/resubscribe`)).status).toBe(200);
    // Brought back by the API, then out through Y: the same.
    await oneClick(x.token);
    expect((await t.call("PATCH", `${t.ws}/subscribers/${x.subscriberId}`, { body: { status: "active" } })).status).toBe(200);
    await oneClick(y);
    expect((await page("POST", `/u/${x.token}/resubscribe`)).status).toBe(409);
    expect((await subscriberOf(t, x.subscriberId)).status).toBe("unsubscribed");
  });
});

describe("links rendered outside a send", () => {
  it("a preview's link for a real subscriber unsubscribes them, without promising a way back it cannot give", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "grace@example.com" } });
    const newsletter = await createNewsletter(t, { name: "Previewed" });
    const campaign = await createCampaign(t, { newsletter_id: newsletter.id });
    const path = await previewLinkPath(t, campaign.id, created.body.data.id);
    const shown = await page("GET", path);
    expect(shown.status).toBe(200);
    expect(shown.text).toContain("Unsubscribe from this newsletter?");
    expect(shown.text).not.toContain("subscribe again");
    const done = await oneClick(path.slice(3));
    expect(done.status).toBe(200);
    expect((await subscriberOf(t, created.body.data.id)).status).toBe("unsubscribed");
    // No message of the campaign reached them: neither the confirmation nor the route offers a way back.
    expect(done.text).not.toContain("/resubscribe");
    expect((await page("GET", path)).text).not.toContain("/resubscribe");
    expect((await page("POST", `${path}/resubscribe`, { raw: "List-Unsubscribe=One-Click", headers: ONE_CLICK })).status).toBe(409);
    expect((await subscriberOf(t, created.body.data.id)).status).toBe("unsubscribed");
  });

  it("a credential that may not change consent gets the test link in a real subscriber's preview: a read scope cannot unsubscribe", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "reader@example.com", name: "Rea" } });
    const campaign = await createCampaign(t, { newsletter_id: (await createNewsletter(t, { name: "Read only" })).id, subject: "Hi {{ subscriber.name }}" });
    const reader = await createCredential([t.workspace.id], { scopes: ["campaigns:read"] });
    const asReader = { ws: t.ws, call: (method: string, path: string, options = {}) => call(method, path, { ...options, token: reader.token }) };
    const preview = await asReader.call("POST", `${t.ws}/campaigns/${campaign.id}/preview`, { body: { subscriber_id: created.body.data.id } });
    expect(preview.status).toBe(200);
    // The rest of the message is that subscriber's.
    expect(preview.body.data).toMatchObject({ to: "reader@example.com", subject: "Hi Rea" });
    const path = await previewLinkPath(asReader, campaign.id, created.body.data.id);
    expect(path).toBe(await previewLinkPath(t, campaign.id));
    expect((await oneClick(path.slice(3))).text).toContain("This is a test link");
    expect((await subscriberOf(t, created.body.data.id)).status).toBe("active");
  });

  it("the sample subscriber's link (preview, test send) says it is a test link and changes nothing", async () => {
    const t = await tenant();
    const newsletter = await createNewsletter(t, { name: "Sampled" });
    const campaign = await createCampaign(t, { newsletter_id: newsletter.id });
    const path = await previewLinkPath(t, campaign.id);
    for (const res of [await page("GET", path), await oneClick(path.slice(3)), await page("POST", `${path}/resubscribe`)]) {
      expect(res.status).toBe(200);
      expectPageHeaders(res);
      expectSelfContained(res.text);
      expect(res.text).toContain("This is a test link");
      expect(res.text).toContain("Sampled");
      expect(res.text).not.toContain("<form");
    }
  });
});

describe("links that name nothing", () => {
  it("a forged, truncated, altered or foreign token, or one for a deleted subscriber: the same 404 page, no detail", async () => {
    const t = await tenant();
    const r = await recipient(t);
    const other = signerFor({ DB: env.DB, CURSOR_SECRET: "another-deployment" });
    const foreign = await unsubscribeToken(other, { subscriberId: r.subscriberId, campaignId: r.campaignId });
    const flip = (ch: string) => (ch === "A" ? "B" : "A");
    const altered = `${r.token.slice(0, 10)}${flip(r.token[10]!)}${r.token.slice(11)}`;
    const gone = await recipient(t, { email: "gone@example.com" });
    await env.DB.batch([
      env.DB.prepare("delete from deliveries where subscriber_id = ?").bind(gone.subscriberId),
      env.DB.prepare("delete from subscriber_tags where subscriber_id = ?").bind(gone.subscriberId),
      env.DB.prepare("delete from subscribers where id = ?").bind(gone.subscriberId),
    ]);
    expect(await readUnsubscribeToken(signerFor(env), gone.token)).not.toBeNull();

    const bodies = new Set<string>();
    for (const token of ["x", r.token.slice(0, 40), altered, foreign, `${r.token}A`, "%00", gone.token]) {
      for (const method of ["GET", "POST"]) {
        const res = await page(method, `/u/${token}`, method === "POST" ? { raw: "List-Unsubscribe=One-Click", headers: ONE_CLICK } : {});
        expect(res.status, `${method} ${token}`).toBe(404);
        expectPageHeaders(res);
        bodies.add(res.text);
      }
    }
    expect(bodies.size).toBe(1);
    expect([...bodies][0]).toContain("This link is not valid");
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("active");
  });

  it("answers HEAD and other methods with 405 and Allow", async () => {
    const t = await tenant();
    const r = await recipient(t);
    for (const method of ["HEAD", "PUT", "DELETE", "PATCH"]) {
      const res = await page(method, `/u/${r.token}`);
      expect(res.status, method).toBe(405);
      expect(res.headers.get("allow")).toBe("GET, POST");
    }
    const res = await page("GET", `/u/${r.token}/resubscribe`);
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("active");
  });

  it("limits each client IP (429 page with Retry-After), and other clients are not affected", async () => {
    const t = await tenant();
    const r = await recipient(t);
    const busy = { "cf-connecting-ip": "203.0.113.7" };
    // 40 a minute (the tests' PUBLIC_RATE_LIMITER), in fixed windows: within 81 requests one is
    // limited, however the minute's boundary falls, and none of the first 40 is.
    const statuses: number[] = [];
    let limited: Awaited<ReturnType<typeof call>> | undefined;
    let before = 0;
    for (let i = 0; i < 81 && !limited; i++) {
      before = secondsLeftInWindow(60, Date.now());
      const res = await call("GET", `/u/${r.token}`, { headers: busy });
      statuses.push(res.status);
      if (res.status === 429) limited = res;
    }
    expect(statuses.slice(0, 40).every((s) => s === 200)).toBe(true);
    if (!limited) throw new Error(`no 429 in ${statuses.length} requests`);
    expect(limited.status).toBe(429);
    expectPageHeaders(limited);
    // The seconds left in the window, not the whole period.
    expect([before, secondsLeftInWindow(60, Date.now())]).toContain(Number(limited.headers.get("retry-after")));
    expect((await page("GET", `/u/${r.token}`)).status).toBe(200);
  });

  it("limits the one-click POST too: the request that changes state has the same per-IP budget", async () => {
    const t = await tenant();
    const r = await recipient(t);
    const busy = { "cf-connecting-ip": "203.0.113.8" };
    const statuses: number[] = [];
    for (let i = 0; i < 81 && !statuses.includes(429); i++) statuses.push((await oneClick(r.token, busy)).status);
    expect(statuses.slice(0, 40).every((s) => s === 200), statuses.join(",")).toBe(true);
    expect(statuses).toContain(429);
    // A limited one-click is refused, not queued: the first one (within the budget) did the work.
    expect((await subscriberOf(t, r.subscriberId)).status).toBe("unsubscribed");
    expect((await oneClick(r.token, { "cf-connecting-ip": "203.0.113.9" })).status).toBe(200);
  });
});
