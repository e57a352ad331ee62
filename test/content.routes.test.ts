import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { sha256Hex } from "../src/lib/crypto";
import { ASKS_PER_TRY } from "../src/sending/integrations/resend-requests";
import { expectError, tenant } from "./helpers";
import { mockResend } from "./resend.mock";
import { createCampaign, createNewsletter, createSegment, sendCampaign, type Tenant, waitForOperation } from "./send.fixtures";

const HTML = '<html><body><h1>Hi {{ subscriber.name | default: "there" }}</h1><p>News from {{ newsletter.name }}.</p></body></html>';

afterEach(() => {
  vi.restoreAllMocks();
});

const campaignWith = async (t: Tenant, body: Record<string, unknown>) => {
  const newsletter = await createNewsletter(t, { name: "Weekly", address: "1 Main Street, Springfield" });
  return createCampaign(t, { newsletter_id: newsletter.id, ...body });
};

/** A tenant with a live credential, on a deployment where the resend integration is configured. */
const liveTenant = (): Promise<Tenant> => tenant("Acme", "live", { RESEND_API_KEY: "re_test_key", RESEND_MAX_RPS: "1000" });

describe("campaign content over the API", () => {
  it("stores html and text, and returns them", async () => {
    const t = await tenant();
    const c = await campaignWith(t, { html: HTML, text: "Hi {{ subscriber.name }}" });
    const got = await t.call("GET", `${t.ws}/campaigns/${c.id}`);
    expect(got.body.data).toMatchObject({ html: HTML, text: "Hi {{ subscriber.name }}" });
  });

  it("rejects a bad template naming the field and the line, and saves nothing", async () => {
    const t = await tenant();
    const newsletter = await createNewsletter(t);
    const res = await t.call("POST", `${t.ws}/campaigns`, {
      body: { subject: "Hi", newsletter_id: newsletter.id, html: "<p>a</p>\n\n{{ subscriber.nmae }}" },
    });
    expectError(res, 400, "validation_failed", "html");
    expect(res.body.error.message).toContain('unknown variable "subscriber.nmae" on line 3');
    for (const [field, source, problem] of [
      ["subject", "{% if x %}", "not closed"],
      ["preheader", "{{ subscriber.name | nope }}", "undefined filter: nope"],
      ["text", '{% include "x" %}', "{% include %} is not supported"],
      ["text", "{% for i in (1..99999999) %}{% endfor %}", "a loop may cover at most"],
    ] as const) {
      const bad = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "Hi", newsletter_id: newsletter.id, [field]: source } });
      expectError(bad, 400, "validation_failed", field);
      expect(bad.body.error.message).toContain(problem);
    }
    expect((await t.call("GET", `${t.ws}/campaigns`)).body.data).toEqual([]);
  });

  it("takes templates up to the size limits in a larger body, rejects bigger ones, and keeps 413 elsewhere", async () => {
    const t = await tenant();
    const newsletter = await createNewsletter(t);
    const big = `<p>${"x".repeat(500 * 1024)}</p>`;
    const ok = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "Big", newsletter_id: newsletter.id, html: big } });
    expect(ok.status, ok.text.slice(0, 300)).toBe(201);
    const tooBig = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "Big", newsletter_id: newsletter.id, html: `${big}${"y".repeat(20 * 1024)}` } });
    expectError(tooBig, 400, "validation_failed", "html");
    // Too many characters or too many bytes: the same message, in bytes.
    expect(tooBig.body.error.message).toBe("html must be at most 524288 bytes (512 KiB) of UTF-8");
    // Both templates at their limits, every character escaped as JSON allows (\u003c…): 4.5 MiB, taken.
    const escaped = (n: number) => "\\u003c".repeat(n);
    const raw = `{"subject":"Big","newsletter_id":"${newsletter.id}","html":"${escaped(512 * 1024)}","text":"${escaped(256 * 1024)}"}`;
    const full = await t.call("POST", `${t.ws}/campaigns`, { raw, headers: { "content-type": "application/json" } });
    expect(full.status, full.text.slice(0, 300)).toBe(201);
    expect(full.body.data.html).toHaveLength(512 * 1024);
    const text = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "Big", newsletter_id: newsletter.id, text: "é".repeat(130 * 1024) } });
    expectError(text, 400, "validation_failed", "text");
    expect(text.body.error.message).toContain("262144 bytes");
    const elsewhere = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "a@example.com", name: "x".repeat(70 * 1024) } });
    expectError(elsewhere, 413, "payload_too_large");
  });

  it("edits drafts and scheduled campaigns only", async () => {
    const t = await tenant();
    const c = await campaignWith(t, {});
    const res = await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { html: HTML, subject: "New {{ subscriber.email }}" } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ html: HTML, subject: "New {{ subscriber.email }}", text: null });
    expectError(await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: {} }), 400, "validation_failed");
    expectError(await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { bogus: 1 } }), 400, "validation_failed", "bogus");
    expectError(await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { segment_id: "seg_nothing" } }), 400, "resource_missing", "segment_id");
    // Every template is checked when edited, as when created: nothing broken is saved to fail at send time.
    for (const [field, source] of [["subject", "{% if x %}"], ["preheader", "{{ subscriber.nmae }}"], ["html", "<p>{{ subscriber.nmae }}</p>"], ["text", "{{ nope }}"]] as const) {
      expectError(await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { [field]: source } }), 400, "validation_failed", field);
    }
    // Text that is not UTF-8 (a lone surrogate) is refused in a template as anywhere else.
    expectError(await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { html: "<p>\ud800</p>" } }), 400, "validation_failed", "html");
    const { newsletter_id } = (await t.call("GET", `${t.ws}/campaigns/${c.id}`)).body.data;
    expectError(await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", newsletter_id, text: "a\udc00b" } }), 400, "validation_failed", "text");
    expect((await t.call("GET", `${t.ws}/campaigns/${c.id}`)).body.data).toMatchObject({ html: HTML, subject: "New {{ subscriber.email }}", preheader: null, text: null });
    expectError(await t.call("PATCH", `${t.ws}/campaigns/cmp_0000000000000000000000000A`, { body: { subject: "x" } }), 404, "not_found");
    const segment = await createSegment(t, { tags_any: ["vip"] });
    const withSegment = await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { segment_id: segment.id, preheader: "Pre" } });
    expect(withSegment.body.data).toMatchObject({ segment_id: segment.id, preheader: "Pre", html: HTML });
    // Every value given already there: nothing written, updated_at unmoved.
    await new Promise((r) => setTimeout(r, 5));
    for (const body of [{ preheader: "Pre" }, { segment_id: segment.id, html: HTML, text: null, scheduled_at: null }]) {
      const same = await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body });
      expect(same.status, same.text).toBe(200);
      expect(same.body.data).toEqual(withSegment.body.data);
    }

    const op = await sendCampaign(t, c.id);
    await waitForOperation(t, op.id);
    const late = await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { subject: "Too late" } });
    expectError(late, 409, "campaign_not_editable");
    // Sent, even an edit that would change nothing is refused: the campaign is not editable.
    expectError(await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { preheader: "Pre" } }), 409, "campaign_not_editable");
    expect((await t.call("GET", `${t.ws}/campaigns/${c.id}`)).body.data.subject).toBe("New {{ subscriber.email }}");
  });

  it("edits a scheduled campaign, and moving its time moves its send", async () => {
    const t = await tenant();
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const c = await campaignWith(t, { scheduled_at: at });
    const op = await sendCampaign(t, c.id);
    expect((await t.call("GET", `${t.ws}/campaigns/${c.id}`)).body.data.status).toBe("scheduled");
    const later = new Date(Date.now() + 7_200_000).toISOString();
    const res = await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { subject: "Rescheduled", scheduled_at: later } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ status: "scheduled", subject: "Rescheduled", scheduled_at: later });
    const row = await env.DB.prepare("SELECT status, start_at FROM operations WHERE id = ?").bind(op.id).first<{ status: string; start_at: number }>();
    expect(row).toEqual({ status: "queued", start_at: Date.parse(later) });
    // A time in the past is refused, and nothing moves.
    expectError(await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { scheduled_at: new Date(Date.now() - 60_000).toISOString() } }), 400, "validation_failed", "scheduled_at");
    expect(await env.DB.prepare("SELECT start_at FROM operations WHERE id = ?").bind(op.id).first()).toEqual({ start_at: Date.parse(later) });
    // The same time again: nothing written, neither the campaign nor its queued send.
    const op2 = await env.DB.prepare("SELECT updated_at FROM operations WHERE id = ?").bind(op.id).first<{ updated_at: number }>();
    await new Promise((r) => setTimeout(r, 5));
    const same = await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { scheduled_at: later } });
    expect(same.body.data).toEqual(res.body.data);
    expect(await env.DB.prepare("SELECT updated_at FROM operations WHERE id = ?").bind(op.id).first()).toEqual(op2);
  });

  it("a draft's scheduled_at already past may be sent back unchanged (a no-op), not moved into the past", async () => {
    const t = await tenant();
    const c = await campaignWith(t, { scheduled_at: new Date(Date.now() + 60_000).toISOString() });
    // A minute later, as the database sees it: the time has passed.
    await env.DB.prepare("UPDATE campaigns SET scheduled_at = ? WHERE id = ?").bind(Date.now() - 1_000, c.id).run();
    const current = (await t.call("GET", `${t.ws}/campaigns/${c.id}`)).body.data;
    const same = await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { scheduled_at: current.scheduled_at, subject: current.subject } });
    expect(same.status, same.text).toBe(200);
    expect(same.body.data).toEqual(current);
    // With another change alongside, that change applies.
    const edited = await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { scheduled_at: current.scheduled_at, subject: "New" } });
    expect(edited.body.data).toMatchObject({ subject: "New", scheduled_at: current.scheduled_at });
    const moved = await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { scheduled_at: new Date(Date.now() - 5_000).toISOString() } });
    expectError(moved, 400, "validation_failed", "scheduled_at");
    expect(moved.body.error.message).toBe("scheduled_at must be in the future");
    expectError(await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", newsletter_id: current.newsletter_id, scheduled_at: current.scheduled_at } }), 400, "validation_failed", "scheduled_at");
  });

  it("gives newsletters an address, and edits them", async () => {
    const t = await tenant();
    const n = await createNewsletter(t, { address: "  1 Main Street  " });
    const got = await t.call("GET", `${t.ws}/newsletters/${n.id}`);
    expect(got.body.data.address).toBe("1 Main Street");
    const res = await t.call("PATCH", `${t.ws}/newsletters/${n.id}`, { body: { address: null, name: "Daily", reply_to: "help@example.com" } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ address: null, name: "Daily", reply_to: "help@example.com", from_email: "news@example.com" });
    expectError(await t.call("PATCH", `${t.ws}/newsletters/${n.id}`, { body: {} }), 400, "validation_failed");
    expectError(await t.call("PATCH", `${t.ws}/newsletters/nl_0000000000000000000000000A`, { body: { name: "x" } }), 404, "not_found");
  });
});

describe("preview", () => {
  it("renders for the sample subscriber, with the footer, the headers and the envelope", async () => {
    const t = await tenant();
    const c = await campaignWith(t, { subject: "Hi {{ subscriber.name }}", preheader: "Inside", html: HTML });
    const res = await t.call("POST", `${t.ws}/campaigns/${c.id}/preview`);
    expect(res.status, res.text).toBe(200);
    const p = res.body.data;
    expect(p).toMatchObject({ object: "email_preview", from: '"Acme News" <news@example.com>', reply_to: null, to: "subscriber@example.com", subject: "Hi Sample Subscriber" });
    expect(p.html).toContain("<h1>Hi Sample Subscriber</h1>");
    expect(p.html).toContain(">Inside\n&#847;&zwnj;&nbsp;");
    expect(p.html).toContain("1 Main Street, Springfield");
    expect(p.headers["List-Unsubscribe"]).toMatch(/^<http:\/\/localhost:8787\/u\/[A-Za-z0-9_-]+>$/);
    expect(p.headers["List-Unsubscribe-Post"]).toBe("List-Unsubscribe=One-Click");
    expect(p.text).toContain("Hi Sample Subscriber");
    expect(p.text).toContain(`Unsubscribe: ${p.headers["List-Unsubscribe"].slice(1, -1)}`);
  });

  it("ignores Idempotency-Key: a preview changes nothing, so it is never replayed and its key is never checked", async () => {
    const t = await tenant();
    const c = await campaignWith(t, { subject: "First" });
    const path = `${t.ws}/campaigns/${c.id}/preview`;
    // Under the 8 characters a key needs anywhere else.
    expect((await t.call("POST", path, { headers: { "idempotency-key": "abc" } })).status).toBe(200);
    const key = { headers: { "idempotency-key": "preview-key-0001" } };
    const first = await t.call("POST", path, key);
    expect(first.body.data.subject).toBe("First");
    expect((await t.call("PATCH", `${t.ws}/campaigns/${c.id}`, { body: { subject: "Second" } })).status).toBe(200);
    const again = await t.call("POST", path, key);
    expect(again.status, again.text).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBeNull();
    expect(again.body.data.subject).toBe("Second");
  });

  it("shows the postal address when the template places its own unsubscribe link but not the address", async () => {
    const t = await tenant();
    const c = await campaignWith(t, { html: '<html><body><p>Hi</p><p><a href="{{ unsubscribe_url }}">Leave</a></p></body></html>' });
    const p = (await t.call("POST", `${t.ws}/campaigns/${c.id}/preview`)).body.data;
    expect(p.html).toMatch(/<div [^>]*>\n<p [^>]*>1 Main Street, Springfield<\/p><\/div><\/body><\/html>$/);
    expect(p.text).toMatch(/\n\n-- \n1 Main Street, Springfield$/);
    const printed = await campaignWith(t, { html: '<p>{{ newsletter.address }} <a href="{{ unsubscribe_url }}">Leave</a></p>' });
    const q = (await t.call("POST", `${t.ws}/campaigns/${printed.id}/preview`)).body.data;
    expect(q.html.match(/1 Main Street/g)).toHaveLength(1);
  });

  it("renders for a subscriber of the workspace, escaped in html; another workspace's is a 400", async () => {
    const t = await tenant();
    const c = await campaignWith(t, { html: HTML });
    const sub = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "bob@example.com", name: "<b>Bob</b>" } });
    const res = await t.call("POST", `${t.ws}/campaigns/${c.id}/preview`, { body: { subscriber_id: sub.body.data.id } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.to).toBe("bob@example.com");
    expect(res.body.data.html).toContain("<h1>Hi &lt;b&gt;Bob&lt;/b&gt;</h1>");
    expect(res.body.data.text).toContain("Hi <b>Bob</b>");

    const other = await tenant("Other");
    const theirs = await other.call("POST", `${other.ws}/subscribers`, { body: { email: "eve@example.com" } });
    expectError(await t.call("POST", `${t.ws}/campaigns/${c.id}/preview`, { body: { subscriber_id: theirs.body.data.id } }), 400, "resource_missing", "subscriber_id");
    // An id no subscriber has, or one of no subscriber's shape: the same answer.
    for (const unknown of ["sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T", "whatever"]) {
      expectError(await t.call("POST", `${t.ws}/campaigns/${c.id}/preview`, { body: { subscriber_id: unknown } }), 400, "resource_missing", "subscriber_id");
    }
    expectError(await t.call("POST", `${t.ws}/campaigns/cmp_0000000000000000000000000A/preview`), 404, "not_found");
  });
});

describe("what the service adds to the html", () => {
  it("goes inside the real body element, whatever the template's Liquid says about <body>", async () => {
    const t = await tenant();
    const html = '{% assign open = "<body>" %}<html><body><p>Hi {{ "</body>" }}</p></body></html>{% assign close = "</body>" %}';
    const c = await campaignWith(t, { preheader: "Inside", html });
    const p = (await t.call("POST", `${t.ws}/campaigns/${c.id}/preview`)).body.data;
    expect(p.html).toMatch(/^<html><body><div style="display:none[^"]*">Inside(?:\n?&#847;&zwnj;&nbsp;)+<\/div><p>Hi &lt;\/body&gt;<\/p><div dir="ltr" lang="en" style=/);
    expect(p.html).toMatch(/Unsubscribe<\/a><\/p>\n<p [^>]*>1 Main Street, Springfield<\/p><\/div><\/body><\/html>$/);
  });
});

describe("a template that fits the sample subscriber but not a real one", () => {
  it("is a 400 naming the field in a preview for that subscriber, and in a test send for that newsletter", async () => {
    const t = await tenant();
    // Six names: about 100 characters for the sample subscriber, 1,200 for one named with 200.
    const c = await campaignWith(t, { subject: Array(6).fill("{{ subscriber.name }}").join(" ") });
    const long = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "long@example.com", name: "n".repeat(200) } });
    expect((await t.call("POST", `${t.ws}/campaigns/${c.id}/preview`)).status).toBe(200);
    const res = await t.call("POST", `${t.ws}/campaigns/${c.id}/preview`, { body: { subscriber_id: long.body.data.id } });
    expectError(res, 400, "validation_failed", "subject");
    expect(res.body.error.message).toMatch(/^subject: /);

    const newsletter = await createNewsletter(t, { name: "N".repeat(200) });
    const named = await createCampaign(t, { newsletter_id: newsletter.id, subject: Array(6).fill("{{ newsletter.name }}").join(" ") });
    expectError(await t.call("POST", `${t.ws}/campaigns/${named.id}/test`, { body: { emails: ["a@example.com"] } }), 400, "validation_failed", "subject");
  });
});

describe("test send", () => {
  it("validates the addresses: 1 to 5, each well-formed", async () => {
    const t = await tenant();
    const c = await campaignWith(t, {});
    const url = `${t.ws}/campaigns/${c.id}/test`;
    expectError(await t.call("POST", url, { body: { emails: [] } }), 400, "validation_failed", "emails");
    const six = Array.from({ length: 6 }, (_, i) => `a${i}@example.com`);
    expectError(await t.call("POST", url, { body: { emails: six } }), 400, "validation_failed", "emails");
    expectError(await t.call("POST", url, { body: { emails: ["a@example.com", "nope"] } }), 400, "validation_failed", "emails[1]");
    // A subject the "[Test] " prefix takes over the 998 characters a subject may have: told, nothing sent.
    const long = await campaignWith(t, { subject: `{% for i in (1..99) %}0123456789{% endfor %}abc` });
    expect((await t.call("POST", `${t.ws}/campaigns/${long.id}/preview`, { body: {} })).body.data.subject).toHaveLength(993);
    const over = await t.call("POST", `${t.ws}/campaigns/${long.id}/test`, { body: { emails: ["me@example.com"] } });
    expectError(over, 400, "validation_failed", "subject");
    expect(over.body.error.message).toBe('subject: with the test\'s "[Test] " prefix it renders to 1000 characters, more than a subject\'s 998; shorten it by 2');
    const fits = await campaignWith(t, { subject: `{% for i in (1..99) %}0123456789{% endfor %}a` });
    expect((await t.call("POST", `${t.ws}/campaigns/${fits.id}/test`, { body: { emails: ["me@example.com"] } })).status).toBe(200);
    // One message an address: the same address twice (in any letter case) is a mistake, named.
    const twice = await t.call("POST", url, { body: { emails: ["me@example.com", "you@example.com", " ME@Example.com "] } });
    expectError(twice, 400, "validation_failed", "emails[2]");
    expect(twice.body.error.message).toBe("emails[2] is the same address as emails[0] (case-insensitively)");
    // A string where the list goes: told that, and only that.
    const single = await t.call("POST", url, { body: { emails: "me@example.com" } });
    expectError(single, 400, "validation_failed", "emails");
    expect(single.body.error.details).toHaveLength(1);
    expectError(await t.call("POST", url, { body: { emails: ["a@example.com"], integration_slug: "smtp" } }), 400, "unknown_integration");
  });

  it("delivers through the sandbox with test credentials, and records no delivery", async () => {
    const t = await tenant();
    const c = await campaignWith(t, { html: HTML });
    const res = await t.call("POST", `${t.ws}/campaigns/${c.id}/test`, { body: { emails: ["a@example.com", "b@example.com"] } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.object).toBe("test_send");
    expect(res.body.data.results).toEqual([
      { email: "a@example.com", status: "sent", provider_message_id: expect.stringMatching(/^sandbox_tmsg_[0-9A-Z]{26}$/), error: null },
      { email: "b@example.com", status: "sent", provider_message_id: expect.stringMatching(/^sandbox_tmsg_[0-9A-Z]{26}$/), error: null },
    ]);
    // Each message an id of its own, never a delivery's: a client joining provider ids to deliveries matches none.
    expect(res.body.data.results[0].provider_message_id).not.toBe(res.body.data.results[1].provider_message_id);
    expect((await t.call("GET", `${t.ws}/campaigns/${c.id}/deliveries`)).body.data).toEqual([]);
    expect((await t.call("GET", `${t.ws}/campaigns/${c.id}`)).body.data.status).toBe("draft");
    // This deployment has no RESEND_API_KEY: naming resend is a 400 under a test credential too.
    const named = await t.call("POST", `${t.ws}/campaigns/${c.id}/test`, { body: { emails: ["a@example.com"], integration_slug: "resend" } });
    expectError(named, 400, "unknown_integration", "integration_slug");
  });

  it("sends through Resend with a live credential: [Test] subject, html, text and the unsubscribe headers", async () => {
    const t = await liveTenant();
    const c = await campaignWith(t, { subject: "News for {{ subscriber.name }}", html: HTML });
    const preview = (await t.call("POST", `${t.ws}/campaigns/${c.id}/preview`)).body.data;
    const fetchSpy = vi.spyOn(globalThis, "fetch").mockImplementation(async () => Response.json({ data: [{ id: "re_123" }], errors: [] }));
    const res = await t.call("POST", `${t.ws}/campaigns/${c.id}/test`, {
      body: { emails: ["ada@example.com"], integration_slug: "resend" },
      headers: { "idempotency-key": "test-send-0001" },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.results).toEqual([{ email: "ada@example.com", status: "sent", provider_message_id: "re_123", error: null }]);
    expect(fetchSpy).toHaveBeenCalledTimes(1);
    const [url, init] = fetchSpy.mock.calls[0] ?? [];
    expect(url).toBe("https://api.resend.com/emails/batch");
    // Resend's key follows the request's Idempotency-Key, so a retry that runs again (another isolate,
    // the first still waiting for its slot) asks Resend under the same key and mails nobody twice.
    const providerKey = new Headers(init?.headers).get("idempotency-key");
    expect(providerKey).toBe(`test_send:${(await sha256Hex(`${t.credential.id}\ntest-send-0001`)).slice(0, 32)}`);
    const [sent] = JSON.parse(String(init?.body));
    expect(sent).toMatchObject({
      to: ["ada@example.com"],
      from: preview.from,
      subject: "[Test] News for Sample Subscriber",
      html: preview.html,
      text: preview.text,
      headers: preview.headers,
    });
    // A retry with the same key is answered from the record: no second email.
    const again = await t.call("POST", `${t.ws}/campaigns/${c.id}/test`, {
      body: { emails: ["ada@example.com"], integration_slug: "resend" },
      headers: { "idempotency-key": "test-send-0001" },
    });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.data).toEqual(res.body.data);
    expect(fetchSpy).toHaveBeenCalledTimes(1);
  });

  it("a test send Resend refuses for one address fails that address only: the others go out in a request of their own", async () => {
    const t = await liveTenant();
    const c = await campaignWith(t, { html: HTML });
    const resend = mockResend();
    resend.inject({ kind: "status", status: 422, name: "validation_error", message: "emails[1].to: Invalid `to` field" });
    const request = { body: { emails: ["ada@example.com", "typo@example", "bob@example.com"] }, headers: { "idempotency-key": "test-send-split-1" } };
    const res = await t.call("POST", `${t.ws}/campaigns/${c.id}/test`, request);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.results).toEqual([
      { email: "ada@example.com", status: "sent", provider_message_id: expect.any(String), error: null },
      { email: "typo@example", status: "failed", provider_message_id: null, error: { code: "resend_validation_error", message: expect.stringContaining("Invalid `to` field") } },
      { email: "bob@example.com", status: "sent", provider_message_id: expect.any(String), error: null },
    ]);
    expect(resend.calls.map((call) => [call.status, call.messages.map((m) => m.to[0])])).toEqual([
      [422, ["ada@example.com", "typo@example", "bob@example.com"]],
      [200, ["ada@example.com", "bob@example.com"]],
    ]);
    // The second request has a key of its own, derived from the test send's: a retry meets both again.
    const [first, second] = resend.calls.map((call) => call.key);
    expect(second).toBe(`${first}:1`);
    expect([...resend.copiesPerRecipient().entries()]).toEqual([
      ["ada@example.com", 1],
      ["bob@example.com", 1],
    ]);
  });

  it("a test send refused on a second ask while the first went unanswered reports outcome_unknown, and sends nobody a second copy", async () => {
    const t = await liveTenant();
    const c = await campaignWith(t, { html: HTML });
    const resend = mockResend();
    // The first request is taken and its answer never comes; the ask beside it is refused naming one address.
    resend.inject({ kind: "hang" }, { kind: "status", status: 422, name: "validation_error", message: "emails[0].to: Invalid `to` field" });
    const res = await t.call("POST", `${t.ws}/campaigns/${c.id}/test`, { body: { emails: ["ada@example.com", "bob@example.com"] } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.results.map((r: { status: string; error: { code: string } }) => [r.status, r.error.code])).toEqual([
      ["failed", "outcome_unknown"],
      ["failed", "outcome_unknown"],
    ]);
    // The refusal waits for the first request's answer, which never comes (its timeout).
    expect(resend.calls.map((call) => call.status)).toEqual(["timeout", 422]);
    expect([...resend.copiesPerRecipient().entries()]).toEqual([
      ["ada@example.com", 1],
      ["bob@example.com", 1],
    ]);
  });

  it("answers 503 provider_unavailable, unstored, when Resend does not take a test send, and the retry mails nobody twice", async () => {
    const t = await liveTenant();
    const c = await campaignWith(t, { html: HTML });
    const resend = mockResend();
    // Resend takes the batch, but no answer comes back, try after try.
    resend.inject(...Array.from({ length: 10 }, () => ({ kind: "timeout" as const })));
    const request = { body: { emails: ["ada@example.com", "bob@example.com"] }, headers: { "idempotency-key": "test-send-timeout-1" } };
    const first = await t.call("POST", `${t.ws}/campaigns/${c.id}/test`, request);
    expectError(first, 503, "provider_unavailable");
    expect(first.body.error.type).toBe("api_error");
    expect(Number(first.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // One try (its asks under the key), not a queue step's three: a person is waiting.
    expect(resend.calls.length).toBeGreaterThan(0);
    expect(resend.calls.length).toBeLessThanOrEqual(ASKS_PER_TRY);
    resend.clearFaults();
    // The retry runs again (a 503 is not stored), with the same request under the same key: Resend
    // answers it from its record, and sends nothing again.
    const retry = await t.call("POST", `${t.ws}/campaigns/${c.id}/test`, request);
    expect(retry.status, retry.text).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    expect(retry.body.data.results.map((r: { status: string }) => r.status)).toEqual(["sent", "sent"]);
    expect(new Set(resend.calls.map((call) => call.key)).size).toBe(1);
    expect([...resend.copiesPerRecipient().entries()]).toEqual([
      ["ada@example.com", 1],
      ["bob@example.com", 1],
    ]);
    // Now the answer is final, and stored.
    const replay = await t.call("POST", `${t.ws}/campaigns/${c.id}/test`, request);
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(retry.body);
  });
});
