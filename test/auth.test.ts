import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { credentialCacheFor } from "../src/credentials/credential-cache";
import { hashToken } from "../src/credentials/tokens";
import { secondsLeftInWindow } from "../src/middleware/auth";
import { admin, call, createCredential, createWorkspace, expectError, tenant, tripsOf } from "./helpers";

const WORKERS_DEV = "https://newsletter.acme.workers.dev";

describe("authentication", () => {
  it("requires a credential on every resource route", async () => {
    const ws = await createWorkspace();
    for (const [method, path] of [
      ["GET", "/v1/workspaces"],
      ["GET", `/v1/workspaces/${ws.id}/subscribers`],
      ["POST", `/v1/workspaces/${ws.id}/subscribers`],
      ["GET", "/workspaces"],
    ] as const) {
      const res = await call(method, path);
      expectError(res, 401, "missing_credential");
      expect(res.body.error.type).toBe("authentication_error");
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="newsletter"');
    }
  });

  it("rejects malformed and unknown tokens alike", async () => {
    const ws = await createWorkspace();
    const { token } = await createCredential([ws.id]);
    for (const header of [
      "Bearer",
      `Token ${token}`,
      "Bearer svc_test_short",
      "Bearer sk_test_0123456789abcdefghijklmnopqrstuvwxyz",
      `Bearer svc_live_${token.slice("svc_test_".length)}`,
      "Bearer svc_test_0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    ]) {
      const res = await call("GET", "/v1/workspaces", { headers: { authorization: header } });
      expectError(res, 401, "invalid_credential");
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="newsletter", error="invalid_token"');
    }
    // A header without the Bearer scheme says how to write it.
    const bare = await call("GET", "/v1/workspaces", { headers: { authorization: token } });
    expect(bare.body.error.message).toContain("must be Bearer <token>");
  });

  it("stops accepting a token as soon as it is revoked", async () => {
    const t = await tenant();
    expect((await t.call("GET", "/v1/workspaces")).status).toBe(200);
    const revoked = await admin("DELETE", `/admin/credentials/${t.credential.id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.data.revoked_at).toMatch(/Z$/);
    expectError(await t.call("GET", "/v1/workspaces"), 401, "invalid_credential");
    expectError(await t.call("GET", `${t.ws}/subscribers`), 401, "invalid_credential");
  });

  it("stays revoked where it was revoked when a lookup from before the revocation caches the row late", async () => {
    const t = await tenant();
    const original = caches.default.put.bind(caches.default);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const late: Promise<void>[] = [];
    const put = vi.spyOn(caches.default, "put").mockImplementation((key, value) => {
      if (put.mock.calls.length > 1) return original(key, value);
      // The first put is the lookup's live row: it lands only after the revocation.
      const landed = gate.then(() => original(key, value));
      late.push(landed);
      return landed;
    });
    try {
      expect((await t.call("GET", "/v1/workspaces")).status).toBe(200);
      expect((await admin("DELETE", `/admin/credentials/${t.credential.id}`)).status).toBe(200);
      expectError(await t.call("GET", "/v1/workspaces"), 401, "invalid_credential");
      release();
      await Promise.all(late);
      // The revocation writes its tombstone again a second later, over the late live row.
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      expectError(await t.call("GET", "/v1/workspaces"), 401, "invalid_credential");
    } finally {
      put.mockRestore();
    }
  });

  it("does not cache a live row over a revocation's tombstone", async () => {
    const t = await tenant();
    expect((await admin("DELETE", `/admin/credentials/${t.credential.id}`)).status).toBe(200);
    const tokenHash = await hashToken(t.token);
    for (const cache of [credentialCacheFor("https://api.example.test/"), credentialCacheFor(WORKERS_DEV)]) {
      const revoked = await cache.get(tokenHash);
      expect(revoked?.revokedAt).not.toBeNull();
      if (!revoked) throw new Error("the revocation left no tombstone");
      await cache.remember({ ...revoked, revokedAt: null });
      expect((await cache.get(tokenHash))?.revokedAt).toBe(revoked.revokedAt);
    }
    expectError(await t.call("GET", "/v1/workspaces"), 401, "invalid_credential");
    expectError(await t.call("GET", "/v1/workspaces", { origin: WORKERS_DEV }), 401, "invalid_credential");
  });

  // The Cache API does nothing on a *.workers.dev address (Cloudflare's documentation): there the
  // credential is kept in the worker instance's memory, so a request still costs no D1 call of its own.
  it("caches credentials in the instance's memory on a workers.dev address, and refuses a revoked one at once", async () => {
    const t = await tenant();
    const match = vi.spyOn(caches.default, "match");
    const put = vi.spyOn(caches.default, "put");
    try {
      const first = await t.call("GET", "/v1/workspaces", { origin: WORKERS_DEV });
      expect(first.status).toBe(200);
      expect(tripsOf(first).db).toBe(2); // the credential, then the list
      const second = await t.call("GET", "/v1/workspaces", { origin: WORKERS_DEV });
      expect(second.body).toEqual(first.body);
      expect(tripsOf(second).db).toBe(1); // the list alone
      expect(match).not.toHaveBeenCalled();
      expect(put).not.toHaveBeenCalled();
    } finally {
      match.mockRestore();
      put.mockRestore();
    }
    expect((await admin("DELETE", `/admin/credentials/${t.credential.id}`)).status).toBe(200);
    expectError(await t.call("GET", "/v1/workspaces", { origin: WORKERS_DEV }), 401, "invalid_credential");
  });

  it("refuses a credential revoked elsewhere once its cached lookup is a minute old", async () => {
    const t = await tenant();
    // The location's cache keeps a lookup 60 s.
    const put = vi.spyOn(caches.default, "put");
    try {
      expect((await t.call("GET", "/v1/workspaces")).status).toBe(200);
      const response = put.mock.calls[0]?.[1] as Response | undefined;
      expect(response?.headers.get("cache-control")).toBe("max-age=60");
    } finally {
      put.mockRestore();
    }
    // The instance's memory (workers.dev) as long: a revocation another instance made (no tombstone
    // here) is honoured from the cached row's first minute on.
    expect((await t.call("GET", "/v1/workspaces", { origin: WORKERS_DEV })).status).toBe(200);
    await env.DB.prepare("UPDATE credentials SET revoked_at = ?1 WHERE id = ?2").bind(Date.now(), t.credential.id).run();
    expect((await t.call("GET", "/v1/workspaces", { origin: WORKERS_DEV })).status).toBe(200);
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      vi.setSystemTime(Date.now() + 59_000);
      expect((await t.call("GET", "/v1/workspaces", { origin: WORKERS_DEV })).status).toBe(200);
      vi.setSystemTime(Date.now() + 2_000);
      expectError(await t.call("GET", "/v1/workspaces", { origin: WORKERS_DEV }), 401, "invalid_credential");
    } finally {
      vi.useRealTimers();
    }
  });

  it("gives live and test credentials the same view of a workspace", async () => {
    const t = await tenant("Shared", "test");
    const live = await createCredential([t.workspace.id], { mode: "live" });
    expect(live.token).toMatch(/^svc_live_[0-9A-Za-z]{32,}$/);
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "both@example.com" } });
    const viaTest = await t.call("GET", `${t.ws}/subscribers`);
    const viaLive = await call("GET", `${t.ws}/subscribers`, { token: live.token });
    expect(viaLive.status).toBe(200);
    expect(viaLive.body.data).toEqual(viaTest.body.data);
  });
});

describe("scopes", () => {
  it("answers 403 insufficient_scope for a route outside the credential's scopes", async () => {
    const ws = await createWorkspace();
    const reader = await createCredential([ws.id], { scopes: ["subscribers:read"] });
    const writer = await createCredential([ws.id], { scopes: ["subscribers:write"] });
    const path = `/v1/workspaces/${ws.id}/subscribers`;

    const denied = await call("POST", path, { token: reader.token, body: { email: "a@example.com" } });
    expectError(denied, 403, "insufficient_scope");
    expect(denied.body.error.type).toBe("permission_error");
    expect(denied.body.error.message).toContain("subscribers:write");
    expect((await call("GET", path, { token: reader.token })).status).toBe(200);
    expectError(await call("GET", "/v1/workspaces", { token: reader.token }), 403, "insufficient_scope");

    const created = await call("POST", path, { token: writer.token, body: { email: "a@example.com" } });
    expect(created.status).toBe(201);
    expectError(await call("GET", path, { token: writer.token }), 403, "insufficient_scope");
    expectError(await call("GET", `${path}/${created.body.data.id}`, { token: writer.token }), 403, "insufficient_scope");
  });
});

describe("the order of checks", () => {
  it("answers scope and workspace access before looking at the body", async () => {
    const ws = await createWorkspace();
    const elsewhere = await createWorkspace("Elsewhere");
    const reader = await createCredential([ws.id], { scopes: ["subscribers:read"] });
    const outsider = await createCredential([elsewhere.id]);
    const path = `/v1/workspaces/${ws.id}/subscribers`;
    const bodies = [
      { raw: "[]", headers: { "content-type": "application/json" } },
      { raw: "email=a@example.com", headers: { "content-type": "text/plain" } },
      { raw: JSON.stringify({ email: "a@example.com", name: "x".repeat(70 * 1024) }), headers: { "content-type": "application/json" } },
    ];
    for (const body of bodies) {
      expectError(await call("POST", path, { token: reader.token, ...body }), 403, "insufficient_scope");
      expectError(await call("POST", path, { token: outsider.token, ...body }), 404, "not_found", "workspace_id");
      expectError(await call("POST", path, { token: null, ...body }), 401, "missing_credential");
    }
  });
});

describe("rate limiting", () => {
  it("answers 429 rate_limited with Retry-After once a credential exceeds its limit, per credential", async () => {
    // The test configuration sets the per-credential limit to 300 requests per 60 s.
    const busy = await tenant("Busy");
    const quiet = await tenant("Quiet");
    // The 301 requests must fall in one fixed window: near its end, start in the next one.
    const left = secondsLeftInWindow(60, Date.now());
    if (left < 15) await new Promise((resolve) => setTimeout(resolve, left * 1000 + 50));
    const results = [];
    for (let i = 0; i < 300; i++) results.push((await busy.call("GET", "/v1/workspaces")).status);
    expect(results.findIndex((s) => s !== 200), JSON.stringify(results.filter((s) => s !== 200).slice(0, 3))).toBe(-1);
    const limited = await busy.call("GET", "/v1/workspaces");
    expectError(limited, 429, "rate_limited");
    expect(limited.body.error.type).toBe("rate_limit_error");
    // The seconds left in the limiter's current window (fixed, clock-aligned), not the whole period.
    const retryAfter = Number(limited.headers.get("retry-after"));
    const expected = secondsLeftInWindow(60, Date.now());
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(Math.abs(retryAfter - expected) <= 1 || Math.abs(retryAfter - expected) >= 59).toBe(true);
    expect((await quiet.call("GET", "/v1/workspaces")).status).toBe(200);
  });

  it("answers 429 before scope and workspace access: a credential over its limit learns nothing else", async () => {
    const ws = await createWorkspace();
    const elsewhere = await createWorkspace("Elsewhere");
    const reader = await createCredential([ws.id], { scopes: ["subscribers:read"] });
    const left = secondsLeftInWindow(60, Date.now());
    if (left < 15) await new Promise((resolve) => setTimeout(resolve, left * 1000 + 50));
    for (let i = 0; i < 300; i++) expect((await call("GET", `/v1/workspaces/${ws.id}/subscribers`, { token: reader.token })).status).toBe(200);
    // Within its limit these were a 403 and a 404; over it, both are the 429.
    expectError(await call("POST", `/v1/workspaces/${ws.id}/campaigns`, { token: reader.token, body: {} }), 429, "rate_limited");
    expectError(await call("GET", `/v1/workspaces/${elsewhere.id}/subscribers`, { token: reader.token }), 429, "rate_limited");
    // Retry-After counts in the period RATE_LIMIT_PERIOD names (the [[ratelimits]] period).
    const before = secondsLeftInWindow(10, Date.now());
    const tenSeconds = await call("GET", `/v1/workspaces/${ws.id}/subscribers`, { token: reader.token, env: { RATE_LIMIT_PERIOD: "10" } });
    expectError(tenSeconds, 429, "rate_limited");
    expect([before, secondsLeftInWindow(10, Date.now())]).toContain(Number(tenSeconds.headers.get("retry-after")));
  });

  it("tells the seconds left in the window: never 0, never more than the period", () => {
    const minute = 60_000;
    expect(secondsLeftInWindow(60, 100 * minute)).toBe(60);
    expect(secondsLeftInWindow(60, 100 * minute + 1)).toBe(60);
    expect(secondsLeftInWindow(60, 100 * minute + 45_000)).toBe(15);
    expect(secondsLeftInWindow(60, 100 * minute + 59_999)).toBe(1);
    expect(secondsLeftInWindow(10, 100 * minute + 7_500)).toBe(3);
    expect(secondsLeftInWindow(10, 100 * minute + 7_600)).toBe(3); // 2.4 s left: rounded up, never down
    expect(secondsLeftInWindow(60, 100 * minute + 59_001)).toBe(1);
  });
});

describe("scopes per route", () => {
  // The contract's map (API.md "Scopes per route", the README's route tables), kept here by hand: a
  // route moved to another scope locks out integrations holding exactly the documented one.
  const expected: Record<string, string> = {
    "get /workspaces": "workspaces:read",
    "get /workspaces/{workspace_id}": "workspaces:read",
    "get /workspaces/{workspace_id}/subscribers": "subscribers:read",
    "get /workspaces/{workspace_id}/subscribers/{subscriber_id}": "subscribers:read",
    "post /workspaces/{workspace_id}/subscribers": "subscribers:write",
    "post /workspaces/{workspace_id}/subscribers/batch": "subscribers:write",
    "patch /workspaces/{workspace_id}/subscribers/{subscriber_id}": "subscribers:write",
    "post /workspaces/{workspace_id}/subscribers/{subscriber_id}/confirmation": "subscribers:write",
    "get /workspaces/{workspace_id}/newsletters": "campaigns:read",
    "get /workspaces/{workspace_id}/newsletters/{newsletter_id}": "campaigns:read",
    "post /workspaces/{workspace_id}/newsletters": "campaigns:write",
    "patch /workspaces/{workspace_id}/newsletters/{newsletter_id}": "campaigns:write",
    "get /workspaces/{workspace_id}/segments": "campaigns:read",
    "get /workspaces/{workspace_id}/segments/{segment_id}": "campaigns:read",
    "post /workspaces/{workspace_id}/segments": "campaigns:write",
    "get /workspaces/{workspace_id}/campaigns": "campaigns:read",
    "get /workspaces/{workspace_id}/campaigns/{campaign_id}": "campaigns:read",
    "post /workspaces/{workspace_id}/campaigns": "campaigns:write",
    "patch /workspaces/{workspace_id}/campaigns/{campaign_id}": "campaigns:write",
    "post /workspaces/{workspace_id}/campaigns/{campaign_id}/archive": "campaigns:write",
    "post /workspaces/{workspace_id}/campaigns/{campaign_id}/preview": "campaigns:read",
    "post /workspaces/{workspace_id}/campaigns/{campaign_id}/send": "campaigns:send",
    "post /workspaces/{workspace_id}/campaigns/{campaign_id}/test": "campaigns:send",
    "post /workspaces/{workspace_id}/campaigns/{campaign_id}/unschedule": "campaigns:send",
    "post /workspaces/{workspace_id}/campaigns/{campaign_id}/cancel": "campaigns:send",
    "get /workspaces/{workspace_id}/operations/{operation_id}": "campaigns:read",
    "get /workspaces/{workspace_id}/campaigns/{campaign_id}/deliveries": "campaigns:read",
    "get /workspaces/{workspace_id}/campaigns/{campaign_id}/stats": "campaigns:read",
    "get /workspaces/{workspace_id}/events": "webhooks:read",
    "get /workspaces/{workspace_id}/events/{event_id}": "webhooks:read",
    "get /workspaces/{workspace_id}/webhook_endpoints": "webhooks:read",
    "get /workspaces/{workspace_id}/webhook_endpoints/{endpoint_id}": "webhooks:read",
    "get /workspaces/{workspace_id}/webhook_endpoints/{endpoint_id}/attempts": "webhooks:read",
    "post /workspaces/{workspace_id}/webhook_endpoints": "webhooks:write",
    "patch /workspaces/{workspace_id}/webhook_endpoints/{endpoint_id}": "webhooks:write",
    "delete /workspaces/{workspace_id}/webhook_endpoints/{endpoint_id}": "webhooks:write",
    "post /workspaces/{workspace_id}/webhook_endpoints/{endpoint_id}/rotate_secret": "webhooks:write",
    "post /workspaces/{workspace_id}/webhook_endpoints/{endpoint_id}/test": "webhooks:write",
  };
  const allScopes = ["workspaces:read", "subscribers:read", "subscribers:write", "campaigns:read", "campaigns:write", "campaigns:send", "webhooks:read", "webhooks:write"];
  const placeholders: Record<string, string> = {
    subscriber_id: "sub_x",
    newsletter_id: "nl_x",
    segment_id: "seg_x",
    campaign_id: "cmp_x",
    operation_id: "op_x",
    event_id: "evt_x",
    endpoint_id: "we_x",
  };

  it("each route needs the scope the contract names, says so in /openapi.json, and takes a credential holding only that scope", async () => {
    const doc = (await call("GET", "/openapi.json")).body as { paths: Record<string, Record<string, { description?: string }>> };
    const documented: Record<string, string> = {};
    for (const [path, operations] of Object.entries(doc.paths)) {
      if (!path.startsWith("/workspaces")) continue;
      for (const [method, operation] of Object.entries(operations)) {
        documented[`${method} ${path}`] = /Requires scope `([a-z:]+)`/.exec(operation.description ?? "")?.[1] ?? "none";
      }
    }
    expect(documented).toEqual(expected);

    const ws = await createWorkspace("Scoped");
    for (const [route, scope] of Object.entries(expected)) {
      const [method, template] = route.split(" ") as [string, string];
      const path = `/v1${template.replace("{workspace_id}", ws.id).replace(/\{(\w+)\}/g, (_, name: string) => placeholders[name] ?? name)}`;
      const only = await createCredential([ws.id], { scopes: [scope] });
      const allBut = await createCredential([ws.id], { scopes: allScopes.filter((s) => s !== scope) });
      const body = method === "get" || method === "delete" ? undefined : {};
      const refused = await call(method.toUpperCase(), path, { token: allBut.token, body });
      expectError(refused, 403, "insufficient_scope");
      expect(refused.body.error.message, route).toContain(scope);
      const admitted = await call(method.toUpperCase(), path, { token: only.token, body });
      expect(admitted.status, `${route}: ${admitted.text}`).not.toBe(403);
    }
  });
});
