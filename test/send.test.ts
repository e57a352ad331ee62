import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { call, createCredential, expectError, seedSubscribers, tenant } from "./helpers";
import { allDeliveries, createCampaign, createSegment, sendCampaign, waitForOperation } from "./send.fixtures";
import { harness, operationOf, send } from "./send.harness";
import { mockResend } from "./resend.mock";

describe("send, end to end through the queue", () => {
  it("reaches every active subscriber exactly once and never an unsubscribed one", async () => {
    const t = await tenant();
    const ids = await seedSubscribers(t.workspace.id, 1_234, (i) => ({ status: i % 10 === 0 ? "unsubscribed" : "active" }));
    const active = ids.filter((_, i) => i % 10 !== 0);
    const campaign = await createCampaign(t);
    const queued = await sendCampaign(t, campaign.id);
    expect(queued.status).toBe("queued");

    const op = await waitForOperation(t, queued.id);
    expect(op.status).toBe("succeeded");
    expect(op.progress).toEqual({ total: active.length, delivered: active.length, failed: 0 });

    const deliveries = await allDeliveries(t, campaign.id);
    expect(deliveries).toHaveLength(active.length);
    expect(new Set(deliveries.map((d) => d.subscriber_id))).toEqual(new Set(active));
    for (const d of deliveries) {
      expect(d.status).toBe("sent");
      expect(d.provider_message_id).toBe(`sandbox_${d.id}`);
    }
    const after = await t.call("GET", `${t.ws}/campaigns/${campaign.id}`);
    expect(after.body.data.status).toBe("sent");
    expect(after.body.data.sent_at).toMatch(/Z$/);
  });
});

describe("send over HTTP", () => {
  it("a send with no recipients succeeds with total 0, through either integration, and the campaign is sent", async () => {
    const resend = mockResend();
    for (const slug of ["sandbox", "resend"]) {
      const h = await harness("live");
      // Subscribers, none of them mailable: nobody is in the audience.
      await seedSubscribers(h.t.workspace.id, 3, (i) => ({ status: ["unsubscribed", "bounced", "pending"][i] }));
      const campaign = await createCampaign(h.t);
      const op = await send(h.t, campaign.id, { integration_slug: slug });
      await h.drain();
      expect(await operationOf(h.t, op.id), slug).toMatchObject({ status: "succeeded", progress: { total: 0, delivered: 0, failed: 0 }, error: null });
      const after = (await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`)).body.data;
      expect(after).toMatchObject({ status: "sent", sent_at: expect.stringMatching(/Z$/) });
      expect(await allDeliveries(h.t, campaign.id)).toEqual([]);
    }
    expect(resend.calls).toEqual([]);
    vi.restoreAllMocks();
  });

  it("narrows the audience by the segment: tags_any, tags_all, and both", async () => {
    const t = await tenant();
    const tagsOf = (i: number) => [i % 2 === 0 ? "even" : "odd", ...(i % 3 === 0 ? ["three"] : []), ...(i % 5 === 0 ? ["five"] : [])];
    const ids = await seedSubscribers(t.workspace.id, 60, (i) => ({ tags: tagsOf(i), status: i === 30 ? "bounced" : "active" }));
    const expected = (match: (tags: string[]) => boolean) =>
      new Set(ids.filter((_, i) => i !== 30 && match(tagsOf(i))));
    const cases = [
      { filter: { tags_any: ["three", "five"] }, match: (tags: string[]) => tags.includes("three") || tags.includes("five") },
      { filter: { tags_all: ["even", "three"] }, match: (tags: string[]) => tags.includes("even") && tags.includes("three") },
      {
        filter: { tags_any: ["five"], tags_all: ["odd"] },
        match: (tags: string[]) => tags.includes("five") && tags.includes("odd"),
      },
      { filter: { tags_any: ["nobody"] }, match: () => false },
    ];
    for (const { filter, match } of cases) {
      const segment = await createSegment(t, filter);
      const campaign = await createCampaign(t, { segment_id: segment.id });
      const op = await waitForOperation(t, (await sendCampaign(t, campaign.id)).id);
      const want = expected(match);
      expect(op).toMatchObject({ status: "succeeded", progress: { total: want.size, delivered: want.size, failed: 0 } });
      const got = (await allDeliveries(t, campaign.id)).map((d) => d.subscriber_id);
      expect(got).toHaveLength(want.size);
      expect(new Set(got)).toEqual(want);
    }
  });

  it("answers 202 with a queued operation, every field present, and moves the draft to sending", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 2);
    const campaign = await createCampaign(t);
    const res = await t.call("POST", `${t.ws}/campaigns/${campaign.id}/send`, { body: { integration_slug: "sandbox" } });
    expect(res.status, res.text).toBe(202);
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^op_[0-9A-Z]{26}$/),
      object: "operation",
      type: "campaign_send",
      status: "queued",
      campaign_id: campaign.id,
      integration_slug: "sandbox",
      progress: { total: 0, delivered: 0, failed: 0 },
      error: null,
      created_at: expect.stringMatching(/\.\d{3}Z$/),
      updated_at: expect.stringMatching(/\.\d{3}Z$/),
      completed_at: null,
    });
    const status = (await t.call("GET", `${t.ws}/campaigns/${campaign.id}`)).body.data.status;
    expect(["sending", "sent"]).toContain(status);
    const op = await waitForOperation(t, res.body.data.id);
    expect(op).toMatchObject({ status: "succeeded", completed_at: expect.stringMatching(/Z$/) });
    // A sent campaign is not a draft any more; the 409 names its send, so a client that lost the 202 finds it.
    const again = await t.call("POST", `${t.ws}/campaigns/${campaign.id}/send`);
    expectError(again, 409, "campaign_not_sendable");
    expect(again.body.error.details).toEqual([{ message: expect.stringContaining(res.body.data.id), operation_id: res.body.data.id }]);
    expect(again.body.error.message).toContain(res.body.data.id);
  });

  it("replays a send retried with the same Idempotency-Key instead of answering 409", async () => {
    const t = await tenant();
    const campaign = await createCampaign(t);
    const url = `${t.ws}/campaigns/${campaign.id}/send`;
    const headers = { "idempotency-key": "send-once-12345" };
    const first = await t.call("POST", url, { body: {}, headers });
    expect(first.status, first.text).toBe(202);
    const again = await t.call("POST", url, { body: {}, headers });
    expect(again.status, again.text).toBe(202);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.body.data.id).toBe(first.body.data.id);
    expectError(await t.call("POST", url, { body: {} }), 409, "campaign_not_sendable");
    await waitForOperation(t, first.body.data.id);
  });

  it("lets exactly one of many concurrent sends of a draft win", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 25);
    const campaign = await createCampaign(t);
    const results = await Promise.all(
      Array.from({ length: 8 }, () => t.call("POST", `${t.ws}/campaigns/${campaign.id}/send`, { body: {} })),
    );
    const won = results.filter((r) => r.status === 202);
    expect(won).toHaveLength(1);
    for (const lost of results.filter((r) => r.status !== 202)) expectError(lost, 409, "campaign_not_sendable");
    const op = await waitForOperation(t, won[0]?.body.data.id);
    expect(op.progress).toEqual({ total: 25, delivered: 25, failed: 0 });
    expect(await allDeliveries(t, campaign.id)).toHaveLength(25);
  });

  it("a send with no body at all uses the sandbox", async () => {
    const t = await tenant();
    const campaign = await createCampaign(t);
    const res = await t.call("POST", `${t.ws}/campaigns/${campaign.id}/send`);
    expect(res.status, res.text).toBe(202);
    expect(res.body.data.integration_slug).toBe("sandbox");
    expect((await waitForOperation(t, res.body.data.id)).progress.total).toBe(0);
  });

  it("test credentials deliver through the sandbox whatever configured slug they name; the operation keeps the slug", async () => {
    const h = await harness("test"); // a deployment with Resend configured
    await seedSubscribers(h.t.workspace.id, 3);
    const campaign = await createCampaign(h.t);
    const queued = await send(h.t, campaign.id, { integration_slug: "resend" });
    await h.drain();
    expect(await operationOf(h.t, queued.id)).toMatchObject({ status: "succeeded", integration_slug: "resend" });
    for (const d of await allDeliveries(h.t, campaign.id)) expect(d.provider_message_id).toBe(`sandbox_${d.id}`);
  });

  it("rejects unknown integrations in both modes, and resend when it is not configured", async () => {
    for (const mode of ["test", "live"] as const) {
      const t = await tenant(mode, mode);
      const campaign = await createCampaign(t);
      const res = await t.call("POST", `${t.ws}/campaigns/${campaign.id}/send`, { body: { integration_slug: "carrier-pigeon" } });
      expectError(res, 400, "unknown_integration", "integration_slug");
      expect((await t.call("GET", `${t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("draft");
    }
    // This deployment (the test worker) has no RESEND_API_KEY: naming resend is refused in both modes
    // (a test credential would not have mailed, but the same request under a live one is a 400).
    for (const mode of ["test", "live"] as const) {
      const t = await tenant(mode, mode);
      const campaign = await createCampaign(t);
      const res = await t.call("POST", `${t.ws}/campaigns/${campaign.id}/send`, { body: { integration_slug: "resend" } });
      expectError(res, 400, "unknown_integration", "integration_slug");
      expect(res.body.error.message).toMatch(/not configured/);
    }
    const live = await tenant("Live", "live");
    const campaign = await createCampaign(live);
    const sandbox = await sendCampaign(live, campaign.id, { integration_slug: "sandbox" });
    expect((await waitForOperation(live, sandbox.id)).status).toBe("succeeded");
  });

  it("validates the send request", async () => {
    const t = await tenant();
    const campaign = await createCampaign(t);
    const url = `${t.ws}/campaigns/${campaign.id}/send`;
    expectError(await t.call("POST", url, { body: { integration_slug: "" } }), 400, "unknown_integration", "integration_slug");
    expectError(await t.call("POST", url, { body: { integration_slug: 7 } }), 400, "validation_failed", "integration_slug");
    expectError(await t.call("POST", url, { body: { integration: "sandbox" } }), 400, "validation_failed", "integration");
    expectError(await t.call("POST", `${t.ws}/campaigns/nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T/send`), 400, "validation_failed", "campaign_id");
    expectError(await t.call("POST", `${t.ws}/campaigns/cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T/send`), 404, "not_found");
    expectError(await t.call("GET", url), 405, "method_not_allowed");
    expect((await t.call("GET", `${t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("draft");
  });

  it("reaches the active subscribers of its own workspace only", async () => {
    const t = await tenant();
    const mine = await seedSubscribers(t.workspace.id, 3);
    const other = await tenant("Other");
    await seedSubscribers(other.workspace.id, 4);
    const campaign = await createCampaign(t);
    const op = await waitForOperation(t, (await sendCampaign(t, campaign.id)).id);
    expect(op).toMatchObject({ status: "succeeded", progress: { total: 3 } });
    expect((await allDeliveries(t, campaign.id)).map((d) => d.subscriber_id).sort()).toEqual([...mine].sort());
  });

  it("needs campaigns:send to send and campaigns:read to read operations and deliveries; hides other workspaces", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 2);
    const campaign = await createCampaign(t);
    const writer = await createCredential([t.workspace.id], { scopes: ["campaigns:read", "campaigns:write"] });
    expectError(await call("POST", `${t.ws}/campaigns/${campaign.id}/send`, { token: writer.token, body: {} }), 403, "insufficient_scope");
    const sender = await createCredential([t.workspace.id], { scopes: ["campaigns:send"] });
    const res = await call("POST", `${t.ws}/campaigns/${campaign.id}/send`, { token: sender.token, body: {} });
    expect(res.status, res.text).toBe(202);
    const opId = res.body.data.id;
    expectError(await call("GET", `${t.ws}/operations/${opId}`, { token: sender.token }), 403, "insufficient_scope");
    expectError(await call("GET", `${t.ws}/campaigns/${campaign.id}/deliveries`, { token: sender.token }), 403, "insufficient_scope");
    expect((await call("GET", `${t.ws}/operations/${opId}`, { token: writer.token })).status).toBe(200);

    const other = await tenant("Other");
    expectError(await other.call("GET", `${t.ws}/operations/${opId}`), 404, "not_found");
    expectError(await other.call("GET", `${other.ws}/operations/${opId}`), 404, "not_found");
    expectError(await other.call("GET", `${other.ws}/campaigns/${campaign.id}/deliveries`), 404, "not_found");
    const foreign = await createCampaign(other);
    expectError(await t.call("POST", `${t.ws}/campaigns/${foreign.id}/send`), 404, "not_found");
    expectError(await t.call("GET", `${t.ws}/operations/op_01JD6Q3Z6W9X8B4N2M5K7P1R3T`), 404, "not_found");
    expectError(await t.call("GET", `${t.ws}/operations/cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T`), 400, "validation_failed", "operation_id");
    await waitForOperation(t, opId);
    // Once there are deliveries, still none of them through another workspace.
    expect((await t.call("GET", `${t.ws}/campaigns/${campaign.id}/deliveries`)).body.data.length).toBeGreaterThan(0);
    expectError(await other.call("GET", `${other.ws}/campaigns/${campaign.id}/deliveries`), 404, "not_found");
    expectError(await other.call("GET", `${t.ws}/campaigns/${campaign.id}/deliveries`), 404, "not_found");
  });

  it("filters deliveries by status, paging within the filter", async () => {
    const t = await tenant();
    const ids = await seedSubscribers(t.workspace.id, 6);
    const campaign = await createCampaign(t);
    await waitForOperation(t, (await sendCampaign(t, campaign.id)).id);
    // Three of them fail (as a provider would have it), three stay sent.
    for (const id of ids.slice(0, 3)) {
      await env.DB.prepare("UPDATE deliveries SET status = 'failed' WHERE campaign_id = ? AND subscriber_id = ?").bind(campaign.id, id).run();
    }
    const url = `${t.ws}/campaigns/${campaign.id}/deliveries`;
    const first = await t.call("GET", `${url}?status=failed&limit=2`);
    expect(first.body.data.map((d: { status: string }) => d.status)).toEqual(["failed", "failed"]);
    const rest = await t.call("GET", `${url}?status=failed&limit=2&after=${first.body.pagination.next_cursor}`);
    expect(rest.body.data).toHaveLength(1);
    expect(rest.body.pagination.has_more).toBe(false);
    expect(new Set([...first.body.data, ...rest.body.data].map((d: { subscriber_id: string }) => d.subscriber_id))).toEqual(new Set(ids.slice(0, 3)));
    expect((await t.call("GET", `${url}?status=sent`)).body.data).toHaveLength(3);
    expect((await t.call("GET", `${url}?status=bounced`)).body.data).toEqual([]);
    expectError(await t.call("GET", `${url}?status=lost`), 400, "validation_failed", "status");
  });

  it("pages deliveries newest first with cursors", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 7);
    const campaign = await createCampaign(t);
    await waitForOperation(t, (await sendCampaign(t, campaign.id)).id);
    const seen: string[] = [];
    let after: string | null = null;
    do {
      const page = await t.call("GET", `${t.ws}/campaigns/${campaign.id}/deliveries?limit=3${after ? `&after=${after}` : ""}`);
      expect(page.status, page.text).toBe(200);
      seen.push(...page.body.data.map((d: { id: string }) => d.id));
      after = page.body.pagination.next_cursor;
      expect(page.body.pagination.has_more).toBe(after !== null);
    } while (after);
    expect(seen).toHaveLength(7);
    expect(seen).toEqual([...seen].sort().reverse());
    const first = (await t.call("GET", `${t.ws}/campaigns/${campaign.id}/deliveries?limit=1`)).body.data[0];
    expect(Object.keys(first).sort()).toEqual(
      [
        "attempts", "bounce_type", "campaign_id", "clicked_at", "created_at", "email", "error", "id", "object", "opened_at",
        "provider_message_id", "status", "subscriber_id", "unsubscribed_at", "updated_at",
      ].sort(),
    );
    expect(first).toMatchObject({ object: "delivery", status: "sent", attempts: 1, error: null });
    const cursor = (await t.call("GET", `${t.ws}/campaigns/${campaign.id}/deliveries?limit=1`)).body.pagination.next_cursor;
    const otherCampaign = await createCampaign(t);
    expectError(await t.call("GET", `${t.ws}/campaigns/${otherCampaign.id}/deliveries?after=${cursor}`), 400, "invalid_cursor", "after");
    expectError(await t.call("GET", `${t.ws}/campaigns/${campaign.id}/deliveries?limit=101`), 400, "validation_failed", "limit");
    expectError(await t.call("GET", `${t.ws}/campaigns/cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T/deliveries`), 404, "not_found");
  });

  it("finds one subscriber's delivery of a campaign by subscriber_id (did this person get it?)", async () => {
    const t = await tenant();
    const ids = await seedSubscribers(t.workspace.id, 4);
    const campaign = await createCampaign(t);
    await waitForOperation(t, (await sendCampaign(t, campaign.id)).id);
    const url = `${t.ws}/campaigns/${campaign.id}/deliveries`;
    const one = await t.call("GET", `${url}?subscriber_id=${ids[2]}`);
    expect(one.status, one.text).toBe(200);
    expect(one.body.data).toHaveLength(1);
    expect(one.body.data[0]).toMatchObject({ subscriber_id: ids[2], status: "sent" });
    expect(one.body.pagination).toEqual({ has_more: false, next_cursor: null });
    expect((await t.call("GET", `${url}?subscriber_id=${ids[2]}&status=failed`)).body.data).toEqual([]);
    expect((await t.call("GET", `${url}?subscriber_id=sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T`)).body.data).toEqual([]);
    expectError(await t.call("GET", `${url}?subscriber_id=cmp_x`), 400, "validation_failed", "subscriber_id");
  });

  it("a scheduled campaign waits as scheduled, then starts on time through the queue delay", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 4);
    const scheduledAt = Date.now() + 2_500;
    const campaign = await createCampaign(t, { scheduled_at: new Date(scheduledAt).toISOString() });
    const queued = await sendCampaign(t, campaign.id);
    expect(queued.status).toBe("queued");
    expect((await t.call("GET", `${t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("scheduled");

    const op = await waitForOperation(t, queued.id);
    expect(op).toMatchObject({ status: "succeeded", progress: { total: 4, delivered: 4, failed: 0 } });
    const sent = (await t.call("GET", `${t.ws}/campaigns/${campaign.id}`)).body.data;
    expect(sent.status).toBe("sent");
    // Nothing started early: the audience was read (each delivery made) at the scheduled time or after.
    const deliveries = (await t.call("GET", `${t.ws}/campaigns/${campaign.id}/deliveries`)).body.data as { created_at: string }[];
    expect(deliveries).toHaveLength(4);
    for (const delivery of deliveries) expect(Date.parse(delivery.created_at)).toBeGreaterThanOrEqual(scheduledAt);
    expect(Date.parse(sent.sent_at)).toBeGreaterThanOrEqual(scheduledAt);
  });
});
