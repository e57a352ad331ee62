import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import { RETRY_DELAYS_SECONDS, WEBHOOK_DEAD_LETTER_QUEUE } from "../src/webhooks/messages";
import { ulid } from "ulidx";
import { EVENT_TTL_MS, SWEEP_TAKE, sweepWebhooks } from "../src/webhooks/sweep";
import { tenant } from "./helpers";
import { attemptRow, CapturedQueue, consume, createEndpoint, RECEIVER, receiver, seedEvent } from "./webhooks.fixtures";

// Delivery, driven through the consumer with fake messages and a captured queue: signing, the retry
// schedule, redirects, huge and slow answers, stopped endpoints, fan-out per type; and the sweeper.

afterEach(() => {
  vi.restoreAllMocks();
});

describe("delivery", () => {
  it("signs per Standard Webhooks: the library's own verifier accepts it, a wrong secret does not", async () => {
    const { received } = receiver();
    const t = await tenant();
    const endpoint = await createEndpoint(t);
    const eventId = await seedEvent(t.workspace.id);
    const queue = new CapturedQueue();
    await consume(queue, [{ type: "dispatch", event_id: eventId }]);
    expect(queue.messages.map((m) => m.body)).toEqual([{ type: "deliver", attempt_id: expect.stringMatching(/^wa_/), try: 0 }]);
    await consume(queue, [queue.messages[0]!.body]);
    expect(received).toHaveLength(1);
    const req = received[0]!;
    expect(req.headers["content-type"]).toBe("application/json");
    expect(req.headers["webhook-id"]).toBe(eventId);
    expect(Number(req.headers["webhook-timestamp"])).toBeCloseTo(Date.now() / 1000, -1);
    const payload = new Webhook(endpoint.secret).verify(req.body, req.headers) as { type: string; timestamp: string; data: unknown };
    expect(payload.type).toBe("subscriber.created");
    expect(typeof payload.timestamp).toBe("string");
    const other = `whsec_${btoa("x".repeat(32))}`;
    expect(() => new Webhook(other).verify(req.body, req.headers)).toThrow();
    expect(() => new Webhook(endpoint.secret).verify(req.body.replace("subscriber", "campaign"), req.headers)).toThrow();
  });

  it("after rotate_secret, signs with the new secret and the old one for 24 h (retries of earlier events too), then the new one alone", async () => {
    let fail = true;
    const { received } = receiver(() => new Response(fail ? "down" : "ok", { status: fail ? 503 : 200 }));
    const t = await tenant();
    const endpoint = await createEndpoint(t);
    const eventId = await seedEvent(t.workspace.id);
    const queue = new CapturedQueue();
    await consume(queue, [{ type: "dispatch", event_id: eventId }]);
    await consume(queue, [queue.messages.at(-1)!.body]); // the first try fails, signed with the old secret
    const rotated = await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/rotate_secret`);
    const fresh = rotated.body.data.secret as string;
    fail = false;
    await consume(queue, [queue.messages.at(-1)!.body]); // the retry, after the rotation
    const retry = received.at(-1)!;
    expect(retry.headers["webhook-signature"]?.split(" ")).toHaveLength(2);
    for (const secret of [endpoint.secret, fresh]) expect(() => new Webhook(secret).verify(retry.body, retry.headers)).not.toThrow();
    // A second rotation keeps only the secret it replaced beside the new one.
    const again = (await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/rotate_secret`)).body.data.secret as string;
    await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/test`);
    await vi.waitFor(() => expect(received.length).toBeGreaterThan(2));
    const test = received.at(-1)!;
    for (const secret of [fresh, again]) expect(() => new Webhook(secret).verify(test.body, test.headers)).not.toThrow();
    expect(() => new Webhook(endpoint.secret).verify(test.body, test.headers)).toThrow();
    // 24 h after the rotation, the replaced secret signs no more.
    await env.DB.prepare("UPDATE webhook_endpoints SET previous_secret_expires_at = ? WHERE id = ?").bind(Date.now() - 1, endpoint.id).run();
    await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/test`);
    await vi.waitFor(() => expect(received.length).toBeGreaterThan(3));
    const late = received.at(-1)!;
    expect(late.headers["webhook-signature"]?.split(" ")).toHaveLength(1);
    expect(() => new Webhook(again).verify(late.body, late.headers)).not.toThrow();
    expect(() => new Webhook(fresh).verify(late.body, late.headers)).toThrow();
  });

  it("retries after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h, then the attempt is failed", async () => {
    const { received } = receiver(() => new Response("down for maintenance", { status: 503 }));
    const t = await tenant();
    const endpoint = await createEndpoint(t);
    const eventId = await seedEvent(t.workspace.id);
    const queue = new CapturedQueue();
    await consume(queue, [{ type: "dispatch", event_id: eventId }]);
    const delays: (number | undefined)[] = [];
    for (let i = 0; i < 8; i++) {
      const next = queue.messages.at(-1)!;
      if (i > 0) delays.push(next.delaySeconds);
      const count = queue.messages.length;
      await consume(queue, [next.body]);
      if (i < 7) expect(queue.messages.length).toBe(count + 1);
      else expect(queue.messages.length).toBe(count);
    }
    expect(delays).toEqual([5, 300, 1800, 7200, 18000, 36000, 36000]);
    expect(delays).toEqual([...RETRY_DELAYS_SECONDS]);
    expect(delays.every((d) => d! <= 12 * 3600)).toBe(true);
    expect(delays.reduce((a, b) => a! + b!, 0)).toBeGreaterThanOrEqual(24 * 3600);
    expect(received).toHaveLength(8);
    const attempts = (await t.call("GET", `${t.ws}/webhook_endpoints/${endpoint.id}/attempts`)).body.data;
    expect(attempts[0]).toMatchObject({
      status: "failed",
      attempts: 8,
      last_status_code: 503,
      last_error: "HTTP 503: down for maintenance",
      next_attempt_at: null,
    });
    // A duplicate of a try already made does nothing.
    await consume(queue, [queue.messages.at(-1)!.body]);
    expect(received).toHaveLength(8);
  });

  it("a redirect is a failure and is not followed; a huge body is not read, after a failure or a success", async () => {
    const pulled = { failed: 0, succeeded: 0 };
    /** 64 KiB chunks for as long as they are asked for (10 MB would be 160). */
    const endless = (kind: keyof typeof pulled) =>
      new ReadableStream({
        pull(controller) {
          pulled[kind]++;
          controller.enqueue(new Uint8Array(64 * 1024).fill(65));
        },
      });
    const { received } = receiver((req) =>
      req.url.endsWith("/redirect")
        ? new Response(null, { status: 301, headers: { location: `${RECEIVER}/followed` } })
        : req.url.endsWith("/followed")
          ? new Response(null, { status: 204 })
          : new Response(endless(req.url.endsWith("/huge-ok") ? "succeeded" : "failed"), { status: req.url.endsWith("/huge-ok") ? 200 : 500 }),
    );
    const t = await tenant();
    const redirecting = await createEndpoint(t, { url: `${RECEIVER}/redirect` });
    const huge = await createEndpoint(t, { url: `${RECEIVER}/huge` });
    const hugeOk = await createEndpoint(t, { url: `${RECEIVER}/huge-ok` });
    const eventId = await seedEvent(t.workspace.id);
    const queue = new CapturedQueue();
    await consume(queue, [{ type: "dispatch", event_id: eventId }]);
    await consume(queue, queue.messages.map((m) => m.body));
    // The redirect's target was never asked.
    expect(received.map((r) => r.url).sort()).toEqual([`${RECEIVER}/huge`, `${RECEIVER}/huge-ok`, `${RECEIVER}/redirect`]);
    const [ok] = (await t.call("GET", `${t.ws}/webhook_endpoints/${hugeOk.id}/attempts`)).body.data;
    expect(ok).toMatchObject({ status: "succeeded", attempts: 1, last_status_code: 200 });
    // A success's body is cancelled unread: at most what the stream had buffered.
    expect(pulled.succeeded).toBeLessThanOrEqual(2);
    const [a] = (await t.call("GET", `${t.ws}/webhook_endpoints/${redirecting.id}/attempts`)).body.data;
    expect(a).toMatchObject({ status: "pending", attempts: 1, last_status_code: 301 });
    expect(a.last_error).toContain("redirects are not followed");
    const [b] = (await t.call("GET", `${t.ws}/webhook_endpoints/${huge.id}/attempts`)).body.data;
    expect(b).toMatchObject({ status: "pending", attempts: 1, last_status_code: 500 });
    expect(b.last_error.length).toBeLessThanOrEqual(500);
    // 10 MB would be 160 chunks: only the first few hundred bytes were read.
    expect(pulled.failed).toBeLessThanOrEqual(3);
  });

  it("a slow endpoint times out after 10 s without holding up another endpoint's delivery", async () => {
    const finished: Record<string, number> = {};
    const started = Date.now();
    receiver((req, signal) => {
      if (req.url.endsWith("/fast")) {
        finished.fast = Date.now() - started;
        return new Response(null, { status: 200 });
      }
      // An error whose body starts and then never ends (nor errors): the try's time ends the reading.
      if (req.url.endsWith("/stalled")) {
        return new Response(
          new ReadableStream({
            start(controller) {
              controller.enqueue(new TextEncoder().encode("overloaded"));
            },
            pull: () => new Promise<void>(() => {}),
          }),
          { status: 503 },
        );
      }
      // Never answers: only the try's own timeout ends it.
      return new Promise<Response>((_, reject) => signal?.addEventListener("abort", () => reject(signal.reason)));
    });
    const t = await tenant();
    const slow = await createEndpoint(t, { url: `${RECEIVER}/slow` });
    const fast = await createEndpoint(t, { url: `${RECEIVER}/fast` });
    const stalled = await createEndpoint(t, { url: `${RECEIVER}/stalled` });
    const eventId = await seedEvent(t.workspace.id);
    const queue = new CapturedQueue();
    await consume(queue, [{ type: "dispatch", event_id: eventId }]);
    await consume(queue, queue.messages.map((m) => m.body));
    const elapsed = Date.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(9_500);
    expect(finished.fast).toBeLessThan(2_000);
    const [s] = (await t.call("GET", `${t.ws}/webhook_endpoints/${slow.id}/attempts`)).body.data;
    expect(s).toMatchObject({ status: "pending", attempts: 1, last_status_code: null, last_error: "no answer within 10 s" });
    const [f] = (await t.call("GET", `${t.ws}/webhook_endpoints/${fast.id}/attempts`)).body.data;
    expect(f).toMatchObject({ status: "succeeded", attempts: 1 });
    const [st] = (await t.call("GET", `${t.ws}/webhook_endpoints/${stalled.id}/attempts`)).body.data;
    expect(st).toMatchObject({ status: "pending", attempts: 1, last_status_code: 503, last_error: "HTTP 503: overloaded" });
  }, 20_000);

  it("a stale copy of a try does nothing; a try dead-lettered by the queue ends its attempt failed, without posting", async () => {
    const { received } = receiver(() => new Response(null, { status: 500 }));
    const t = await tenant();
    const endpoint = await createEndpoint(t);
    const eventId = await seedEvent(t.workspace.id);
    const queue = new CapturedQueue();
    await consume(queue, [{ type: "dispatch", event_id: eventId }]);
    const firstTry = queue.messages.at(-1)!.body;
    await consume(queue, [firstTry]); // the first try fails: a retry is queued
    expect(received).toHaveLength(1);
    const retry = queue.messages.at(-1)!.body;
    // A stale copy of the first try (a queue delivers at least once) posts nothing and queues nothing.
    const queued = queue.messages.length;
    await consume(queue, [firstTry]);
    expect(received).toHaveLength(1);
    expect(queue.messages).toHaveLength(queued);
    expect(retry).toMatchObject({ type: "deliver" });
    vi.spyOn(console, "error").mockImplementation(() => {});
    const [dead, malformed] = await consume(queue, [retry, { type: "nonsense" }], {}, WEBHOOK_DEAD_LETTER_QUEUE);
    expect(dead!.ack).toHaveBeenCalled();
    expect(malformed!.ack).toHaveBeenCalled();
    expect(received).toHaveLength(1);
    const [attempt] = (await t.call("GET", `${t.ws}/webhook_endpoints/${endpoint.id}/attempts`)).body.data;
    expect(attempt).toMatchObject({ status: "failed", attempts: 1 });
    expect(attempt.last_error).toContain("could not be processed");
  });

  it("a disabled or deleted endpoint receives nothing more: its pending retries end failed", async () => {
    const { received } = receiver(() => new Response(null, { status: 500 }));
    const t = await tenant();
    const disabled = await createEndpoint(t, { url: `${RECEIVER}/a` });
    const deleted = await createEndpoint(t, { url: `${RECEIVER}/b` });
    const eventId = await seedEvent(t.workspace.id);
    const queue = new CapturedQueue();
    await consume(queue, [{ type: "dispatch", event_id: eventId }]);
    await consume(queue, queue.messages.map((m) => m.body));
    expect(received).toHaveLength(2);
    const retries = queue.messages.slice(2).map((m) => m.body);
    expect(retries).toHaveLength(2);
    await t.call("PATCH", `${t.ws}/webhook_endpoints/${disabled.id}`, { body: { enabled: false } });
    await t.call("DELETE", `${t.ws}/webhook_endpoints/${deleted.id}`);
    await consume(queue, retries);
    expect(received).toHaveLength(2);
    const [a] = (await t.call("GET", `${t.ws}/webhook_endpoints/${disabled.id}/attempts`)).body.data;
    // What ended it is the stop, not the first try's answer: no status code beside the stop's reason.
    expect(a).toMatchObject({ status: "failed", attempts: 1, last_status_code: null, next_attempt_at: null });
    expect(a.last_error).toContain("disabled");
    // A later event creates no attempt for either.
    const later = await seedEvent(t.workspace.id);
    const before = queue.messages.length;
    await consume(queue, [{ type: "dispatch", event_id: later }]);
    expect(queue.messages.length).toBe(before);
  });

  it("on a deployed service, an endpoint left at a local address (registered in development) is never called: its attempt ends failed", async () => {
    const { received } = receiver();
    const t = await tenant();
    const local = await createEndpoint(t, { url: "http://127.0.0.1:9000/hook" });
    const eventId = await seedEvent(t.workspace.id);
    const queue = new CapturedQueue();
    const deployed = { PUBLIC_BASE_URL: "https://news.example.com" };
    await consume(queue, [{ type: "dispatch", event_id: eventId }], deployed);
    await consume(queue, queue.messages.map((m) => m.body), deployed);
    expect(received).toHaveLength(0);
    const [attempt] = (await t.call("GET", `${t.ws}/webhook_endpoints/${local.id}/attempts`)).body.data;
    expect(attempt).toMatchObject({ status: "failed", last_status_code: null, next_attempt_at: null });
    expect(attempt.last_error).toContain("on a deployed service");
  });

  it("an event goes only to endpoints that list its type (or *), once per endpoint even when dispatched twice", async () => {
    receiver();
    const t = await tenant();
    await createEndpoint(t, { url: `${RECEIVER}/all` });
    await createEndpoint(t, { url: `${RECEIVER}/subs`, events: ["subscriber.created"] });
    await createEndpoint(t, { url: `${RECEIVER}/camps`, events: ["campaign.sent"] });
    const eventId = await seedEvent(t.workspace.id);
    const queue = new CapturedQueue();
    await consume(queue, [{ type: "dispatch", event_id: eventId }, { type: "dispatch", event_id: eventId }]);
    await consume(queue, [{ type: "dispatch", event_id: eventId }]);
    expect(queue.messages).toHaveLength(2);
  });
});

describe("the sweeper", () => {
  it("dispatches events whose enqueue was lost, a minute after their write, bounded per run", async () => {
    const t = await tenant();
    const now = Date.now();
    const old = await seedEvent(t.workspace.id, { createdAt: now - 2 * 60_000 });
    await seedEvent(t.workspace.id, { createdAt: now - 1_000 });
    // More than a run takes (a 1,000-subscriber import whose enqueue was lost, and then some).
    expect(SWEEP_TAKE).toBe(1_000);
    await Promise.all(Array.from({ length: SWEEP_TAKE + 20 }, (_, i) => seedEvent(t.workspace.id, { createdAt: now - 3 * 60_000 + i })));
    const queue = new CapturedQueue();
    await sweepWebhooks({ ...env, WEBHOOK_QUEUE: queue.asBinding() }, now);
    const dispatched = queue.messages.map((m) => (m.body as { event_id: string }).event_id);
    expect(dispatched).toHaveLength(SWEEP_TAKE);
    // Oldest first; the recent one (its own enqueue may still be under way) is left alone.
    expect(dispatched).not.toContain(old);
    // Once dispatched (attempts created), the sweeper no longer sees them.
    await consume(queue, queue.messages.map((m) => m.body));
    const again = new CapturedQueue();
    await sweepWebhooks({ ...env, WEBHOOK_QUEUE: again.asBinding() }, now);
    const second = again.messages.map((m) => (m.body as { event_id: string }).event_id);
    expect(second).toHaveLength(21);
    expect(second).toContain(old);
  });

  it("re-sends a pending attempt whose next try is long overdue (its message was lost)", async () => {
    receiver(() => new Response(null, { status: 500 }));
    const t = await tenant();
    await createEndpoint(t);
    const eventId = await seedEvent(t.workspace.id);
    const queue = new CapturedQueue();
    await consume(queue, [{ type: "dispatch", event_id: eventId }]);
    const first = queue.messages[0]!.body as { attempt_id: string };
    await consume(queue, [first]);
    const row = await attemptRow(first.attempt_id);
    const swept = new CapturedQueue();
    await sweepWebhooks({ ...env, WEBHOOK_QUEUE: swept.asBinding() }, row!.next_attempt_at! + 6 * 60_000);
    expect(swept.messages.map((m) => m.body)).toEqual([{ type: "deliver", attempt_id: first.attempt_id, try: 1 }]);
  });

  it("keeps events and their attempts 30 days: then finished attempts go, and events no attempt refers to", async () => {
    const t = await tenant();
    const endpoint = await createEndpoint(t);
    const now = Date.now();
    const old = now - EVENT_TTL_MS - 60_000;
    // Ids made at those times (the service's own generator never goes back in time).
    const event = (at: number) => seedEvent(t.workspace.id, { id: `evt_${ulid(at)}`, createdAt: at, type: "webhook.test" });
    const attempt = async (eventId: string, at: number, status: "pending" | "succeeded" | "failed") => {
      const id = `wa_${ulid(at)}`;
      await env.DB.prepare(
        `INSERT INTO webhook_attempts (id, workspace_id, endpoint_id, event_id, status, attempts, next_attempt_at, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 1, ?6, ?7, ?7)`,
      )
        .bind(id, t.workspace.id, endpoint.id, eventId, status, status === "pending" ? now : null, at)
        .run();
      return id;
    };
    const delivered = await event(old);
    const deliveredAttempt = await attempt(delivered, old, "succeeded");
    const gaveUp = await event(old);
    await attempt(gaveUp, old, "failed");
    const unmatched = await event(old);
    const stillTrying = await event(old);
    const tryingAttempt = await attempt(stillTrying, old, "pending");
    const dispatchedLate = await event(old);
    const lateAttempt = await attempt(dispatchedLate, now - 1000, "succeeded");
    const recent = await event(now - 1000);
    const recentAttempt = await attempt(recent, now - 1000, "succeeded");

    await sweepWebhooks({ ...env, WEBHOOK_QUEUE: new CapturedQueue().asBinding() }, now);
    const ids = async (table: string) =>
      (await env.DB.prepare(`SELECT id FROM ${table} WHERE workspace_id = ? ORDER BY id`).bind(t.workspace.id).all<{ id: string }>()).results.map((r) => r.id);
    expect(await ids("events")).toEqual([stillTrying, dispatchedLate, recent].sort());
    expect(await ids("webhook_attempts")).toEqual([tryingAttempt, lateAttempt, recentAttempt].sort());
    expect(deliveredAttempt).not.toBe(lateAttempt);
    // Through the API: gone is not found, kept is listed.
    expect((await t.call("GET", `${t.ws}/events/${delivered}`)).status).toBe(404);
    expect((await t.call("GET", `${t.ws}/events/${unmatched}`)).status).toBe(404);
    expect((await t.call("GET", `${t.ws}/events/${gaveUp}`)).status).toBe(404);
    const listed = (await t.call("GET", `${t.ws}/events`)).body.data.map((e: { id: string }) => e.id);
    expect(listed).toEqual(expect.arrayContaining([recent, stillTrying, dispatchedLate]));
    expect(listed).not.toContain(delivered);
  });
});
