import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createApp } from "../src/app";
import { signerFor } from "../src/lib/signing";
import { secondsLeftInWindow } from "../src/middleware/auth";
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
  return async (method: string, path: string, token?: string, body?: unknown) => {
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await app.fetch(
      new Request(`https://api.example.test${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }),
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
    // The override accepts its own cursors, and, adopted on this database, the ones its own key signed before.
    expect((await other("GET", `${t.ws}/subscribers?limit=2&after=${foreign.body.pagination.next_cursor}`, t.token)).status).toBe(200);
    expect((await other("GET", `${t.ws}/subscribers?limit=2&after=${first.body.pagination.next_cursor}`, t.token)).status).toBe(200);
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
        resend: { status: "ok", message: expect.stringMatching(/^not configured/) },
        secrets: { status: "ok", message: "no secret is shorter than 32 characters" },
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
    // In fixed windows: none of the first 40 is limited, and one of 81 is, however the minute's boundary falls.
    for (let i = 0; i < 40; i++) expect((await call("GET", "/health", from("192.0.2.44"))).status).toBe(200);
    let before = secondsLeftInWindow(60, Date.now());
    let limited = await call("GET", "/health", from("192.0.2.44"));
    for (let i = 41; i < 81 && limited.status === 200; i++) {
      before = secondsLeftInWindow(60, Date.now());
      limited = await call("GET", "/health", from("192.0.2.44"));
    }
    expectError(limited, 429, "rate_limited");
    // The seconds left in the window (PUBLIC_RATE_LIMIT_PERIOD), not the whole period.
    expect([before, secondsLeftInWindow(60, Date.now())]).toContain(Number(limited.headers.get("retry-after")));
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
    ]) {
      const health = await withEnv({ RESEND_API_KEY: "re_key", PUBLIC_BASE_URL: origin })("GET", "/health");
      expect(health.status).toBe(200);
      expect(health.body.status).toBe("ok");
      expect(health.body.checks.links).toEqual({ status: "warning", message: expect.stringMatching(/^PUBLIC_BASE_URL: .*one-click unsubscribe only for https/) });
    }
    const deployed = await withEnv({ RESEND_API_KEY: "re_key", PUBLIC_BASE_URL: "https://news.example.com" })("GET", "/health");
    expect(deployed.body.checks.links).toEqual({ status: "ok", message: "links in mail point at https://news.example.com" });
  });

  it("a PUBLIC_BASE_URL that is no origin (a path, query or fragment, not a URL): /health fails it, and no message is composed or send accepted with broken links", async () => {
    const t = await tenant();
    const newsletter = (await call("POST", `${t.ws}/newsletters`, { token: t.token, body: { name: "N", from_email: "n@example.com" } })).body.data;
    const campaign = (await call("POST", `${t.ws}/campaigns`, { token: t.token, body: { newsletter_id: newsletter.id, subject: "S", html: "<p>x</p>" } })).body.data;
    for (const value of ["https://news.example.com/app", "https://news.example.com/?x=1", "https://news.example.com/#frag", "news.example.com", "https://u:p@news.example.com", "ftp://news.example.com"]) {
      const configured = withEnv({ PUBLIC_BASE_URL: value });
      const health = await configured("GET", "/health");
      expect(health.status, value).toBe(503);
      expect(health.body.checks.links).toEqual({ status: "failed", message: expect.stringContaining(`PUBLIC_BASE_URL (${value})`) });
      const preview = await configured("POST", `${t.ws}/campaigns/${campaign.id}/preview`, t.token);
      expect(preview.status, value).toBe(503);
      expect(preview.body.error).toMatchObject({ code: "configuration_error", message: expect.stringContaining("PUBLIC_BASE_URL") });
      const send = await configured("POST", `${t.ws}/campaigns/${campaign.id}/send`, t.token, {});
      expect(send.status, value).toBe(503);
      expect(send.body.error.code).toBe("configuration_error");
      const test = await configured("POST", `${t.ws}/campaigns/${campaign.id}/test`, t.token, { emails: ["me@example.com"] });
      expect(test.status, value).toBe(503);
      expect(test.body.error).toMatchObject({ code: "configuration_error", message: expect.stringContaining("PUBLIC_BASE_URL") });
    }
    expect((await call("GET", `${t.ws}/campaigns/${campaign.id}`, { token: t.token })).body.data.status).toBe("draft");
    // An origin with a trailing slash is the origin.
    const slash = withEnv({ RESEND_API_KEY: "re_key", RESEND_WEBHOOK_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", PUBLIC_BASE_URL: "https://news.example.com/" });
    expect((await slash("GET", "/health")).body.checks.links).toEqual({ status: "ok", message: "links in mail point at https://news.example.com" });
    const preview = await slash("POST", `${t.ws}/campaigns/${campaign.id}/preview`, t.token);
    expect(preview.body.data.headers["List-Unsubscribe"]).toMatch(/^<https:\/\/news\.example\.com\/u\/[A-Za-z0-9_-]+>$/);
  });

  it("/health says what is wrong with Resend's configuration: base URL, feedback secret, rate; a bad base URL refuses sends before they are accepted", async () => {
    const resend = (over: Partial<Env>) => withEnv({ RESEND_API_KEY: "re_key", PUBLIC_BASE_URL: "https://news.example.com", RESEND_WEBHOOK_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", ...over });
    const good = await resend({})("GET", "/health");
    expect(good.body.checks.resend).toEqual({ status: "ok", message: "configured: at most 2 requests a second, feedback verified" });
    const noSecret = await resend({ RESEND_WEBHOOK_SECRET: undefined })("GET", "/health");
    expect(noSecret.status).toBe(200);
    expect(noSecret.body.checks.resend).toEqual({ status: "warning", message: expect.stringMatching(/^RESEND_WEBHOOK_SECRET is unset: bounces and complaints are never received/) });
    const badSecret = await resend({ RESEND_WEBHOOK_SECRET: "not-a-secret" })("GET", "/health");
    expect(badSecret.status).toBe(503);
    expect(badSecret.body.checks.resend).toEqual({ status: "failed", message: expect.stringMatching(/^RESEND_WEBHOOK_SECRET is not a valid whsec_ signing secret/) });
    // One a verifier takes, but a key of one byte: a warning (anyone could forge feedback).
    const tiny = await resend({ RESEND_WEBHOOK_SECRET: "whsec_YQ==" })("GET", "/health");
    expect(tiny.body.checks.resend).toEqual({ status: "warning", message: expect.stringMatching(/^RESEND_WEBHOOK_SECRET's key is 1 bytes: too short/) });
    // A secret the verifier takes though it is not plain base64 (a stray character pasted after it): no length to judge, and no 500.
    const stray = await resend({ RESEND_WEBHOOK_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw!" })("GET", "/health");
    expect(stray.status).toBe(200);
    expect(stray.body.checks.resend.status).toBe("ok");
    // Padding the verifier takes though atob does not: still judged by its length (4 bytes).
    expect((await resend({ RESEND_WEBHOOK_SECRET: "whsec_YWJjZA=" })("GET", "/health")).body.checks.resend.message).toMatch(/^RESEND_WEBHOOK_SECRET's key is 4 bytes/);
    for (const rps of ["0", "-1", "abc"]) {
      const health = await resend({ RESEND_MAX_RPS: rps })("GET", "/health");
      expect(health.body.checks.resend, rps).toEqual({ status: "warning", message: `RESEND_MAX_RPS (${rps}) is not a positive number of requests a second: sending at Resend's default, 2` });
    }
    expect((await resend({ RESEND_MAX_RPS: "1e9" })("GET", "/health")).body.checks.resend).toEqual({ status: "warning", message: expect.stringMatching(/^RESEND_MAX_RPS \(1e9\) is more requests a second than a Resend account is granted/) });
    expect((await resend({ RESEND_MAX_RPS: "10" })("GET", "/health")).body.checks.resend.status).toBe("ok");
    // 100 a second is the most an account is granted; above it, a warning.
    expect((await resend({ RESEND_MAX_RPS: "100" })("GET", "/health")).body.checks.resend.status).toBe("ok");
    expect((await resend({ RESEND_MAX_RPS: "101" })("GET", "/health")).body.checks.resend.status).toBe("warning");
    const badUrl = resend({ RESEND_BASE_URL: "not a url" });
    const health = await badUrl("GET", "/health");
    expect(health.status).toBe(503);
    expect(health.body.checks.resend).toEqual({ status: "failed", message: expect.stringMatching(/^RESEND_BASE_URL \(not a url\) is not an http\(s\) URL/) });
    const t = await tenant("Live", "live");
    const newsletter = (await call("POST", `${t.ws}/newsletters`, { token: t.token, body: { name: "N", from_email: "n@example.com" } })).body.data;
    const campaign = (await call("POST", `${t.ws}/campaigns`, { token: t.token, body: { newsletter_id: newsletter.id, subject: "S" } })).body.data;
    const send = await badUrl("POST", `${t.ws}/campaigns/${campaign.id}/send`, t.token, {});
    expect(send.status).toBe(503);
    expect(send.body.error).toMatchObject({ code: "configuration_error", message: expect.stringContaining("RESEND_BASE_URL") });
    const test = await badUrl("POST", `${t.ws}/campaigns/${campaign.id}/test`, t.token, { emails: ["a@example.com"] });
    expect(test.status).toBe(503);
    expect(test.body.error.code).toBe("configuration_error");
  });

  it("a send on a database behind the code is refused (503) before it is accepted: no operation, the campaign still a draft", async () => {
    const t = await tenant();
    const newsletter = (await call("POST", `${t.ws}/newsletters`, { token: t.token, body: { name: "N", from_email: "n@example.com" } })).body.data;
    const campaign = (await call("POST", `${t.ws}/campaigns`, { token: t.token, body: { newsletter_id: newsletter.id, subject: "S" } })).body.data;
    vi.spyOn(console, "error").mockImplementation(() => {});
    await env.DB.exec("ALTER TABLE deliveries DROP COLUMN bounce_type");
    const res = await call("POST", `${t.ws}/campaigns/${campaign.id}/send`, { token: t.token, body: {} });
    expect(res.status, res.text).toBe(503);
    expect(res.body.error).toMatchObject({ code: "configuration_error", message: expect.stringContaining("migrations") });
    expect((await call("GET", `${t.ws}/campaigns/${campaign.id}`, { token: t.token })).body.data.status).toBe("draft");
    expect((await env.DB.prepare("SELECT count(*) AS n FROM operations WHERE campaign_id = ?").bind(campaign.id).first<{ n: number }>())?.n).toBe(0);
  });

  it("a database behind the code (a column missing): /health fails, naming it, with the commands to migrate", async () => {
    await env.DB.exec("ALTER TABLE webhook_endpoints DROP COLUMN description");
    const health = await call("GET", "/health");
    expect(health.status).toBe(503);
    expect(health.body.checks.database).toEqual({
      status: "failed",
      message: expect.stringMatching(/^the database is behind the code \(no such column: description\): apply the migrations .*--remote.*--local/),
    });
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

  it("names whichever binding is missing: each one the API needs, and ASSETS (only /docs needs it) as a warning", async () => {
    const t = await tenant();
    for (const name of ["DB", "IDEMPOTENCY_KV", "SEND_QUEUE", "DELIVERY_QUEUE", "WEBHOOK_QUEUE", "RATE_LIMITER", "PUBLIC_RATE_LIMITER"]) {
      const broken = withEnv({ [name]: undefined });
      const res = await broken("GET", "/v1/workspaces", t.token);
      expect(res.status, name).toBe(503);
      expect(res.body.error, name).toMatchObject({ code: "configuration_error", message: expect.stringContaining(`the ${name} binding (`) });
      const health = await broken("GET", "/health");
      expect(health.status, name).toBe(503);
      expect(health.body.checks.bindings, name).toEqual({ status: "failed", message: expect.stringMatching(new RegExp(`^missing: ${name} \\(`)) });
    }

    const noAssets = withEnv({ ASSETS: undefined });
    expect((await noAssets("GET", "/v1/workspaces", t.token)).status).toBe(200);
    const script = await noAssets("GET", "/docs/scalar-standalone.js");
    expect(script.status).toBe(503);
    expect(script.body.error).toMatchObject({ code: "configuration_error", message: expect.stringContaining("the ASSETS binding (") });
    const health = await noAssets("GET", "/health");
    expect(health.status).toBe(200);
    expect(health.body.checks.bindings).toEqual({ status: "warning", message: expect.stringMatching(/^missing: ASSETS \(.*\/docs/) });
    expect((await withEnv({})("GET", "/health")).body.checks.bindings.status).toBe("ok");
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

  it("CURSOR_SECRET, when set, replaces the service's key for signing (and /health says which is in use); what the earlier key signed still verifies", async () => {
    const shared = "shared-between-databases-0123456789abcdef";
    const health = await withEnv({ CURSOR_SECRET: shared })("GET", "/health");
    expect(health.body.configuration.signing_key).toBe("CURSOR_SECRET");
    expect(health.body.checks.secrets.status).toBe("ok");
    const db = freshBinding();
    const a = await signerFor({ DB: db, CURSOR_SECRET: shared }).sign("p", "m");
    const b = await signerFor({ DB: db }).sign("p", "m");
    expect(a).not.toBe(b);
    // Adopting the override keeps links signed by the service's key (one in an old newsletter, say).
    expect(await signerFor({ DB: db, CURSOR_SECRET: shared }).verify("p", "m", b)).toBe(true);
    // Rotating it: the previous one still verifies, once named; a key never configured does not.
    const rotated = { DB: db, CURSOR_SECRET: "rotated-0123456789abcdef0123456789" };
    expect(await signerFor(rotated).verify("p", "m", a)).toBe(false);
    expect(await signerFor({ ...rotated, CURSOR_SECRET_PREVIOUS: shared }).verify("p", "m", a)).toBe(true);
    expect(await signerFor({ ...rotated, CURSOR_SECRET_PREVIOUS: shared }).verify("q", "m", a)).toBe(false);
    // The service's key alone does not take the override's signatures; going back to it, naming the
    // override as the previous key, keeps them.
    expect(await signerFor({ DB: db }).verify("p", "m", a)).toBe(false);
    expect(await signerFor({ DB: db, CURSOR_SECRET_PREVIOUS: shared }).verify("p", "m", a)).toBe(true);
    expect(await signerFor({ DB: db, CURSOR_SECRET_PREVIOUS: shared }).sign("p", "m")).toBe(b);
  });

  it("/health warns about secrets short enough to guess", async () => {
    const health = await withEnv({ CURSOR_SECRET: "x", ADMIN_TOKEN: "abc" })("GET", "/health");
    expect(health.status).toBe(200);
    expect(health.body.checks.secrets).toEqual({ status: "warning", message: expect.stringMatching(/^CURSOR_SECRET, ADMIN_TOKEN are shorter than 32 characters/) });
    // Each says why it matters.
    const admin = await withEnv({ ADMIN_TOKEN: "abc" })("GET", "/health");
    expect(admin.body.checks.secrets.message).toMatch(/^ADMIN_TOKEN is shorter than 32 characters and can be guessed \(it opens the operator API, which has no rate limit\)/);
    expect(admin.body.checks.secrets.message).not.toContain("CURSOR_SECRET");
    // The key a rotation keeps for old cursors is held to the same length.
    const previous = await withEnv({ CURSOR_SECRET_PREVIOUS: "short" })("GET", "/health");
    expect(previous.body.checks.secrets).toEqual({ status: "warning", message: expect.stringMatching(/^CURSOR_SECRET_PREVIOUS is shorter than 32 characters/) });
  });
});
