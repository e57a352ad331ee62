import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { createApp } from "../src/app";
import { ADMIN_TOKEN, admin, call, createWorkspace, dieAfterNextCommit, expectError } from "./helpers";

describe("operator API", () => {
  it("requires the operator token", async () => {
    expectError(await call("POST", "/admin/workspaces", { body: { name: "x" } }), 401, "missing_credential");
    expectError(await call("POST", "/admin/workspaces", { token: "wrong", body: { name: "x" } }), 401, "invalid_credential");
    const wrong = await call("POST", "/admin/workspaces", { token: `${ADMIN_TOKEN}x`, body: { name: "x" } });
    expectError(wrong, 401, "invalid_credential");
    expect(wrong.headers.get("www-authenticate")).toBe('Bearer realm="newsletter-operator", error="invalid_token"');
    expect(wrong.body.error.message).toBe("The operator token is wrong");
    // A part of the token is as wrong as any other.
    expectError(await call("POST", "/admin/workspaces", { token: ADMIN_TOKEN.slice(0, -1), body: { name: "x" } }), 401, "invalid_credential");
    expectError(await call("POST", "/admin/workspaces", { token: ADMIN_TOKEN.slice(1), body: { name: "x" } }), 401, "invalid_credential");
    // The right token without its scheme is not called wrong: the message says how to send it.
    const bare = await call("POST", "/admin/workspaces", { headers: { authorization: ADMIN_TOKEN }, body: { name: "x" } });
    expectError(bare, 401, "invalid_credential");
    expect(bare.body.error.message).toBe("The Authorization header must be Bearer <token>, with the operator token (ADMIN_TOKEN) after the word Bearer");
  });

  it("answers 404 for every operator route when ADMIN_TOKEN is not configured", async () => {
    const app = createApp();
    const request = new Request("https://api.example.test/admin/workspaces", {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "x" }),
    });
    const res = await app.fetch(request, { ...env, ADMIN_TOKEN: undefined }, { waitUntil() {}, passThroughOnException() {}, props: {} } as unknown as ExecutionContext);
    expect(res.status).toBe(404);
    // The same answer as a path the service has no route for: nothing tells that an operator API exists.
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: "not_found",
      message: "No route for POST /admin/workspaces",
    });
    expect((await call("POST", "/nothing/here")).body.error).toMatchObject({ code: "not_found", message: "No route for POST /nothing/here" });
    // Every method: a 405 listing the operator API's methods would tell that it exists.
    for (const [method, path] of [["PUT", "/admin/workspaces"], ["GET", "/v1/admin/credentials/cred_1"], ["PATCH", "/admin/credentials/cred_1"]]) {
      const other = await app.fetch(new Request(`https://api.example.test${path}`, { method }), { ...env, ADMIN_TOKEN: undefined }, {
        waitUntil() {},
        passThroughOnException() {},
        props: {},
      } as unknown as ExecutionContext);
      expect(other.status, `${method} ${path}`).toBe(404);
    }
  });

  it("creates a workspace", async () => {
    const res = await admin("POST", "/admin/workspaces", { name: "  Acme  " });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ object: "workspace", name: "Acme" });
    expect(res.body.data.id).toMatch(/^ws_[0-9A-Z]{26}$/);
    expectError(await admin("POST", "/admin/workspaces", {}), 400, "validation_failed", "name");
    expectError(await admin("POST", "/admin/workspaces", { name: "x", extra: 1 }), 400, "validation_failed", "extra");
  });

  it("rejects blank, ill-formed and control text in a workspace name", async () => {
    for (const [name, message] of [
      ["  ", "name must not be empty"],
      ["Acme\ud800", "name must be well-formed Unicode text"],
      ["Ac\u0000me", "name must not contain control characters"],
      ["Acme\u007f", "name must not contain control characters"],
      // C1 controls: NEL (a line break to some readers) and CSI (a terminal escape).
      ["Ac\u0085me", "name must not contain control characters"],
      ["Ac\u009bme", "name must not contain control characters"],
    ]) {
      const res = await admin("POST", "/admin/workspaces", { name });
      expectError(res, 400, "validation_failed", "name");
      expect(res.body.error.message).toBe(message);
    }
  });

  it("stores a blank credential name as null", async () => {
    const ws = await createWorkspace();
    const res = await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: [ws.id], name: "   " });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.name).toBeNull();
    const control = await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: [ws.id], name: "ci\u001b" });
    expectError(control, 400, "validation_failed", "name");
    expect(control.body.error.message).toBe("name must not contain control characters");
    const doc = (await call("GET", "/openapi.json")).body;
    expect(doc.components.schemas.CreateCredentialRequest.properties.name.type).toEqual(["string", "null"]);
  });

  it("creates a credential whose token is shown once and hashed at rest", async () => {
    const ws = await createWorkspace();
    const res = await admin("POST", "/admin/credentials", { mode: "live", workspace_ids: [ws.id], name: "server" });
    expect(res.status).toBe(201);
    const credential = res.body.data;
    expect(credential).toMatchObject({
      object: "credential",
      name: "server",
      mode: "live",
      workspace_ids: [ws.id],
      scopes: ["workspaces:read", "subscribers:read", "subscribers:write", "campaigns:read", "campaigns:write", "campaigns:send", "webhooks:read", "webhooks:write"],
      revoked_at: null,
    });
    expect(credential.id).toMatch(/^cred_/);
    expect(credential.token).toMatch(/^svc_live_[0-9A-Za-z]{32,}$/);
    const stored = await env.DB.prepare("select * from credentials where id = ?").bind(credential.id).first<Record<string, unknown>>();
    expect(JSON.stringify(stored)).not.toContain(credential.token.slice(9));
    expect(stored?.token_hash).toMatch(/^[0-9a-f]{64}$/);

    const revoked = await admin("DELETE", `/admin/credentials/${credential.id}`);
    expect(revoked.body.data.token).toBeUndefined();
    expect(revoked.body.data.revoked_at).not.toBeNull();
    // Revoking again (a retry after a lost answer) answers the same row: the first revoked_at stays.
    await new Promise((resolve) => setTimeout(resolve, 5));
    const again = await admin("DELETE", `/admin/credentials/${credential.id}`);
    expect(again.status, again.text).toBe(200);
    expect(again.body.data).toEqual(revoked.body.data);
  });

  it("validates credential requests", async () => {
    const ws = await createWorkspace();
    expectError(await admin("POST", "/admin/credentials", { mode: "prod", workspace_ids: [ws.id] }), 400, "validation_failed", "mode");
    const noMode = await admin("POST", "/admin/credentials", { workspace_ids: [ws.id] });
    expectError(noMode, 400, "validation_failed", "mode");
    expect(noMode.body.error.message).toBe("mode is required (one of: test, live)");
    expectError(await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: [] }), 400, "validation_failed", "workspace_ids");
    expectError(
      await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: [ws.id], scopes: ["everything"] }),
      400,
      "validation_failed",
      "scopes[0]",
    );
    expectError(
      await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: [ws.id, "ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T"] }),
      400,
      "resource_missing",
      "workspace_ids[1]",
    );
    expectError(await admin("DELETE", "/admin/credentials/cred_01JD6Q3Z6W9X8B4N2M5K7P1R3T"), 404, "not_found", "credential_id");
    expectError(await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: ["ws_"] }), 400, "resource_missing", "workspace_ids[0]");
    const badWorkspace = await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: ["sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T"] });
    expectError(badWorkspace, 400, "validation_failed", "workspace_ids[0]");
    expect(badWorkspace.body.error.message).toBe("workspace_ids[0] must be a workspace id, which starts with ws_");
    const noScopes = await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: [ws.id], scopes: [] });
    expect(noScopes.body.error.message).toBe("scopes must have at least 1 item");
    expectError(await admin("DELETE", "/admin/credentials/ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T"), 400, "validation_failed", "credential_id");
  });
});

describe("operator API: reading credentials", () => {
  it("lists credentials newest first, pages them, filters by workspace, and never shows a token", async () => {
    const a = await createWorkspace("A");
    const b = await createWorkspace("B");
    const made: string[] = [];
    for (const [i, ids] of [[a.id], [b.id], [a.id, b.id]].entries()) {
      const res = await admin("POST", "/admin/credentials", { mode: i === 0 ? "live" : "test", workspace_ids: ids, name: `c${i}` });
      expect(res.status).toBe(201);
      made.push(res.body.data.id);
    }
    await admin("DELETE", `/admin/credentials/${made[1]}`);
    const all = await admin("GET", "/admin/credentials?limit=2");
    expect(all.status, all.text).toBe(200);
    expect(all.body.data.map((c: { id: string }) => c.id)).toEqual([made[2], made[1]]);
    expect(all.body.data[1].revoked_at).not.toBeNull();
    expect(JSON.stringify(all.body)).not.toMatch(/svc_(test|live)_|token/);
    expect(all.body.pagination.has_more).toBe(true);
    const next = await admin("GET", `/admin/credentials?limit=2&after=${encodeURIComponent(all.body.pagination.next_cursor)}`);
    expect(next.body.data[0].id).toBe(made[0]);
    // Only those that may access A, with the same cursor rules as every list.
    const forA = await admin("GET", `/admin/credentials?workspace_id=${a.id}&limit=100`);
    expect(forA.body.data.map((c: { id: string }) => c.id).filter((id: string) => made.includes(id))).toEqual([made[2], made[0]]);
    expect(forA.body.data.every((c: { workspace_ids: string[] }) => c.workspace_ids.includes(a.id))).toBe(true);
    expectError(await admin("GET", `/admin/credentials?workspace_id=${a.id}&after=${encodeURIComponent(all.body.pagination.next_cursor)}`), 400, "invalid_cursor", "after");
    expectError(await admin("GET", "/admin/credentials?workspace_id=nope"), 400, "validation_failed", "workspace_id");
    expectError(await call("GET", "/admin/credentials"), 401, "missing_credential");
  });

  it("refuses what an operator route does not take, as the workspace routes do, and changes nothing", async () => {
    const ws = await createWorkspace();
    const credential = (await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: [ws.id] })).body.data;
    const path = `/admin/credentials/${credential.id}`;
    // A revoke takes no parameters: an unknown body property, a body that is not JSON, too large or of
    // another type is refused (each answer held to /openapi.json by call()), and the credential stays live.
    expectError(await admin("DELETE", path, { reason: "leak" }), 400, "validation_failed", "reason");
    const raw = (body: string, type: string) => call("DELETE", path, { token: ADMIN_TOKEN, raw: body, headers: { "content-type": type } });
    expectError(await raw("{x", "application/json"), 400, "invalid_json");
    expectError(await raw("hello", "text/plain"), 415, "unsupported_media_type");
    expectError(await raw(`"${"x".repeat(70_000)}"`, "application/json"), 413, "payload_too_large");
    expect((await admin("GET", path)).body.data.revoked_at).toBeNull();
    // Unknown query parameters are refused on every operator route, reads and keyed creates alike.
    const workspaces = (await admin("GET", "/admin/workspaces?limit=100")).body.data.length;
    expectError(await admin("POST", "/admin/workspaces?x=1", { name: "typo" }), 400, "validation_failed", "x");
    expectError(await admin("POST", "/admin/credentials?x=1", { mode: "test", workspace_ids: [ws.id] }), 400, "validation_failed", "x");
    expectError(await admin("GET", `/admin/workspaces/${ws.id}?x=1`), 400, "validation_failed", "x");
    expectError(await admin("GET", `${path}?x=1`), 400, "validation_failed", "x");
    expectError(await admin("DELETE", `${path}?x=1`), 400, "validation_failed", "x");
    expect((await admin("GET", "/admin/workspaces?limit=100")).body.data.length).toBe(workspaces);
    expect((await admin("GET", `/admin/credentials?workspace_id=${ws.id}`)).body.data).toHaveLength(1);
    expect((await admin("GET", path)).body.data.revoked_at).toBeNull();
    // An empty body or {} revokes, as before.
    expect((await admin("DELETE", path, {})).body.data.revoked_at).not.toBeNull();
  });

  it("retrieves one credential by id, revoked or not; an unknown id is a 404", async () => {
    const ws = await createWorkspace();
    const created = await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: [ws.id], scopes: ["subscribers:read"] });
    const { token: _token, ...shown } = created.body.data;
    const got = await admin("GET", `/admin/credentials/${created.body.data.id}`);
    expect(got.status).toBe(200);
    expect(got.body.data).toEqual(shown);
    await admin("DELETE", `/admin/credentials/${created.body.data.id}`);
    expect((await admin("GET", `/admin/credentials/${created.body.data.id}`)).body.data.revoked_at).not.toBeNull();
    expectError(await admin("GET", "/admin/credentials/cred_01JD6Q3Z6W9X8B4N2M5K7P1R3T"), 404, "not_found", "credential_id");
  });
});

describe("operator API: reading workspaces", () => {
  it("lists every workspace newest first, paged, and reads one; an unknown id is a 404", async () => {
    const made = [await createWorkspace("One"), await createWorkspace("Two"), await createWorkspace("Three")];
    const first = await admin("GET", "/admin/workspaces?limit=2");
    expect(first.status, first.text).toBe(200);
    expect(first.body.data.map((w: { id: string }) => w.id)).toEqual([made[2]?.id, made[1]?.id]);
    const rest = await admin("GET", `/admin/workspaces?limit=100&after=${encodeURIComponent(first.body.pagination.next_cursor)}`);
    expect(rest.body.data[0].id).toBe(made[0]?.id);
    expect((await admin("GET", `/admin/workspaces/${made[1]?.id}`)).body.data).toMatchObject({ id: made[1]?.id, object: "workspace", name: "Two" });
    expectError(await admin("GET", "/admin/workspaces/ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T"), 404, "not_found", "workspace_id");
    expectError(await admin("GET", "/admin/workspaces?after=nope"), 400, "invalid_cursor", "after");
    expectError(await call("GET", "/admin/workspaces"), 401, "missing_credential");
  });
});

describe("operator API: Idempotency-Key", () => {
  const keyed = (path: string, key: string, body: unknown) => call("POST", path, { token: ADMIN_TOKEN, body, headers: { "Idempotency-Key": key } });
  const rows = async (table: string) => (await env.DB.prepare(`SELECT count(*) AS n FROM ${table}`).first<{ n: number }>())!.n;

  it("a retried workspace create replays the original 201 byte for byte and creates one workspace", async () => {
    const before = await rows("workspaces");
    const first = await keyed("/admin/workspaces", "op-ws-0001", { name: "Acme" });
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const again = await keyed("/admin/workspaces", "op-ws-0001", { name: "Acme" });
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(await rows("workspaces")).toBe(before + 1);
    // With /v1 it is the same request; another body under the key is another request.
    expect((await keyed("/v1/admin/workspaces", "op-ws-0001", { name: "Acme" })).text).toBe(first.text);
    expectError(await keyed("/admin/workspaces", "op-ws-0001", { name: "Other" }), 422, "idempotency_key_reused");
    expectError(await keyed("/admin/credentials", "op-ws-0001", { mode: "test", workspace_ids: [first.body.data.id] }), 422, "idempotency_key_reused");
    const short = await keyed("/admin/workspaces", "short", { name: "Acme" });
    expectError(short, 400, "validation_failed");
    expect(short.body.error.param).toBe("Idempotency-Key");
    expect(await rows("workspaces")).toBe(before + 1);
  });

  it("keys belong to the operator token: after ADMIN_TOKEN is rotated, a key used before runs anew", async () => {
    const rotated = "another-admin-token-0123456789abcdef";
    const before = await call("POST", "/admin/workspaces", { token: ADMIN_TOKEN, body: { name: "Rot" }, headers: { "Idempotency-Key": "rotate-key-01" } });
    expect(before.status, before.text).toBe(201);
    const after = await call("POST", "/admin/workspaces", {
      token: rotated,
      body: { name: "Rot" },
      headers: { "Idempotency-Key": "rotate-key-01" },
      env: { ADMIN_TOKEN: rotated },
    });
    expect(after.status, after.text).toBe(201);
    expect(after.headers.get("idempotent-replayed")).toBeNull();
    expect(after.body.data.id).not.toBe(before.body.data.id);
  });

  it("grants a credential every workspace it names, up to the 100 allowed, each once", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) ids.push((await createWorkspace(`W${i}`)).id);
    const res = await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: ids });
    expect(res.status, res.text).toBe(201);
    for (const id of [ids[0]!, ids[40]!, ids[99]!]) expect((await call("GET", `/v1/workspaces/${id}`, { token: res.body.data.token })).status, id).toBe(200);
    const list = await call("GET", "/v1/workspaces?limit=100", { token: res.body.data.token });
    expect(list.body.data.map((w: { id: string }) => w.id).sort()).toEqual([...ids].sort());
    expect(list.body.pagination.has_more).toBe(false);
    // A workspace named twice is granted once.
    const twice = await admin("POST", "/admin/credentials", { mode: "test", workspace_ids: [ids[0], ids[0]] });
    expect(twice.status, twice.text).toBe(201);
    expect(twice.body.data.workspace_ids).toEqual([ids[0]]);
  });

  it("a retried credential create gets the same token back, one credential exists, and no stored copy shows the token", async () => {
    const workspace = await createWorkspace("Keyed");
    const body = { mode: "live", workspace_ids: [workspace.id], name: "CI" };
    const first = await keyed("/admin/credentials", "op-cred-0001", body);
    expect(first.status, first.text).toBe(201);
    const token = first.body.data.token as string;
    const again = await keyed("/admin/credentials", "op-cred-0001", body);
    expect(again.text).toBe(first.text);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect((await env.DB.prepare("SELECT count(*) AS n FROM credentials WHERE name = 'CI'").first<{ n: number }>())!.n).toBe(1);
    // The token works; the key's record in D1 and its copy in KV are sealed: neither holds it.
    expect((await call("GET", `/workspaces/${workspace.id}`, { token })).status).toBe(200);
    const record = await env.DB.prepare("SELECT credential_id, response FROM idempotency_keys WHERE key = 'op-cred-0001'").first<{ credential_id: string; response: string }>();
    expect(record!.credential_id).toMatch(/^operator:[0-9a-f]{16}$/);
    expect(record!.response).not.toContain(token);
    expect(record!.response).not.toContain(token.slice(-20));
    const copies = await env.IDEMPOTENCY_KV.list({ prefix: `idempotency:${record!.credential_id}:` });
    expect(copies.keys.length).toBeGreaterThan(0);
    for (const { name } of copies.keys) expect(await env.IDEMPOTENCY_KV.get(name)).not.toContain(token.slice(-20));
  });

  it("a create that dies right after its commit replays from D1: the same workspace, the same credential token", async () => {
    try {
      const workspace = await createWorkspace("Crash");
      const body = { mode: "test", workspace_ids: [workspace.id], name: "crash" };
      dieAfterNextCommit();
      expectError(await keyed("/admin/credentials", "op-crash-0001", body), 500, "internal_error");
      vi.restoreAllMocks();
      const retry = await keyed("/admin/credentials", "op-crash-0001", body);
      expect(retry.status, retry.text).toBe(201);
      expect(retry.headers.get("idempotent-replayed")).toBe("true");
      expect((await env.DB.prepare("SELECT count(*) AS n FROM credentials WHERE name = 'crash'").first<{ n: number }>())!.n).toBe(1);
      expect((await call("GET", `/workspaces/${workspace.id}`, { token: retry.body.data.token })).status).toBe(200);
      dieAfterNextCommit();
      expectError(await keyed("/admin/workspaces", "op-crash-0002", { name: "Once" }), 500, "internal_error");
      vi.restoreAllMocks();
      const ws = await keyed("/admin/workspaces", "op-crash-0002", { name: "Once" });
      expect(ws.status, ws.text).toBe(201);
      expect((await env.DB.prepare("SELECT count(*) AS n FROM workspaces WHERE name = 'Once'").first<{ n: number }>())!.n).toBe(1);
      expect((await admin("GET", `/admin/workspaces/${ws.body.data.id}`)).text).toBe(ws.text);
    } finally {
      vi.restoreAllMocks();
    }
  });
});
