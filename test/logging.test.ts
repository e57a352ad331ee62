import { afterEach, describe, expect, it, vi } from "vitest";
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { createApp } from "../src/app";
import { log } from "../src/lib/log";
import { loggedPath } from "../src/middleware/request-context";
import { maskTokenPaths } from "../scripts/token-paths.mjs";
import { ADMIN_TOKEN, call, tenant } from "./helpers";

afterEach(() => vi.restoreAllMocks());

describe("access log", () => {
  it("writes one JSON line per request with id, method, route, status, duration and credential, and no secrets", async () => {
    const t = await tenant();
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)));

    const created = await t.call("POST", `${t.ws}/subscribers?`, { body: { email: "private.person@example.com", name: "Secret Name" } });
    const denied = await t.call("GET", `${t.ws}/subscribers?email=private.person@example.com&limit=500`);

    expect(lines).toHaveLength(2);
    const [first, second] = lines.map((line) => JSON.parse(line));
    expect(first).toEqual({
      level: "info",
      event: "request",
      request_id: created.headers.get("request-id"),
      method: "POST",
      route: "POST /workspaces/{workspace_id}/subscribers",
      path: `/workspaces/${t.workspace.id}/subscribers`,
      status: 201,
      duration_ms: expect.any(Number),
      // The credential's first use reads it from D1; the route's own budget is asserted in round-trips.test.ts.
      db_calls: expect.any(Number),
      kv_calls: 0,
      credential_id: t.credential.id,
    });
    expect(second).toMatchObject({ status: 400, request_id: denied.headers.get("request-id"), credential_id: t.credential.id });
    const all = lines.join("\n");
    expect(all).not.toContain(t.token);
    expect(all).not.toContain(t.token.slice(9));
    expect(all).not.toContain("private.person");
    expect(all).not.toContain("Secret Name");
  });

  it("never logs an unsubscribe token: the path shows {token} and the route is named", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)));
    const token = "AQ".padEnd(66, "x");
    await call("GET", `/u/${token}`);
    await call("POST", `/v1/u/${token}/resubscribe`);
    // An altered link with slashes in its token: none of it either.
    await call("GET", `/u/AQ${token.slice(0, 20)}/${token.slice(20, 40)}/x`);
    await call("POST", `/c/${token.slice(0, 30)}/${token.slice(30)}`);
    const [get, post, altered, confirm] = lines.map((line) => JSON.parse(line));
    expect(get).toMatchObject({ method: "GET", route: "GET /u/{token}", path: "/u/{token}" });
    expect(post).toMatchObject({ method: "POST", route: "POST /u/{token}/resubscribe", path: "/u/{token}/resubscribe" });
    expect(altered).toMatchObject({ path: "/u/{token}", status: 404 });
    expect(confirm).toMatchObject({ path: "/c/{token}" });
    expect(lines.join("\n")).not.toContain(token.slice(20, 40));
    expect(lines.join("\n")).not.toContain(token);
  });

  it("never logs a link's token in any shape it may arrive in, and names only the link routes that exist", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)));
    vi.spyOn(console, "warn").mockImplementation((line: unknown) => void lines.push(String(line)));
    const token = "AQ".padEnd(66, "x");
    const shapes = [`/U/${token}`, `//u/${token}`, `/v1//u/${token}`, `/%55/${token}`, `/%75/${token}`, `/u%2F${token}`, `/C/${token}`, `/u/${token}/RESUBSCRIBE`];
    for (const path of shapes) await call("GET", path);
    // A token pasted under another path.
    await call("GET", `/unsubscribe/${token}`);
    // A method the link routes do not answer: no route of that name exists.
    await call("PUT", `/u/${token}`);
    const logged = lines.map((line) => JSON.parse(line));
    expect(logged).toHaveLength(shapes.length + 2);
    expect(lines.join("\n")).not.toContain(token.slice(2, 42));
    for (const line of logged.slice(0, shapes.length)) expect(line.path).toMatch(/^(\/v1)?\/+[uUcC]\/\{token\}(\/resubscribe)?$/);
    expect(logged.at(-2)).toMatchObject({ path: "/unsubscribe/{token}", route: null, status: 404 });
    expect(logged.at(-1)).toMatchObject({ path: "/u/{token}", route: null, status: 405 });
    // npm run dev's filter, over wrangler's lines of the same requests.
    const wrangler = shapes.map((path) => `[wrangler:info] GET ${path} 404 Not Found (3ms)`).join("\n");
    expect(maskTokenPaths(wrangler)).not.toContain(token.slice(2, 42));
    expect(maskTokenPaths(`[wrangler:info] GET /unsubscribe/${token} 404 Not Found (3ms)`)).toBe("[wrangler:info] GET /unsubscribe/{token} 404 Not Found (3ms)");
  });

  it("npm run dev's filter masks the tokens in wrangler's request lines and leaves the service's own lines whole", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)));
    const token = "AQ".padEnd(66, "x");
    await call("GET", `/u/${token}`);
    await call("POST", `/u/${token}/resubscribe`);
    await call("POST", `/c/${token}`);
    // The service's lines pass unchanged: still JSON, with every field after the path.
    for (const line of lines) expect(JSON.parse(maskTokenPaths(line))).toEqual(JSON.parse(line));
    // wrangler's own lines carry the path as it came: the token goes, the rest of the line stays.
    const wrangler = [
      `[wrangler:info] GET /u/${token} 200 OK (12ms)`,
      `[wrangler:info] POST /v1/u/${token}/resubscribe 200 OK (9ms)`,
      `[wrangler:info] POST /c/${token.slice(0, 30)}/${token.slice(30)} 404 Not Found (3ms)`,
      `[wrangler:info] GET /%75/${token}`,
    ].join("\n");
    expect(maskTokenPaths(wrangler)).toBe(
      [
        "[wrangler:info] GET /u/{token} 200 OK (12ms)",
        "[wrangler:info] POST /v1/u/{token}/resubscribe 200 OK (9ms)",
        "[wrangler:info] POST /c/{token} 404 Not Found (3ms)",
        "[wrangler:info] GET /u/{token}",
      ].join("\n"),
    );
    // Other paths are left as they are.
    const other = "[wrangler:info] GET /v1/workspaces/ws_1/subscribers?limit=10 200 OK (4ms)";
    expect(maskTokenPaths(other)).toBe(other);
  });

  it("names the route of the utility paths too; a request refused before routing names none", async () => {
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((line: unknown) => void lines.push(String(line)));
    const warned: string[] = [];
    vi.spyOn(console, "warn").mockImplementation((line: unknown) => void warned.push(String(line)));
    for (const path of ["/health", "/v1/openapi.json", "/docs", "/docs/init.js"]) await call("GET", path);
    await call("GET", "/v1/workspaces");
    // The operator API names the route of a body it refuses; Resend's feedback route is named where it exists.
    await call("POST", "/admin/workspaces", { token: ADMIN_TOKEN, raw: "{", headers: { "content-type": "application/json" } });
    await call("POST", "/admin/workspaces", { raw: "{}", headers: { "content-type": "application/json" } });
    await call("POST", "/webhooks/resend", { raw: "{}", headers: { "content-type": "application/json" }, env: { RESEND_WEBHOOK_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" } });
    await call("POST", "/webhooks/resend", { raw: "{}", headers: { "content-type": "application/json" } });
    expect([...lines, ...warned].map((line) => JSON.parse(line)).map((l) => [l.path, l.route, l.status])).toEqual([
      ["/health", "GET /health", 200],
      ["/openapi.json", "GET /openapi.json", 200],
      ["/docs", "GET /docs", 200],
      ["/docs/init.js", "GET /docs/init.js", 200],
      ["/workspaces", null, 401],
      ["/admin/workspaces", "POST /admin/workspaces", 400],
      ["/admin/workspaces", null, 401],
      ["/webhooks/resend", "POST /webhooks/resend", 401],
      ["/webhooks/resend", null, 404],
    ]);
  });

  it("writes no email address, not even one a provider's error message quotes", async () => {
    const t = await tenant("Acme", "live", { RESEND_API_KEY: "re_test_key", RESEND_MAX_RPS: "1000" });
    const newsletter = (await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "sender.person@example.com" } })).body.data;
    const campaign = (await t.call("POST", `${t.ws}/campaigns`, { body: { newsletter_id: newsletter.id, subject: "S" } })).body.data;
    const lines: string[] = [];
    for (const method of ["log", "warn", "error"] as const) vi.spyOn(console, method).mockImplementation((line: unknown) => void lines.push(String(line)));
    vi.spyOn(globalThis, "fetch").mockImplementation(async () =>
      Response.json({ name: "application_error", message: 'Invalid `to` field: ["quoted.person@example.com"]' }, { status: 500 }),
    );
    const res = await t.call("POST", `${t.ws}/campaigns/${campaign.id}/test`, { body: { emails: ["quoted.person@example.com"], integration_slug: "resend" } });
    expect(res.status, res.text).toBe(503);
    const access = lines.map((line) => JSON.parse(line)).find((line) => line.status === 503);
    expect(access).toMatchObject({ level: "warn", event: "request", warning: expect.stringContaining('["[address]"]') });
    expect(lines.join("\n")).not.toContain("@example.com");
  });

  it("writes no address of any form, and every line stays JSON", async () => {
    const lines: string[] = [];
    for (const method of ["log", "warn", "error"] as const) vi.spyOn(console, method).mockImplementation((line: unknown) => void lines.push(String(line)));
    log("warn", "check", { message: `"john doe"@example.com, a@[192.0.2.1], admin@localhost, o'brien@example.com, a!b@example.com; stack at node_modules/@hono/zod-openapi` });
    // An escape next to an address: the line is still JSON.
    await call("GET", "/v1/x%0Aa@example.com");
    const parsed = lines.map((line) => JSON.parse(line));
    expect(parsed[0].message).toBe("[address], [address], [address], [address], [address]; stack at node_modules/@hono/zod-openapi");
    expect(parsed[1].path).toBe("/x\n[address]");
  });

  it("masks a token anywhere in a path, and only a link's own path as a link", () => {
    const token = "AQ".padEnd(66, "x");
    expect(loggedPath(`/x/${token}/c/y`)).toBe("/x/{token}/c/y");
    expect(loggedPath(`/u/${token}.`)).toBe("/u/{token}");
    expect(loggedPath(`/x/${token}.html`)).toBe("/x/{token}.html");
    expect(loggedPath("/workspaces/c/subscribers")).toBe("/workspaces/c/subscribers");
    expect(loggedPath(`/v1/u/${token}/resubscribe`)).toBe("/v1/u/{token}/resubscribe");
    expect(maskTokenPaths(`GET /x/${token}~ 404`)).toBe("GET /x/{token}~ 404");
  });

  it("prints a server error's line with console.error, so a filter on the error level finds it", async () => {
    const t = await tenant();
    const printed: { method: string; line: Record<string, unknown> }[] = [];
    for (const method of ["log", "warn", "error"] as const) {
      vi.spyOn(console, method).mockImplementation((line: unknown) => void printed.push({ method, line: JSON.parse(String(line)) }));
    }
    // A deployment missing a binding answers 503 configuration_error.
    const res = await createApp().fetch(
      new Request("https://api.example.test/v1/workspaces", { headers: { authorization: `Bearer ${t.token}` } }),
      { ...env, IDEMPOTENCY_KV: undefined } as unknown as Env,
      createExecutionContext(),
    );
    expect(res.status).toBe(503);
    const access = printed.filter((p) => p.line.event === "request");
    expect(access).toEqual([{ method: "error", line: expect.objectContaining({ level: "error", status: 503 }) }]);
  });
});
