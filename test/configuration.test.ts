import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../src/app";
import { signerFor } from "../src/lib/signing";
import { call, expectError, seedSubscribers, tenant } from "./helpers";

// The service runs as most people first start it: no secret but ADMIN_TOKEN (the test configuration
// sets no CURSOR_SECRET). It signs with a key of its own, made by a migration and kept in D1, and says
// what is missing when something required is.

afterEach(() => {
  vi.restoreAllMocks();
});

/** The app with another environment, as a deployment configured differently would run it. */
const withEnv = (overrides: Partial<Env>) => {
  const app = createApp();
  return async (method: string, path: string, token?: string) => {
    const res = await app.fetch(
      new Request(`https://api.example.test${path}`, { method, headers: token ? { authorization: `Bearer ${token}` } : {} }),
      { ...env, ...overrides } as Env,
      createExecutionContext(),
    );
    return { status: res.status, body: (await res.json()) as any };
  };
};

/** A D1 binding object the signer has not met yet (its key cache is per binding object). */
const freshBinding = (): D1Database =>
  ({ prepare: (q: string) => env.DB.prepare(q), batch: (s: D1PreparedStatement[]) => env.DB.batch(s) }) as unknown as D1Database;

const signingRows = async () => (await env.DB.prepare("select secret from service_keys").all<{ secret: string }>()).results;

describe("the service's own signing key", () => {
  it("is made by the migrations: 32 random bytes, one per database", async () => {
    const rows = await signingRows();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.secret).toMatch(/^[0-9a-f]{64}$/);
  });

  it("pages every list with no CURSOR_SECRET configured, and rejects a foreign cursor with 400, never 500", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 5);
    const first = await t.call("GET", `${t.ws}/subscribers?limit=2`);
    expect(first.status, first.text).toBe(200);
    expect(first.body.pagination.has_more).toBe(true);
    const second = await t.call("GET", `${t.ws}/subscribers?limit=2&after=${first.body.pagination.next_cursor}`);
    expect(second.status, second.text).toBe(200);
    expect(second.body.data).toHaveLength(2);
    expectError(await t.call("GET", `${t.ws}/subscribers?after=x`), 400, "invalid_cursor", "after");

    // Signed with another deployment's key (here: a CURSOR_SECRET override), the cursor is not ours.
    const other = withEnv({ CURSOR_SECRET: "another-deployments-key" });
    const foreign = await other("GET", `${t.ws}/subscribers?limit=2`, t.token);
    expect(foreign.status).toBe(200);
    const replayed = await t.call("GET", `${t.ws}/subscribers?limit=2&after=${foreign.body.pagination.next_cursor}`);
    expectError(replayed, 400, "invalid_cursor", "after");
    // And the override accepts its own cursors, not the service key's.
    expect((await other("GET", `${t.ws}/subscribers?limit=2&after=${foreign.body.pagination.next_cursor}`, t.token)).status).toBe(200);
    expect((await other("GET", `${t.ws}/subscribers?limit=2&after=${first.body.pagination.next_cursor}`, t.token)).body.error.code).toBe(
      "invalid_cursor",
    );
  });

  it("is made once on first use when a database lacks it, however many requests race for it", async () => {
    await env.DB.prepare("delete from service_keys").run();
    const signers = Array.from({ length: 12 }, () => signerFor({ DB: freshBinding() }));
    const signatures = await Promise.all(signers.map((s) => s.sign("test", "message")));
    expect(new Set(signatures).size).toBe(1);
    expect(await signingRows()).toHaveLength(1);
    // Every signer, including ones made later, verifies with the one stored key.
    expect(await signerFor({ DB: freshBinding() }).verify("test", "message", signatures[0]!)).toBe(true);
    expect(await signerFor({ DB: freshBinding() }).verify("other-purpose", "message", signatures[0]!)).toBe(false);
  });
});

describe("configuration problems", () => {
  it("/health reports the checks and what is configured", async () => {
    const res = await call("GET", "/health");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      status: "ok",
      checks: {
        bindings: { status: "ok", message: expect.stringContaining("DB") },
        database: { status: "ok", message: "migrated; the signing key is present" },
        links: { status: "ok", message: expect.stringContaining("only the sandbox sends") },
      },
      configuration: {
        operator_api: "enabled",
        signing_key: "service",
        integrations: { sandbox: "configured", resend: "not_configured" },
      },
    });
  });

  it("/health is limited per client IP (it reads D1), with its own budget: 429 rate_limited with Retry-After", async () => {
    const from = (ip: string) => ({ headers: { "cf-connecting-ip": ip } });
    // The tests' PUBLIC_RATE_LIMITER allows 40 a minute per key.
    for (let i = 0; i < 40; i++) expect((await call("GET", "/health", from("192.0.2.44"))).status).toBe(200);
    const limited = await call("GET", "/health", from("192.0.2.44"));
    expectError(limited, 429, "rate_limited");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect((await call("GET", "/health", from("192.0.2.45"))).status).toBe(200);
    // The unsubscribe pages' budget for that address is untouched.
    expect((await call("GET", "/u/not-a-token", from("192.0.2.44"))).status).toBe(404);
  });

  it("/health warns while real mail would carry links to an origin that is not public https (still 200)", async () => {
    for (const origin of [
      "http://localhost:8787",
      "https://localhost:8787",
      "http://news.example.com",
      "https://127.0.0.1",
      "https://news.localhost",
      "https://192.168.1.20",
      "https://[::ffff:127.0.0.1]",
      "not a url",
    ]) {
      const health = await withEnv({ RESEND_API_KEY: "re_key", PUBLIC_BASE_URL: origin })("GET", "/health");
      expect(health.status).toBe(200);
      expect(health.body.status).toBe("ok");
      expect(health.body.checks.links).toEqual({ status: "warning", message: expect.stringMatching(/^PUBLIC_BASE_URL: .*one-click unsubscribe only for https/) });
    }
    const deployed = await withEnv({ RESEND_API_KEY: "re_key", PUBLIC_BASE_URL: "https://news.example.com" })("GET", "/health");
    expect(deployed.body.checks.links).toEqual({ status: "ok", message: "links in mail point at https://news.example.com" });
  });

  it("a missing binding: every API request answers 503 configuration_error naming it, and /health says so", async () => {
    const t = await tenant();
    const broken = withEnv({ IDEMPOTENCY_KV: undefined as unknown as KVNamespace });
    const res = await broken("GET", "/v1/workspaces", t.token);
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ type: "api_error", code: "configuration_error" });
    expect(res.body.error.message).toMatch(/IDEMPOTENCY_KV binding/);
    const health = await broken("GET", "/health");
    expect(health.status).toBe(503);
    expect(health.body.status).toBe("unavailable");
    expect(health.body.checks.bindings).toEqual({ status: "failed", message: expect.stringMatching(/^missing: IDEMPOTENCY_KV/) });
  });

  it("the Resend pacer is needed only once Resend is configured", async () => {
    const t = await tenant();
    const withoutKey = withEnv({ RESEND_API_KEY: undefined, RESEND_PACER: undefined as unknown as Env["RESEND_PACER"] });
    expect((await withoutKey("GET", "/v1/workspaces", t.token)).status).toBe(200);
    expect((await withoutKey("GET", "/health")).body.checks.bindings.message).not.toContain("RESEND_PACER");
    const withKey = withEnv({ RESEND_API_KEY: "re_key", RESEND_PACER: undefined as unknown as Env["RESEND_PACER"] });
    const res = await withKey("GET", "/v1/workspaces", t.token);
    expect(res.status).toBe(503);
    expect(res.body.error.message).toMatch(/RESEND_PACER binding/);
    expect((await withKey("GET", "/health")).body.checks.bindings).toEqual({ status: "failed", message: expect.stringMatching(/^missing: RESEND_PACER/) });
  });

  it("a database without its migrations: 503 configuration_error with the command to run, and /health says so", async () => {
    await env.DB.exec("DROP TABLE service_keys");
    vi.spyOn(console, "error").mockImplementation(() => {});
    const health = await call("GET", "/health");
    expect(health.status).toBe(503);
    expect(health.body.checks.database).toEqual({ status: "failed", message: expect.stringMatching(/migrations apply/) });
    // The signing key is read once per isolate: a fresh binding object meets the missing table.
    const signer = signerFor({ DB: freshBinding() });
    await expect(signer.sign("cursor", "x")).rejects.toMatchObject({ code: "configuration_error" });
  });

  it("CURSOR_SECRET, when set, replaces the service's key (and /health says which is in use)", async () => {
    const health = await withEnv({ CURSOR_SECRET: "shared-between-databases" })("GET", "/health");
    expect(health.body.configuration.signing_key).toBe("CURSOR_SECRET");
    const a = await signerFor({ DB: freshBinding(), CURSOR_SECRET: "shared-between-databases" }).sign("p", "m");
    const b = await signerFor({ DB: freshBinding() }).sign("p", "m");
    expect(a).not.toBe(b);
  });
});
