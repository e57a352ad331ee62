import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { call, createCredential, expectError, tenant } from "./helpers";
import { createCampaign, createNewsletter, createSegment, waitForOperation } from "./send.fixtures";

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe("campaigns", () => {
  it("creates a draft with every field present, and retrieves it", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const res = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "Hello", newsletter_id: nl.id } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^cmp_[0-9A-Z]{26}$/),
      object: "campaign",
      subject: "Hello",
      preheader: null,
      html: null,
      text: null,
      status: "draft",
      newsletter_id: nl.id,
      segment_id: null,
      scheduled_at: null,
      sent_at: null,
      created_at: expect.stringMatching(ISO_MS),
      updated_at: expect.stringMatching(ISO_MS),
    });
    const got = await t.call("GET", `${t.ws}/campaigns/${res.body.data.id}`);
    expect(got.status).toBe(200);
    expect(got.body.data).toEqual(res.body.data);

    const seg = await createSegment(t, { tags_any: ["beta"] });
    const when = new Date(Date.now() + 3600_000);
    const full = await t.call("POST", `${t.ws}/campaigns`, {
      body: { subject: "Later", newsletter_id: nl.id, segment_id: seg.id, preheader: "Soon", scheduled_at: when.toISOString() },
    });
    expect(full.status, full.text).toBe(201);
    expect(full.body.data).toMatchObject({ segment_id: seg.id, preheader: "Soon", scheduled_at: when.toISOString(), status: "draft" });
    const offset = await t.call("POST", `${t.ws}/campaigns`, {
      body: { subject: "Offset", newsletter_id: nl.id, scheduled_at: "2099-01-01T12:00:00+02:00" },
    });
    expect(offset.body.data.scheduled_at).toBe("2099-01-01T10:00:00.000Z");
  });

  it("answers 400 resource_missing naming the field for a newsletter or segment not in the workspace", async () => {
    const t = await tenant();
    const other = await tenant("Other");
    const nl = await createNewsletter(t);
    const foreignNl = await createNewsletter(other);
    const foreignSeg = await createSegment(other, { tags_any: ["a"] });
    const post = (body: Record<string, unknown>) => t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", ...body } });
    expectError(await post({ newsletter_id: "nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }), 400, "resource_missing", "newsletter_id");
    expectError(await post({ newsletter_id: foreignNl.id }), 400, "resource_missing", "newsletter_id");
    expectError(await post({ newsletter_id: "whatever" }), 400, "resource_missing", "newsletter_id");
    expectError(await post({ newsletter_id: nl.id, segment_id: "seg_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }), 400, "resource_missing", "segment_id");
    // Both missing: both named, the newsletter first.
    const both = await post({ newsletter_id: "nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T", segment_id: "seg_01JD6Q3Z6W9X8B4N2M5K7P1R3T" });
    expectError(both, 400, "resource_missing", "newsletter_id");
    expect(both.body.error.details.map((d: { param: string }) => d.param)).toEqual(["newsletter_id", "segment_id"]);
    expectError(await post({ newsletter_id: nl.id, segment_id: foreignSeg.id }), 400, "resource_missing", "segment_id");
    expect((await post({ newsletter_id: nl.id, segment_id: null })).status).toBe(201);
  });

  it("validates every body rule", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const post = (body: Record<string, unknown>) => t.call("POST", `${t.ws}/campaigns`, { body });
    expectError(await post({ newsletter_id: nl.id }), 400, "validation_failed", "subject");
    expectError(await post({ subject: "", newsletter_id: nl.id }), 400, "validation_failed", "subject");
    expectError(await post({ subject: "   ", newsletter_id: nl.id }), 400, "validation_failed", "subject");
    expectError(await post({ subject: "x".repeat(256), newsletter_id: nl.id }), 400, "validation_failed", "subject");
    expect((await post({ subject: "x".repeat(255), newsletter_id: nl.id })).status).toBe(201);
    expectError(await post({ subject: 42, newsletter_id: nl.id }), 400, "validation_failed", "subject");
    expectError(await post({ subject: "S" }), 400, "validation_failed", "newsletter_id");
    expectError(await post({ subject: "S", newsletter_id: nl.id, preheader: "p".repeat(256) }), 400, "validation_failed", "preheader");
    expect((await post({ subject: "S", newsletter_id: nl.id, preheader: "p".repeat(255) })).status).toBe(201);
    const past = new Date(Date.now() - 60_000).toISOString();
    const pastRes = await post({ subject: "S", newsletter_id: nl.id, scheduled_at: past });
    expectError(pastRes, 400, "validation_failed", "scheduled_at");
    expect(pastRes.body.error.message).toBe("scheduled_at must be in the future");
    expectError(await post({ subject: "S", newsletter_id: nl.id, scheduled_at: "tomorrow" }), 400, "validation_failed", "scheduled_at");
    expectError(await post({ subject: "S", newsletter_id: nl.id, scheduled_at: "2099-01-01T12:00:00" }), 400, "validation_failed", "scheduled_at");
    // The last local time of year 9999 west of UTC is in year 10000, which no timestamp the API writes can show.
    const lastDay = await post({ subject: "S", newsletter_id: nl.id, scheduled_at: "9999-12-31T23:59:59.999-23:59" });
    expectError(lastDay, 400, "validation_failed", "scheduled_at");
    expect(lastDay.body.error.message).toBe("scheduled_at must be no later than 9999-12-31T23:59:59.999Z");
    const last = await post({ subject: "S", newsletter_id: nl.id, scheduled_at: "9999-12-31T23:59:59.999+00:00" });
    expect(last.body.data.scheduled_at).toBe("9999-12-31T23:59:59.999Z");
    const patched = await t.call("PATCH", `${t.ws}/campaigns/${last.body.data.id}`, { body: { scheduled_at: "9999-12-31T23:59:59.999-00:01" } });
    expectError(patched, 400, "validation_failed", "scheduled_at");
    // Written back as it was read, it is a no-op.
    expect((await t.call("PATCH", `${t.ws}/campaigns/${last.body.data.id}`, { body: { scheduled_at: last.body.data.scheduled_at } })).status).toBe(200);
    // Fractions past the millisecond are dropped; that spelling of the stored time is the same time.
    const fine = await post({ subject: "S", newsletter_id: nl.id, scheduled_at: "2999-01-01T00:00:00.123456Z" });
    expect(fine.body.data.scheduled_at).toBe("2999-01-01T00:00:00.123Z");
    const finer = await t.call("PATCH", `${t.ws}/campaigns/${fine.body.data.id}`, { body: { scheduled_at: "2999-01-01T00:00:00.1239Z" } });
    expect(finer.status, finer.text).toBe(200);
    expect(finer.body.data).toEqual(fine.body.data);
    expectError(await post({ subject: "S", newsletter_id: nl.id, status: "sent" }), 400, "validation_failed", "status");
    expectError(await t.call("POST", `${t.ws}/campaigns`, { raw: "{", headers: { "content-type": "application/json" } }), 400, "invalid_json");
  });

  it("takes back a draft's scheduled_at as it was read after that time has passed (a no-op); any other past time is refused", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const soon = new Date(Date.now() + 300).toISOString();
    const created = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", newsletter_id: nl.id, scheduled_at: soon } });
    expect(created.status, created.text).toBe(201);
    await new Promise((resolve) => setTimeout(resolve, 400));
    const path = `${t.ws}/campaigns/${created.body.data.id}`;
    // A client that writes back the whole campaign it read.
    const { subject, preheader, scheduled_at } = created.body.data;
    const same = await t.call("PATCH", path, { body: { subject, preheader, scheduled_at } });
    expect(same.status, same.text).toBe(200);
    expect(same.body.data).toEqual(created.body.data);
    const other = await t.call("PATCH", path, { body: { scheduled_at: new Date(Date.parse(soon) - 1).toISOString() } });
    expectError(other, 400, "validation_failed", "scheduled_at");
    expect(other.body.error.message).toBe("scheduled_at must be in the future");
  });

  it("stores a blank preheader as null, trims it, and types it as nullable", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const post = (body: Record<string, unknown>) => t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", newsletter_id: nl.id, ...body } });
    const blank = await post({ preheader: "   " });
    expect(blank.status, blank.text).toBe(201);
    expect(blank.body.data.preheader).toBeNull();
    expect((await t.call("GET", `${t.ws}/campaigns/${blank.body.data.id}`)).body.data.preheader).toBeNull();
    expect((await post({ preheader: "" })).body.data.preheader).toBeNull();
    expect((await post({ preheader: " Soon " })).body.data.preheader).toBe("Soon");
    const doc = (await call("GET", "/openapi.json")).body;
    expect(doc.components.schemas.CreateCampaignRequest.properties.preheader).toMatchObject({ type: ["string", "null"], pattern: expect.any(String) });
  });

  it("rejects ill-formed and control text in every text field", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const post = (body: Record<string, unknown>) => t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", newsletter_id: nl.id, ...body } });
    for (const [field, value, message] of [
      ["subject", "Hi\ud800", "subject must be well-formed Unicode text"],
      ["subject", "Hi\u0000", "subject must not contain control characters"],
      ["preheader", "\u0008", "preheader must not contain control characters"],
      ["newsletter_id", "nl_\u0000", "newsletter_id must not contain control characters"],
      ["segment_id", "\udfff", "segment_id must be well-formed Unicode text"],
    ] as const) {
      const res = await post({ [field]: value });
      expectError(res, 400, "validation_failed", field);
      expect(res.body.error.message).toBe(message);
      expect(res.body.error.details).toHaveLength(1);
    }
  });

  it.each([
    ["2030-06-30T23:59:60Z", "real"],
    ["2030-02-30T00:00:00Z", "real"],
    ["1893456000", "shape"],
    ["", "shape"],
    ["2030-06-30t10:00:00z", "shape"],
    ["2030-06-30T10:00Z", "shape"],
  ])(
    "reports only the format error for scheduled_at %j",
    async (scheduledAt, kind) => {
      const t = await tenant();
      const nl = await createNewsletter(t);
      const res = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", newsletter_id: nl.id, scheduled_at: scheduledAt } });
      expectError(res, 400, "validation_failed", "scheduled_at");
      const message =
        kind === "real"
          ? "scheduled_at must be a real calendar date and time (an ISO 8601 date-time with a time zone, upper-case T and Z)"
          : "scheduled_at must be an ISO 8601 date-time with seconds and a time zone (upper-case T and Z)";
      expect(res.body.error.details).toEqual([{ param: "scheduled_at", message }]);
    },
  );

  it("lists newest first, filtered by status, with cursors", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await createCampaign(t, { newsletter_id: nl.id, subject: `C${i}` })).id);
    // Two of them no longer drafts.
    await env.DB.prepare("update campaigns set status = 'sent' where id in (?, ?)").bind(made[1], made[3]).run();

    const all = await t.call("GET", `${t.ws}/campaigns`);
    expect(all.body.data.map((c: { id: string }) => c.id)).toEqual([...made].reverse());
    expect(all.body.pagination).toEqual({ has_more: false, next_cursor: null });

    const drafts: string[] = [];
    let after: string | null = null;
    do {
      const page = await t.call("GET", `${t.ws}/campaigns?status=draft&limit=2${after ? `&after=${after}` : ""}`);
      expect(page.status, page.text).toBe(200);
      expect(page.body.data.length).toBeLessThanOrEqual(2);
      drafts.push(...page.body.data.map((c: { id: string; status: string }) => c.id));
      after = page.body.pagination.next_cursor;
    } while (after);
    expect(drafts).toEqual([made[4], made[2], made[0]]);
    const sent = await t.call("GET", `${t.ws}/campaigns?status=sent`);
    expect(sent.body.data.map((c: { id: string }) => c.id)).toEqual([made[3], made[1]]);
  });

  it("validates the list query", async () => {
    const t = await tenant();
    const list = (query: string) => t.call("GET", `${t.ws}/campaigns?${query}`);
    expectError(await list("status=done"), 400, "validation_failed", "status");
    expectError(await list("limit=0"), 400, "validation_failed", "limit");
    expectError(await list("limit=101"), 400, "validation_failed", "limit");
    expectError(await list("limit=abc"), 400, "validation_failed", "limit");
    expectError(await list("after=abc.def"), 400, "invalid_cursor", "after");
    expectError(await list("color=red"), 400, "validation_failed", "color");
    const repeated = await list("status=draft&status=sent");
    expectError(repeated, 400, "validation_failed", "status");
    expect(repeated.body.error.message).toBe("status must be given once");
    const loose = await list("limit=1e1");
    expectError(loose, 400, "validation_failed", "limit");
    expect(loose.body.error.message).toBe("limit must be an integer from 1 to 100");
    expect((await list("limit=100")).status).toBe(200);
  });

  it("needs campaigns:read to read and campaigns:write to create; hides other workspaces", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const campaign = await createCampaign(t, { newsletter_id: nl.id });
    const readOnly = await createCredential([t.workspace.id], { scopes: ["campaigns:read"] });
    const sendOnly = await createCredential([t.workspace.id], { scopes: ["campaigns:send"] });
    expectError(await call("POST", `${t.ws}/campaigns`, { token: readOnly.token, body: { subject: "S", newsletter_id: nl.id } }), 403, "insufficient_scope");
    expectError(await call("GET", `${t.ws}/campaigns`, { token: sendOnly.token }), 403, "insufficient_scope");
    expectError(await call("GET", `${t.ws}/campaigns/${campaign.id}`, { token: sendOnly.token }), 403, "insufficient_scope");
    expect((await call("GET", `${t.ws}/campaigns/${campaign.id}`, { token: readOnly.token })).status).toBe(200);

    const other = await tenant("Other");
    expectError(await other.call("GET", `${t.ws}/campaigns/${campaign.id}`), 404, "not_found");
    expectError(await other.call("GET", `${other.ws}/campaigns/${campaign.id}`), 404, "not_found");
    expectError(await other.call("GET", `${t.ws}/campaigns`), 404, "not_found");
    expectError(await t.call("GET", `${t.ws}/campaigns/sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T`), 400, "validation_failed", "campaign_id");
    // Another workspace's lists hold none of this one's campaigns or segments, and its campaigns cannot take this one's segment.
    const segment = await createSegment(t, { tags_any: ["vip"] });
    expect((await other.call("GET", `${other.ws}/campaigns`)).body.data).toEqual([]);
    expect((await other.call("GET", `${other.ws}/campaigns?status=draft`)).body.data).toEqual([]);
    expect((await other.call("GET", `${other.ws}/segments`)).body.data).toEqual([]);
    const theirs = await createCampaign(other);
    expectError(await other.call("PATCH", `${other.ws}/campaigns/${theirs.id}`, { body: { segment_id: segment.id } }), 400, "resource_missing", "segment_id");
    expect((await other.call("GET", `${other.ws}/campaigns/${theirs.id}`)).body.data.segment_id).toBeNull();
  });

  it("names the path parameter of whatever does not exist, and says what a well-formed id is", async () => {
    const t = await tenant();
    const missingCampaign = "cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T";
    expectError(await t.call("GET", `${t.ws}/campaigns/${missingCampaign}`), 404, "not_found", "campaign_id");
    expectError(await t.call("GET", `${t.ws}/campaigns/${missingCampaign}/deliveries`), 404, "not_found", "campaign_id");
    expectError(await t.call("POST", `${t.ws}/campaigns/${missingCampaign}/send`), 404, "not_found", "campaign_id");
    const op = await t.call("GET", `${t.ws}/operations/op_01JD6Q3Z6W9X8B4N2M5K7P1R3T`);
    expectError(op, 404, "not_found", "operation_id");
    expect(op.body.error.message).toBe("No such operation: op_01JD6Q3Z6W9X8B4N2M5K7P1R3T");

    const wrongKind = await t.call("GET", `${t.ws}/operations/${missingCampaign}`);
    expectError(wrongKind, 400, "validation_failed", "operation_id");
    expect(wrongKind.body.error.message).toBe("operation_id must be an operation id, which starts with op_");
    const empty = await t.call("GET", `${t.ws}/campaigns/cmp_`);
    expectError(empty, 404, "not_found", "campaign_id");
    expect(empty.body.error.message).toBe("No such campaign: cmp_");
  });

  it("sends with integration_slug null as if it were omitted; slugs stay exact; the document lists them", async () => {
    const t = await tenant();
    const nl = await createNewsletter(t);
    const send = (id: string, body: Record<string, unknown>) => t.call("POST", `${t.ws}/campaigns/${id}/send`, { body });
    for (const slug of ["Sandbox", " sandbox", "sandbox ", "smtp", ""]) {
      const res = await send((await createCampaign(t, { newsletter_id: nl.id })).id, { integration_slug: slug });
      expectError(res, 400, "unknown_integration", "integration_slug");
      // What it offers is what this deployment has (no RESEND_API_KEY here), the name quoted.
      expect(res.body.error.message).toBe(`No integration is named ${JSON.stringify(slug)}; this deployment has: sandbox (slugs are exact and lower-case)`);
    }
    const unconfigured = await send((await createCampaign(t, { newsletter_id: nl.id })).id, { integration_slug: "resend" });
    expect(unconfigured.body.error.message).toBe("The resend integration is not configured in this deployment (it has: sandbox)");
    const control = await send((await createCampaign(t, { newsletter_id: nl.id })).id, { integration_slug: "sandbox\u0000" });
    expectError(control, 400, "validation_failed", "integration_slug");
    expect(control.body.error.message).toBe("integration_slug must not contain control characters");

    const campaign = await createCampaign(t, { newsletter_id: nl.id });
    const res = await send(campaign.id, { integration_slug: null });
    expect(res.status, res.text).toBe(202);
    expect(res.body.data).toMatchObject({ status: "queued", integration_slug: "sandbox", campaign_id: campaign.id });
    expect((await waitForOperation(t, res.body.data.id)).status).toBe("succeeded");

    const doc = (await call("GET", "/openapi.json")).body;
    const slug = doc.components.schemas.SendCampaignRequest.properties.integration_slug;
    expect(slug.enum).toEqual(["sandbox", "resend", null]);
    expect(slug.type).toEqual(["string", "null"]);
  });

});

describe("archiving a campaign", () => {
  it("archives a draft, a sent or a failed campaign: listed as archived, readable, never edited or sent again", async () => {
    const t = await tenant();
    const draft = await createCampaign(t);
    const path = `${t.ws}/campaigns/${draft.id}/archive`;
    const res = await t.call("POST", path, { headers: { "idempotency-key": "archive-0001" } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ id: draft.id, status: "archived" });
    // A retry with the key is answered as the first was; archiving again changes nothing.
    const replay = await t.call("POST", path, { headers: { "idempotency-key": "archive-0001" } });
    expect(replay.headers.get("idempotent-replayed")).toBe("true");
    expect(replay.body).toEqual(res.body);
    const again = await t.call("POST", path);
    expect(again.status).toBe(200);
    expect(again.body.data).toEqual(res.body.data);

    const listed = await t.call("GET", `${t.ws}/campaigns?status=archived`);
    expect(listed.body.data.map((c: { id: string }) => c.id)).toEqual([draft.id]);
    expect((await t.call("GET", `${t.ws}/campaigns?status=draft`)).body.data).toEqual([]);
    expectError(await t.call("PATCH", `${t.ws}/campaigns/${draft.id}`, { body: { subject: "New" } }), 409, "campaign_not_editable");
    expectError(await t.call("POST", `${t.ws}/campaigns/${draft.id}/send`, { body: {} }), 409, "campaign_not_sendable");

    // A sent campaign too: its deliveries and stats stay readable.
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "reader@example.com" } });
    const sent = await createCampaign(t);
    const op = (await t.call("POST", `${t.ws}/campaigns/${sent.id}/send`, { body: {} })).body.data;
    expect((await waitForOperation(t, op.id)).status).toBe("succeeded");
    expect((await t.call("POST", `${t.ws}/campaigns/${sent.id}/archive`)).body.data).toMatchObject({ status: "archived", sent_at: expect.any(String) });
    expect((await t.call("GET", `${t.ws}/campaigns/${sent.id}/deliveries`)).body.data).toHaveLength(1);
    expect((await t.call("GET", `${t.ws}/campaigns/${sent.id}/stats`)).body.data).toMatchObject({ sent: 1 });
  });

  it("refuses a scheduled campaign (unschedule it first) with 409 campaign_not_editable; 404 for another workspace's", async () => {
    const t = await tenant();
    const scheduled = await createCampaign(t, { scheduled_at: new Date(Date.now() + 3_600_000).toISOString() });
    expect((await t.call("POST", `${t.ws}/campaigns/${scheduled.id}/send`, { body: {} })).status).toBe(202);
    const refused = await t.call("POST", `${t.ws}/campaigns/${scheduled.id}/archive`);
    expectError(refused, 409, "campaign_not_editable");
    expect(refused.body.error.message).toContain("unschedule it first");
    expect((await t.call("GET", `${t.ws}/campaigns/${scheduled.id}`)).body.data.status).toBe("scheduled");

    const other = await tenant("Other");
    expectError(await other.call("POST", `${other.ws}/campaigns/${scheduled.id}/archive`), 404, "not_found", "campaign_id");
    // A body is refused, as on every route that takes none.
    expect((await t.call("POST", `${t.ws}/campaigns/${scheduled.id}/archive`, { body: { status: "archived" } })).status).toBe(400);
  });
});

describe("list pages of large campaigns", () => {
  it("stop before the item that would take a page past 4,000,000 characters of templates, and say has_more (campaigns and their events)", async () => {
    const t = await tenant();
    const newsletter = await createNewsletter(t);
    // Seven campaigns at the template limits: 786,437 characters each; five fit in 4,000,000, six do not.
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await t.call("POST", `${t.ws}/campaigns`, {
        body: { subject: `Big ${i}`, newsletter_id: newsletter.id, html: "a".repeat(512 * 1024), text: "b".repeat(256 * 1024) },
      });
      expect(res.status).toBe(201);
      ids.unshift(res.body.data.id);
    }
    const first = await t.call("GET", `${t.ws}/campaigns?limit=100`);
    expect(first.body.data.map((c: { id: string }) => c.id)).toEqual(ids.slice(0, 5));
    expect(first.body.pagination.has_more).toBe(true);
    const second = await t.call("GET", `${t.ws}/campaigns?limit=100&after=${first.body.pagination.next_cursor}`);
    expect(second.body.data.map((c: { id: string }) => c.id)).toEqual(ids.slice(5));
    expect(second.body.pagination).toEqual({ has_more: false, next_cursor: null });
    // Small ones fill a page to its limit as before.
    const small = await t.call("GET", `${t.ws}/campaigns?limit=3`);
    expect(small.body.data).toHaveLength(3);

    // Each campaign event carries its campaign: four sends (no audience) write eight, five to a page.
    for (const id of ids.slice(0, 4)) await waitForOperation(t, (await t.call("POST", `${t.ws}/campaigns/${id}/send`, { body: {} })).body.data.id);
    const events = await t.call("GET", `${t.ws}/events?limit=100`);
    expect(events.body.data).toHaveLength(5);
    expect(events.body.pagination.has_more).toBe(true);
    const rest = await t.call("GET", `${t.ws}/events?limit=100&after=${events.body.pagination.next_cursor}`);
    expect(rest.body.data).toHaveLength(3);
    expect(rest.body.pagination.has_more).toBe(false);
  });
});
