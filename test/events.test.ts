import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import { dispatchWritten, outboxStatement } from "../src/events/outbox";
import { call, createCredential, seedSubscribers, tenant, until } from "./helpers";
import { harness } from "./send.harness";
import { CapturedQueue } from "./send.fixtures";
import { createCampaign, sendCampaign, waitForOperation } from "./send.fixtures";
import { createEndpoint, createSubscriber, receiver, storedEvents } from "./webhooks.fixtures";

// The event log and the outbox: every change the contract lists writes exactly one event in its own
// batch, nothing else does, and the events reach a receiver signed.

afterEach(() => {
  vi.restoreAllMocks();
});


describe("GET /events", () => {
  it("lists newest first with the resource as the API shows it, filters by type, pages, and reads one", async () => {
    const t = await tenant();
    const ada = (await createSubscriber(t)).body.data;
    await createSubscriber(t, { email: "grace@example.com" });
    const patched = await t.call("PATCH", `${t.ws}/subscribers/${ada.id}`, { body: { name: "Ada L." } });
    expect(patched.status).toBe(200);

    const all = await t.call("GET", `${t.ws}/events`);
    expect(all.status, all.text).toBe(200);
    expect(all.body.data.map((e: { type: string }) => e.type)).toEqual(["subscriber.updated", "subscriber.created", "subscriber.created"]);
    const [latest] = all.body.data;
    expect(latest).toMatchObject({ object: "event", type: "subscriber.updated", data: { object: patched.body.data } });
    expect(latest.id).toMatch(/^evt_/);

    const created = await t.call("GET", `${t.ws}/events?type=subscriber.created&limit=1`);
    expect(created.body.data).toHaveLength(1);
    expect(created.body.data[0].data.object.email).toBe("grace@example.com");
    expect(created.body.pagination.has_more).toBe(true);
    const next = await t.call("GET", `${t.ws}/events?type=subscriber.created&limit=1&after=${created.body.pagination.next_cursor}`);
    expect(next.body.data[0].data.object).toEqual(ada);

    const one = await t.call("GET", `${t.ws}/events/${latest.id}`);
    expect(one.status).toBe(200);
    expect(one.body.data).toEqual(latest);
    expect((await t.call("GET", `${t.ws}/events?type=subscriber.exploded`)).status).toBe(400);
    expect((await t.call("GET", `${t.ws}/events/evt_01JD6Q3Z6W9X8B4N2M5K7P1R3T`)).status).toBe(404);
    const other = await tenant("Other");
    expect((await other.call("GET", `${other.ws}/events/${latest.id}`)).status).toBe(404);
  });

  it("needs webhooks:read", async () => {
    const t = await tenant();
    const limited = await createCredential([t.workspace.id], { scopes: ["subscribers:read"] });
    const res = await call("GET", `${t.ws}/events`, { token: limited.token });
    expect(res.status).toBe(403);
  });
});

describe("the outbox", () => {
  it("writes exactly one event per applied write, and none for a write that did not apply", async () => {
    const t = await tenant();
    const ada = (await createSubscriber(t)).body.data;
    expect((await storedEvents(t.workspace.id)).map((e) => e.type)).toEqual(["subscriber.created"]);

    // Refused writes: a taken email, a missing subscriber, invalid input.
    expect((await createSubscriber(t)).status).toBe(409);
    expect((await t.call("PATCH", `${t.ws}/subscribers/sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T`, { body: { name: "X" } })).status).toBe(404);
    expect((await createSubscriber(t, { email: "not an email" })).status).toBe(400);
    await createSubscriber(t, { email: "grace@example.com" });
    const grace = (await storedEvents(t.workspace.id)).at(-1)!;
    expect((await t.call("PATCH", `${t.ws}/subscribers/${ada.id}`, { body: { email: "grace@example.com" } })).status).toBe(409);
    expect((await storedEvents(t.workspace.id)).map((e) => e.type)).toEqual(["subscriber.created", "subscriber.created"]);

    // Unsubscribing through the API is one event, subscriber.unsubscribed, as through a link (also
    // with another field changed in the same write); doing it again changes nothing and writes
    // nothing; another change while unsubscribed is an update; bouncing is subscriber.bounced alone.
    await t.call("PATCH", `${t.ws}/subscribers/${ada.id}`, { body: { status: "unsubscribed", name: "Ada" } });
    await t.call("PATCH", `${t.ws}/subscribers/${ada.id}`, { body: { status: "unsubscribed" } });
    await t.call("PATCH", `${t.ws}/subscribers/${ada.id}`, { body: { status: "unsubscribed", name: "Ada L." } });
    await t.call("PATCH", `${t.ws}/subscribers/${ada.id}`, { body: { status: "bounced" } });
    const types = (await storedEvents(t.workspace.id)).map((e) => e.type);
    expect(types.slice(2)).toEqual(["subscriber.unsubscribed", "subscriber.updated", "subscriber.bounced"]);
    expect(grace.resource_id).not.toBe(ada.id);
  });

  it("a replayed Idempotency-Key request writes no second event", async () => {
    const t = await tenant();
    const headers = { "Idempotency-Key": "create-ada-0001" };
    const first = await createSubscriber(t, {}, headers);
    const again = await createSubscriber(t, {}, headers);
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await storedEvents(t.workspace.id)).toHaveLength(1);

    const patchHeaders = { "Idempotency-Key": "patch-ada-0001" };
    const id = first.body.data.id;
    await t.call("PATCH", `${t.ws}/subscribers/${id}`, { body: { status: "unsubscribed" }, headers: patchHeaders });
    await t.call("PATCH", `${t.ws}/subscribers/${id}`, { body: { status: "unsubscribed" }, headers: patchHeaders });
    expect((await storedEvents(t.workspace.id)).map((e) => e.type).sort()).toEqual(["subscriber.created", "subscriber.unsubscribed"]);
  });

  it("a send writes campaign.sending and campaign.sent; a second send of the same campaign writes none", async () => {
    const t = await tenant();
    await createSubscriber(t);
    const campaign = await createCampaign(t);
    await waitForOperation(t, (await sendCampaign(t, campaign.id)).id);
    expect((await t.call("POST", `${t.ws}/campaigns/${campaign.id}/send`, {})).status).toBe(409);
    const types = (await storedEvents(t.workspace.id)).map((e) => e.type);
    expect(types).toEqual(["subscriber.created", "campaign.sending", "campaign.sent"]);
    const [sent] = (await t.call("GET", `${t.ws}/events?type=campaign.sent`)).body.data;
    expect(sent.data.object).toMatchObject({ id: campaign.id, object: "campaign", status: "sent" });
    // Archiving the sent campaign is no event: no event type says "archived".
    expect((await t.call("POST", `${t.ws}/campaigns/${campaign.id}/archive`)).body.data.status).toBe("archived");
    expect((await storedEvents(t.workspace.id)).map((e) => e.type)).toEqual(types);
  });

  it("scheduling, unscheduling and archiving a campaign write no event (campaign.sending waits for the start)", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 2);
    const campaign = await createCampaign(h.t, { scheduled_at: new Date(Date.now() + 3_600_000).toISOString() });
    const path = `${h.t.ws}/campaigns/${campaign.id}`;
    expect((await h.t.call("POST", `${path}/send`, {})).status).toBe(202);
    expect((await h.t.call("GET", path)).body.data.status).toBe("scheduled");
    expect((await h.t.call("POST", `${path}/unschedule`)).body.data.status).toBe("draft");
    expect((await h.t.call("POST", `${path}/archive`)).body.data.status).toBe("archived");
    expect(await storedEvents(h.t.workspace.id)).toEqual([]);
  });

  it("a scheduled send writes campaign.sending when it starts, then campaign.sent", async () => {
    const h = await harness("test");
    await seedSubscribers(h.t.workspace.id, 2);
    const campaign = await createCampaign(h.t, { scheduled_at: new Date(Date.now() + 1_000).toISOString() });
    expect((await h.t.call("POST", `${h.t.ws}/campaigns/${campaign.id}/send`, {})).status).toBe(202);
    expect(await storedEvents(h.t.workspace.id)).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await h.step(); // the start, now due
    expect((await h.t.call("GET", `${h.t.ws}/campaigns/${campaign.id}`)).body.data.status).toBe("sending");
    expect((await storedEvents(h.t.workspace.id)).map((e) => e.type)).toEqual(["campaign.sending"]);
    await h.drain();
    expect((await storedEvents(h.t.workspace.id)).map((e) => e.type)).toEqual(["campaign.sending", "campaign.sent"]);
  });
});

describe("outboxStatement, for any raw D1 batch", () => {
  const markBounced = (id: string) =>
    env.DB.prepare("UPDATE subscribers SET status = 'bounced', updated_at = ?2 WHERE id = ?1 AND status <> 'bounced'").bind(id, Date.now());

  it("writes the event iff the statement before it changed a row; dispatchWritten enqueues it", async () => {
    const t = await tenant();
    await createEndpoint(t);
    const ada = (await createSubscriber(t)).body.data;
    const bob = (await createSubscriber(t, { email: "bob@example.com" })).body.data;
    // Bob has bounced already: marking him again changes no row.
    await markBounced(bob.id).run();
    const now = Date.now();
    const run = async () => {
      const statements = [
        markBounced(ada.id),
        outboxStatement(env.DB, { type: "subscriber.bounced", resource: "subscriber", id: ada.id }, now),
        markBounced(bob.id),
        outboxStatement(env.DB, { type: "subscriber.bounced", resource: "subscriber", id: bob.id }, now),
      ];
      const results = await env.DB.batch(statements);
      const queue = new CapturedQueue();
      await dispatchWritten(queue.asBinding(), statements, results);
      return queue.messages.map((m) => (m.body as { event_id: string }).event_id);
    };
    const dispatched = await run();
    const events = (await storedEvents(t.workspace.id)).filter((e) => e.type !== "subscriber.created");
    // Bob's statement changed nothing: no event for him.
    expect(events.map((e) => [e.type, e.resource_id])).toEqual([["subscriber.bounced", ada.id]]);
    expect(dispatched).toEqual(events.map((e) => e.id));
    // Both already bounced: the changes do not apply again, so no event either.
    expect(await run()).toEqual([]);
    expect(await storedEvents(t.workspace.id)).toHaveLength(3);
  });

  it("an event no endpoint takes is born dispatched: nothing is enqueued for it, now or by the sweeper", async () => {
    const t = await tenant();
    // An endpoint for other types only, one disabled and one deleted: none of them takes subscriber.bounced.
    await createEndpoint(t, { events: ["campaign.sent"] });
    const disabled = await createEndpoint(t);
    expect((await t.call("PATCH", `${t.ws}/webhook_endpoints/${disabled.id}`, { body: { enabled: false } })).status).toBe(200);
    const deleted = await createEndpoint(t);
    expect((await t.call("DELETE", `${t.ws}/webhook_endpoints/${deleted.id}`)).status).toBe(200);
    const ada = (await createSubscriber(t)).body.data;
    const statements = [markBounced(ada.id), outboxStatement(env.DB, { type: "subscriber.bounced", resource: "subscriber", id: ada.id }, Date.now())];
    const results = await env.DB.batch(statements);
    const queue = new CapturedQueue();
    await dispatchWritten(queue.asBinding(), statements, results);
    expect(queue.messages).toEqual([]);
    const rows = (
      await env.DB.prepare("SELECT type, dispatched_at FROM events WHERE workspace_id = ? ORDER BY id").bind(t.workspace.id).all<{ type: string; dispatched_at: number | null }>()
    ).results;
    expect(rows.map((r) => r.type)).toEqual(["subscriber.created", "subscriber.bounced"]);
    for (const row of rows) expect(row.dispatched_at).not.toBeNull();
    // The event log shows them all the same.
    expect((await t.call("GET", `${t.ws}/events`)).body.data.map((e: { type: string }) => e.type)).toEqual(["subscriber.bounced", "subscriber.created"]);
    // An endpoint that takes the type makes the next one wait for its dispatch.
    await createEndpoint(t, { events: ["subscriber.updated"] });
    const updated = await t.call("PATCH", `${t.ws}/subscribers/${ada.id}`, { body: { name: "Ada L." } });
    expect(updated.status).toBe(200);
    const [latest] = (
      await env.DB.prepare("SELECT type, dispatched_at FROM events WHERE workspace_id = ? ORDER BY id DESC LIMIT 1").bind(t.workspace.id).all<{ type: string; dispatched_at: number | null }>()
    ).results;
    expect(latest).toEqual({ type: "subscriber.updated", dispatched_at: null });
  });

  it("carries a delivery as the API shows it (what the provider webhooks write)", async () => {
    const t = await tenant();
    await createSubscriber(t);
    const campaign = await createCampaign(t);
    await waitForOperation(t, (await sendCampaign(t, campaign.id)).id);
    const [delivery] = (await t.call("GET", `${t.ws}/campaigns/${campaign.id}/deliveries`)).body.data;
    const statements = [
      env.DB.prepare("UPDATE deliveries SET updated_at = ?2 WHERE id = ?1").bind(delivery.id, Date.now()),
      outboxStatement(env.DB, { type: "delivery.bounced", resource: "delivery", id: delivery.id }, Date.now()),
    ];
    await env.DB.batch(statements);
    const [event] = (await t.call("GET", `${t.ws}/events?type=delivery.bounced`)).body.data;
    expect(event.data.object).toEqual({ ...delivery, updated_at: expect.any(String) });
  });

  it("a batch that fails after its event leaves neither the change nor the event", async () => {
    const t = await tenant();
    const ada = (await createSubscriber(t)).body.data;
    const failing = env.DB.prepare("INSERT INTO subscribers (id) VALUES (NULL)");
    await expect(
      env.DB.batch([
        markBounced(ada.id),
        outboxStatement(env.DB, { type: "subscriber.bounced", resource: "subscriber", id: ada.id }, Date.now()),
        failing,
      ]),
    ).rejects.toThrow();
    expect((await storedEvents(t.workspace.id)).map((e) => e.type)).toEqual(["subscriber.created"]);
    expect((await t.call("GET", `${t.ws}/subscribers/${ada.id}`)).body.data.status).toBe("active");
  });
});

describe("end to end", () => {
  it("a real send reaches a receiver as signed campaign.sending and campaign.sent", async () => {
    const { received } = receiver();
    const t = await tenant();
    const endpoint = await createEndpoint(t, { events: ["campaign.sending", "campaign.sent"] });
    await createSubscriber(t);
    const campaign = await createCampaign(t);
    const operation = await sendCampaign(t, campaign.id);
    expect((await waitForOperation(t, operation.id)).status).toBe("succeeded");
    await until(() => received.length >= 2, 10_000, "two events at the receiver");
    const payloads = received.map(
      (req) => new Webhook(endpoint.secret).verify(req.body, req.headers) as { type: string; data: { object: { id: string; status: string } } },
    );
    expect(payloads.map((p) => p.type).sort()).toEqual(["campaign.sending", "campaign.sent"]);
    for (const p of payloads) expect(p.data.object.id).toBe(campaign.id);
    expect(payloads.find((p) => p.type === "campaign.sent")!.data.object.status).toBe("sent");
    // The subscriber's event was not subscribed to: not delivered.
    expect(new Set(received.map((r) => r.headers["webhook-id"])).size).toBe(2);
    const events = (await t.call("GET", `${t.ws}/events`)).body.data as { id: string; type: string }[];
    expect(received.map((r) => r.headers["webhook-id"]).sort()).toEqual(
      events.filter((e) => e.type.startsWith("campaign.")).map((e) => e.id).sort(),
    );
  });
});
