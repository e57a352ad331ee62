import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createCredential, expectError, tenant, until } from "./helpers";
import { harness } from "./send.harness";
import { deliverTry } from "../src/webhooks/consumer";
import { attemptRow, createEndpoint, RECEIVER, receiver } from "./webhooks.fixtures";

// Webhook endpoints: the resource, its rules and its test send (delivery: webhooks.delivery.test.ts).

afterEach(() => {
  vi.restoreAllMocks();
});

describe("webhook endpoints", () => {
  it("creates, lists, reads, updates, rotates and deletes; the secret shows only on create and rotate", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/webhook_endpoints`, {
      body: { url: RECEIVER, events: ["subscriber.unsubscribed", "campaign.sent"], description: "CRM sync" },
    });
    expect(created.status, created.text).toBe(201);
    const endpoint = created.body.data;
    expect(endpoint).toMatchObject({
      object: "webhook_endpoint",
      url: RECEIVER,
      events: ["subscriber.unsubscribed", "campaign.sent"],
      description: "CRM sync",
      enabled: true,
    });
    expect(endpoint.id).toMatch(/^we_/);
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(atob(endpoint.secret.slice(6))).toHaveLength(32);

    const list = await t.call("GET", `${t.ws}/webhook_endpoints`);
    expect(list.status).toBe(200);
    expect(list.body.data.map((e: { id: string }) => e.id)).toEqual([endpoint.id]);
    expect(list.body.data[0].secret).toBeUndefined();
    const one = await t.call("GET", `${t.ws}/webhook_endpoints/${endpoint.id}`);
    expect(one.body.data.secret).toBeUndefined();

    const patched = await t.call("PATCH", `${t.ws}/webhook_endpoints/${endpoint.id}`, { body: { enabled: false, events: ["*"] } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data).toMatchObject({ enabled: false, events: ["*"], description: "CRM sync" });
    // Every value given already there: nothing written, updated_at unmoved.
    await new Promise((r) => setTimeout(r, 5));
    const same = await t.call("PATCH", `${t.ws}/webhook_endpoints/${endpoint.id}`, { body: { enabled: false, events: ["*"], url: patched.body.data.url } });
    expect(same.status, same.text).toBe(200);
    expect(same.body.data).toEqual(patched.body.data);

    // No parameters: anything in the body is refused, and nothing is rotated or sent.
    expectError(await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/rotate_secret`, { body: { a: 1 } }), 400, "validation_failed", "a");
    expectError(await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/test`, { body: { x: 1 } }), 400, "validation_failed", "x");
    const rotated = await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/rotate_secret`);
    expect(rotated.status, rotated.text).toBe(200);
    expect((await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/rotate_secret`, { body: {} })).status).toBe(200);
    expect(rotated.body.data.secret).toMatch(/^whsec_/);
    expect(rotated.body.data.secret).not.toBe(endpoint.secret);

    // A DELETE takes no parameters: a body that says something is refused, and nothing is deleted.
    const path = `${t.ws}/webhook_endpoints/${endpoint.id}`;
    expectError(await t.call("DELETE", path, { body: { x: 1 } }), 400, "validation_failed", "x");
    expectError(await t.call("DELETE", path, { raw: "{bad", headers: { "content-type": "application/json" } }), 400, "invalid_json");
    expectError(await t.call("DELETE", path, { raw: "x", headers: { "content-type": "text/plain" } }), 415, "unsupported_media_type");
    expect((await t.call("GET", path)).status).toBe(200);
    const deleted = await t.call("DELETE", path);
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body.data).toEqual({ id: endpoint.id, object: "webhook_endpoint", deleted: true });
    const gone = await t.call("GET", `${t.ws}/webhook_endpoints/${endpoint.id}`);
    expectError(gone, 404, "not_found", "endpoint_id");
    expect(gone.body.error.message).toBe(`No such webhook endpoint: ${endpoint.id}`);
    expect((await t.call("DELETE", `${t.ws}/webhook_endpoints/${endpoint.id}`)).status).toBe(404);
    expect((await t.call("GET", `${t.ws}/webhook_endpoints`)).body.data).toEqual([]);
  });

  it("keeps the signing secret out of stored events and Idempotency-Key records", async () => {
    const t = await tenant();
    const endpoint = await createEndpoint(t);
    const patched = await t.call("PATCH", `${t.ws}/webhook_endpoints/${endpoint.id}`, {
      body: { description: "kept" },
      headers: { "idempotency-key": "patch-endpoint-0001" },
    });
    expect(patched.status, patched.text).toBe(200);
    vi.spyOn(globalThis, "fetch").mockImplementation(async () => new Response(null, { status: 204 }));
    expect((await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/test`)).status).toBe(200);
    const attempts = `${t.ws}/webhook_endpoints/${endpoint.id}/attempts`;
    await until(async () => (await t.call("GET", attempts)).body.data[0]?.status === "succeeded");
    const secret = endpoint.secret.slice("whsec_".length);
    const stored = await env.DB.prepare(
      "SELECT snapshot AS text FROM events WHERE workspace_id = ?1 UNION ALL SELECT response AS text FROM idempotency_keys",
    )
      .bind(t.workspace.id)
      .all<{ text: string }>();
    expect(stored.results.length).toBeGreaterThanOrEqual(2);
    for (const row of stored.results) expect(row.text).not.toContain(secret);
    // The replay still answers as the first time.
    const again = await t.call("PATCH", `${t.ws}/webhook_endpoints/${endpoint.id}`, {
      body: { description: "kept" },
      headers: { "idempotency-key": "patch-endpoint-0001" },
    });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.text).toBe(patched.text);
  });

  it("replays a keyed create's and a keyed rotation's secret, even after a later rotation and the endpoint's delete", async () => {
    const t = await tenant();
    const create = { body: { url: RECEIVER, events: ["*"] }, headers: { "idempotency-key": "create-endpoint-0001" } };
    const created = await t.call("POST", `${t.ws}/webhook_endpoints`, create);
    expect(created.status, created.text).toBe(201);
    const path = `${t.ws}/webhook_endpoints/${created.body.data.id}`;
    const rotate = { headers: { "idempotency-key": "rotate-endpoint-0001" } };
    const rotated = await t.call("POST", `${path}/rotate_secret`, rotate);
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.data.secret).not.toBe(created.body.data.secret);
    expect((await t.call("POST", `${path}/rotate_secret`)).status).toBe(200);
    expect((await t.call("DELETE", path)).status).toBe(200);

    // A client that lost either answer reads the secret it was given then, byte for byte.
    for (const [first, again] of [
      [created, await t.call("POST", `${t.ws}/webhook_endpoints`, create)],
      [rotated, await t.call("POST", `${path}/rotate_secret`, rotate)],
    ] as const) {
      expect(again.status, again.text).toBe(first.status);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(again.text).toBe(first.text);
    }
    expect((await t.call("GET", path)).status).toBe(404);
  });

  it("stores an event list holding \"*\" as [\"*\"] and a repeated type once", async () => {
    const t = await tenant();
    expect((await createEndpoint(t, { events: ["subscriber.created", "*", "subscriber.created"] })).events).toEqual(["*"]);
    expect((await createEndpoint(t, { events: ["subscriber.created", "campaign.sent", "subscriber.created"] })).events).toEqual(["subscriber.created", "campaign.sent"]);
  });

  it("rejects non-https URLs and unknown event types, naming the field; takes scheme and host in any case", async () => {
    const t = await tenant();
    const bad = async (body: Record<string, unknown>, param: string, message?: string) => {
      const res = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url: RECEIVER, events: ["*"], ...body } });
      expect(res.status, res.text).toBe(400);
      expect(res.body.error.code).toBe("validation_failed");
      expect(res.body.error.param).toBe(param);
      if (message) expect(res.body.error.message).toBe(message);
    };
    // Each says which rule the URL breaks.
    await bad({ url: "http://example.com/hook" }, "url", "url must use https (http only for localhost and 127.0.0.1, in local development)");
    await bad({ url: "http://localhost./hook" }, "url");
    await bad({ url: "ftp://example.com/hook" }, "url", "url must use https, not ftp:");
    await bad({ url: "not a url" }, "url", "url must not contain spaces or other whitespace (percent-encode them: %20)");
    await bad({ url: "example.com/hook" }, "url", "url must start with https:// (an absolute URL)");
    await bad({ url: "https://user:pw@example.com/hook" }, "url", "url must not hold user info (user:password@): put a secret in the path or query, or verify our signature");
    await bad({ url: "https://example.com/hook#part" }, "url", "url must not hold a fragment (#…): it is never sent to the server");
    await bad({ url: "https://example.com:99999/hook" }, "url", "url has port 99999, past 65535");
    await bad({ url: "https://[::g]/hook" }, "url", "url must be an https URL to a host name, an IPv4 address or a bracketed IPv6 address (http only for localhost and 127.0.0.1, in local development), without user info, fragment or spaces");
    await bad({ url: "https://example.com/a hook" }, "url");
    await bad({ url: `https://example.com/${"a".repeat(2049 - "https://example.com/".length)}` }, "url");
    await bad({ description: "d".repeat(501) }, "description");
    await bad({ events: ["subscriber.created", "subscriber.exploded"] }, "events[1]");
    await bad({ events: [] }, "events");
    // Development receivers on this machine are fine with a test credential.
    for (const url of ["http://localhost:8787/hook", "http://127.0.0.1:9000/hook", "HTTP://LocalHost:8787/hook", "HTTPS://Example.COM/hook", "https://example.com./hook"]) {
      const res = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url, events: ["*"] } });
      expect(res.status, res.text).toBe(201);
    }
    // The limits themselves are fine.
    const longest = `https://example.com/${"a".repeat(2048 - "https://example.com/".length)}`;
    const atLimits = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url: longest, events: ["*"], description: "d".repeat(500) } });
    expect(atLimits.status, atLimits.text).toBe(201);
    expect(atLimits.body.data.url).toBe(longest);
  });

  it("with a live credential in local development, accepts this machine's addresses and rejects private, link-local and unique-local ones", async () => {
    const t = await tenant("Live", "live");
    // The contract's development receivers: http://localhost and http://127.0.0.1, and the other loopback spellings.
    for (const url of [
      "http://localhost:9000/hook",
      "http://127.0.0.1:9000/hook",
      "https://localhost/hook",
      "https://api.localhost/hook",
      "https://localhost./hook",
      "HTTPS://LOCALHOST/hook",
      "https://127.1.2.3/hook",
      "https://[::1]/hook",
      "https://[::ffff:127.0.0.1]/hook",
    ]) {
      const res = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url, events: ["*"] } });
      expect(res.status, `${url}: ${res.text}`).toBe(201);
    }
    for (const url of [
      "https://10.1.2.3/hook",
      "https://172.16.0.1/hook",
      "https://192.168.1.1/hook",
      "https://169.254.169.254/latest",
      "https://100.64.0.1/hook",
      "https://[fe80::1]/hook",
      "https://[fd12:3456::1]/hook",
      "https://[::ffff:10.0.0.1]/hook",
      // IPv4 inside IPv6 by other means: NAT64, IPv4-compatible, translated, 6to4; and site-local, discard.
      "https://[64:ff9b::7f00:1]/hook",
      "https://[64:ff9b::a00:1]/hook",
      "https://[::127.0.0.1]/hook",
      "https://[::a00:1]/hook",
      "https://[::ffff:0:7f00:1]/hook",
      "https://[2002:7f00:1::]/hook",
      "https://[fec0::1]/hook",
      "https://[100::1]/hook",
      // The rest of ::/8 (reserved, never routed).
      "https://[::1:ffff:a00:1]/hook",
      "https://[ff:1::1]/hook",
      "https://example.com:0/hook",
      "https://192.0.2.10/hook",
      "https://198.51.100.7/hook",
      "https://203.0.113.9/hook",
      "https://[3fff::1]/hook",
      "https://[2001:db8::1]/hook",
      // Teredo (its client address, inverted, is 127.0.0.1), benchmarking, ORCHID; the 6to4 relay.
      "https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook",
      "https://[2001:2::1]/hook",
      "https://[2001:10::1]/hook",
      "https://192.88.99.1/hook",
    ]) {
      const res = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url, events: ["*"] } });
      expect(res.status, `${url}: ${res.text}`).toBe(400);
      expect(res.body.error.param).toBe("url");
      expect(res.body.error.message).toMatch(/with a live credential \(in local development a live credential may use this machine's addresses, a test credential any local one\)/);
    }
    // The same forms around a public address are fine.
    for (const url of ["https://[64:ff9b::5db8:d822]/hook", "https://[2002:5db8:d822::1]/hook", "https://[2606:4700::1111]/hook", "https://192.0.78.9/hook", "https://[3fff:1000::1]/hook"]) {
      const res = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url, events: ["*"] } });
      expect(res.status, `${url}: ${res.text}`).toBe(201);
    }
    const ok = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url: "https://93.184.216.34/hook", events: ["*"] } });
    expect(ok.status, ok.text).toBe(201);
    const patch = await t.call("PATCH", `${t.ws}/webhook_endpoints/${ok.body.data.id}`, { body: { url: "https://[fd00::1]/x" } });
    expect(patch.status).toBe(400);
    expect(patch.body.error.param).toBe("url");
  });

  it("on a deployed service (public PUBLIC_BASE_URL), every credential is refused local addresses: the workspace's live events go to every endpoint", async () => {
    const h = await harness("test", { PUBLIC_BASE_URL: "https://news.example.com" });
    const live = await harness("live", { PUBLIC_BASE_URL: "https://news.example.com" });
    for (const t of [h.t, live.t]) {
      for (const url of ["http://127.0.0.1:9000/hook", "http://localhost:8787/hook", "https://169.254.169.254/latest", "https://10.0.0.1/", "https://[::1]/"]) {
        const res = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url, events: ["*"] } });
        expect(res.status, `${url}: ${res.text}`).toBe(400);
        expect(res.body.error.param).toBe("url");
        expect(res.body.error.message).toMatch(/on a deployed service/);
      }
    }
    const ok = await h.t.call("POST", `${h.t.ws}/webhook_endpoints`, { body: { url: "https://hooks.example.com/in", events: ["*"] } });
    expect(ok.status, ok.text).toBe(201);
    const patch = await h.t.call("PATCH", `${h.t.ws}/webhook_endpoints/${ok.body.data.id}`, { body: { url: "https://10.0.0.1/x" } });
    expect(patch.status).toBe(400);
    expect(patch.body.error.param).toBe("url");
  });

  it("allows 20 endpoints per workspace; the 21st is a 409 webhook_endpoint_limit_reached", async () => {
    const t = await tenant();
    for (let i = 0; i < 20; i++) await createEndpoint(t, { url: `${RECEIVER}/${i}` });
    const res = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url: RECEIVER, events: ["*"] } });
    expect(res.status, res.text).toBe(409);
    expect(res.body.error.code).toBe("webhook_endpoint_limit_reached");
    // A deleted endpoint frees its place.
    const first = (await t.call("GET", `${t.ws}/webhook_endpoints?limit=1`)).body.data[0];
    expect((await t.call("DELETE", `${t.ws}/webhook_endpoints/${first.id}`)).status).toBe(200);
    await createEndpoint(t);
  });

  it("needs webhooks:read to read and webhooks:write to change; another workspace's endpoint is a 404", async () => {
    const t = await tenant();
    const endpoint = await createEndpoint(t);
    const reader = await createCredential([t.workspace.id], { scopes: ["webhooks:read"] });
    const asReader = { token: reader.token };
    const { call } = await import("./helpers");
    expect((await call("GET", `${t.ws}/webhook_endpoints`, asReader)).status).toBe(200);
    const denied = await call("POST", `${t.ws}/webhook_endpoints`, { ...asReader, body: { url: RECEIVER, events: ["*"] } });
    expect(denied.status).toBe(403);
    const other = await tenant("Other");
    expect((await other.call("GET", `${other.ws}/webhook_endpoints/${endpoint.id}`)).status).toBe(404);
  });

  it("POST /test sends a signed webhook.test at once and lists the attempt", async () => {
    const { received } = receiver();
    const t = await tenant();
    const endpoint = await createEndpoint(t, { events: ["campaign.sent"] });
    const res = await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/test`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ object: "webhook_attempt", status: "pending", attempts: 0 });
    await until(() => received.length === 1);
    const [req] = received;
    const payload = new Webhook(endpoint.secret).verify(req!.body, req!.headers) as { type: string; data: { object: { id: string } } };
    expect(payload.type).toBe("webhook.test");
    expect(payload.data.object.id).toBe(endpoint.id);
    expect(req!.headers["webhook-id"]).toBe(res.body.data.event_id);
    await until(async () => (await attemptRow(res.body.data.id))?.status === "succeeded");
    const attempts = await t.call("GET", `${t.ws}/webhook_endpoints/${endpoint.id}/attempts`);
    expect(attempts.status).toBe(200);
    expect(attempts.body.data).toHaveLength(1);
    expect(attempts.body.data[0]).toMatchObject({ status: "succeeded", attempts: 1, last_status_code: 204, last_error: null });
    expect((await t.call("POST", `${t.ws}/webhook_endpoints/we_01JD6Q3Z6W9X8B4N2M5K7P1R3T/test`)).status).toBe(404);
  });

  it("POST /test reaches a disabled endpoint too (it was asked for by name), while events do not", async () => {
    const { received } = receiver();
    const t = await tenant();
    const endpoint = await createEndpoint(t, { enabled: false });
    const res = await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/test`);
    expect(res.status, res.text).toBe(200);
    await until(async () => (await attemptRow(res.body.data.id))?.status === "succeeded");
    expect(received.map((r) => JSON.parse(r.body).type)).toEqual(["webhook.test"]);
    // A test event is in the event log too, under its own type.
    const logged = await t.call("GET", `${t.ws}/events?type=webhook.test`);
    expect(logged.body.data.map((e: { id: string }) => e.id)).toEqual([res.body.data.event_id]);
  });

  it("a test event's retries, like any event's, reach only an enabled endpoint: disabled, they end failed untried", async () => {
    for (const disabledAt of ["after its first try", "before it"] as const) {
      const { received } = receiver(() => new Response(null, { status: 500 }));
      const t = await tenant();
      const endpoint = await createEndpoint(t, { enabled: disabledAt === "after its first try" });
      const res = await t.call("POST", `${t.ws}/webhook_endpoints/${endpoint.id}/test`);
      expect(res.status, res.text).toBe(200);
      // The first try goes (asked for by name) and meets a 500: a retry is due.
      await until(async () => (await attemptRow(res.body.data.id))?.attempts === 1);
      expect(received).toHaveLength(1);
      if (disabledAt === "after its first try") await t.call("PATCH", `${t.ws}/webhook_endpoints/${endpoint.id}`, { body: { enabled: false } });
      await deliverTry(env, res.body.data.id, 1);
      expect(received).toHaveLength(1);
      const [attempt] = (await t.call("GET", `${t.ws}/webhook_endpoints/${endpoint.id}/attempts`)).body.data;
      expect(attempt).toMatchObject({ status: "failed", attempts: 1, next_attempt_at: null });
      expect(attempt.last_error).toContain("disabled");
      vi.restoreAllMocks();
    }
  });
});
