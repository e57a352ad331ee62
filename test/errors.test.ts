import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { call, expectError, tenant } from "./helpers";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("one error shape everywhere", () => {
  it("answers unknown routes with 404 not_found, with and without /v1", async () => {
    for (const path of ["/nope", "/v1/nope", "/v1", "/v1x/workspaces"]) {
      const res = await call("GET", path);
      expectError(res, 404, "not_found");
      expect(res.body.error.type).toBe("invalid_request_error");
      expect(res.body.error.message).toBe(`No route for GET ${path}`);
    }
    // A version the API does not have is told the one it has.
    for (const path of ["/v2/workspaces", "/V1/workspaces", "/v0"]) {
      const res = await call("GET", path);
      expectError(res, 404, "not_found");
      expect(res.body.error.message).toBe(`No route for GET ${path} (paths start with /v1, in lower case, or with no version)`);
    }
    const t = await tenant();
    expectError(await t.call("GET", `${t.ws}/nothing-here`), 404, "not_found");
  });

  it("answers a known path with the wrong method with 405 and Allow", async () => {
    const t = await tenant();
    const res = await t.call("DELETE", "/v1/workspaces");
    expectError(res, 405, "method_not_allowed");
    expect(res.headers.get("allow")).toBe("GET, HEAD");
    expect(res.body.error.message).toBe("DELETE is not allowed on /v1/workspaces; it takes GET, HEAD");
    const sub = await t.call("PUT", `${t.ws}/subscribers/sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T`, { body: { name: "x" } });
    expectError(sub, 405, "method_not_allowed");
    expect(sub.headers.get("allow")?.split(", ").sort()).toEqual(["GET", "HEAD", "PATCH"]);
    const list = await t.call("DELETE", `/workspaces/${t.workspace.id}/subscribers`);
    expect(list.headers.get("allow")?.split(", ").sort()).toEqual(["GET", "HEAD", "POST"]);
  });

  it("answers a fixed path's wrong method with its own Allow, not as the templated path beside it", async () => {
    const t = await tenant();
    // `/subscribers/batch` is POST only; `/subscribers/{subscriber_id}` would take "batch" for an id.
    for (const method of ["GET", "HEAD", "PATCH", "DELETE"]) {
      const res = await t.call(method, `${t.ws}/subscribers/batch`, method === "PATCH" ? { body: { name: "x" } } : {});
      expect(res.status, method).toBe(405);
      if (method !== "HEAD") expectError(res, 405, "method_not_allowed");
      expect(res.headers.get("allow")).toBe("POST");
    }
    // A real id still reaches the templated route, and the fixed path its own.
    expectError(await t.call("GET", `${t.ws}/subscribers/sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T`), 404, "not_found");
    const imported = await t.call("POST", `${t.ws}/subscribers/batch`, { body: { subscribers: [{ email: "fixed@example.com" }] } });
    expect(imported.status).toBe(200);
    // Without a credential, the credential is what is wrong.
    expectError(await call("GET", `${t.ws}/subscribers/batch`), 401, "missing_credential");
  });

  it("lists at most 50 problems and counts the rest, each parameter's name quoted up to 200 characters", async () => {
    const t = await tenant();
    const body: Record<string, unknown> = { email: "many@example.com" };
    for (let i = 0; i < 1_000; i++) body[`k${i}`] = 0;
    const res = await t.call("POST", `${t.ws}/subscribers`, { body });
    expectError(res, 400, "validation_failed", "k0");
    expect(res.body.error.details).toHaveLength(51);
    expect(res.body.error.details[49]).toEqual({ param: "k49", message: "k49 is not a recognized parameter" });
    expect(res.body.error.details[50]).toEqual({ message: "and 950 more problems (the first 50 are listed)" });
    expect(res.text.length).toBeLessThan(10_000);
    // An import's problems, one per bad element, the same.
    const subscribers = Array.from({ length: 200 }, () => ({ email: "", tags: [""] }));
    const batch = await t.call("POST", `${t.ws}/subscribers/batch`, { body: { subscribers } });
    expectError(batch, 400, "validation_failed");
    expect(batch.body.error.details).toHaveLength(51);
    expect(batch.body.error.details[50].message).toBe("and 350 more problems (the first 50 are listed)");
    const long = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "long@example.com", ["x".repeat(10_000)]: 1 } });
    expectError(long, 400, "validation_failed");
    expect(long.body.error.param).toBe(`${"x".repeat(199)}…`);
    expect(long.text.length).toBeLessThan(2_000);
  });

  it("answers malformed JSON and non-object bodies with 400 invalid_json", async () => {
    const t = await tenant();
    const headers = { "content-type": "application/json" };
    for (const raw of ['{"email": ', "[]", '"text"', "null", "42"]) {
      expectError(await t.call("POST", `${t.ws}/subscribers`, { raw, headers }), 400, "invalid_json");
    }
    // UTF-16 under a charset that says so: not read as JSON, and the message says why.
    const utf16 = new Uint8Array([0xff, 0xfe, ...[...'{"email":"a@example.com"}'].flatMap((c) => [c.charCodeAt(0), 0])]);
    const wide = await t.call("POST", `${t.ws}/subscribers`, { raw: utf16, headers: { "content-type": "application/json; charset=utf-16" } });
    expectError(wide, 400, "invalid_json");
    expect(wide.body.error.message).toBe("Request body is not valid UTF-8: send JSON encoded as UTF-8");
  });

  it("reads an empty body as an empty JSON object, whatever its content type", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "e@example.com" } });
    const headers = { "content-type": "application/json" };
    const patch = await t.call("PATCH", `${t.ws}/subscribers/${created.body.data.id}`, { raw: "", headers });
    expectError(patch, 400, "validation_failed");
    expect(patch.body.error.message).toContain("at least one");
    expectError(await t.call("POST", `${t.ws}/subscribers`, { raw: "", headers }), 400, "validation_failed", "email");
    // Whatever its content type says: fetch(url, { method: "POST", body: "" }) labels it text/plain.
    for (const type of ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded"]) {
      expectError(await t.call("POST", `${t.ws}/subscribers`, { raw: "", headers: { "content-type": type } }), 400, "validation_failed", "email");
    }
  });

  it("answers a body that is not JSON with 415 unsupported_media_type", async () => {
    const t = await tenant();
    const variants: Record<string, string>[] = [
      { "content-type": "text/plain" },
      { "content-type": "application/x-www-form-urlencoded" },
      { "content-type": "application/vnd.api+json" },
      { "content-type": "application/merge-patch+json" },
      {},
    ];
    for (const headers of variants) {
      const res = await t.call("POST", `${t.ws}/subscribers`, { raw: "email=a@example.com", headers });
      expectError(res, 415, "unsupported_media_type");
    }
    const charset = await t.call("POST", `${t.ws}/subscribers`, {
      raw: JSON.stringify({ email: "charset@example.com" }),
      headers: { "content-type": "application/json; charset=utf-8" },
    });
    expect(charset.status).toBe(201);
  });

  it("checks the path before the query, the query before the body: the first part with a problem answers", async () => {
    const t = await tenant();
    expectError(await t.call("GET", `${t.ws}/campaigns/bad_id/deliveries?limit=0`), 400, "validation_failed", "campaign_id");
    expectError(await t.call("GET", `${t.ws}/subscribers/bad_id?foo=1`), 400, "validation_failed", "subscriber_id");
    expectError(await t.call("PATCH", `${t.ws}/subscribers/sub_${"0".repeat(26)}?foo=1`, { body: { status: "nope" } }), 400, "validation_failed", "foo");
  });

  it("answers a body over 64 KiB with 413 payload_too_large", async () => {
    const t = await tenant();
    const raw = JSON.stringify({ email: "big@example.com", name: "x".repeat(70 * 1024) });
    expectError(await t.call("POST", `${t.ws}/subscribers`, { raw, headers: { "content-type": "application/json" } }), 413, "payload_too_large");
    // At the line: 65,536 bytes are read (and answered on their merits), 65,537 are not.
    const json = JSON.stringify({ email: "edge@example.com" });
    const exactly = json + " ".repeat(64 * 1024 - json.length);
    const exact = await t.call("POST", `${t.ws}/subscribers`, { raw: exactly, headers: { "content-type": "application/json" } });
    expect(exact.status, exact.text).toBe(201);
    expectError(await t.call("POST", `${t.ws}/subscribers`, { raw: `${exactly} `, headers: { "content-type": "application/json" } }), 413, "payload_too_large");
  });

  it("hides unexpected failures behind 500 internal_error without leaking internals", async () => {
    const t = await tenant();
    const prepare = env.DB.prepare.bind(env.DB);
    vi.spyOn(env.DB, "prepare").mockImplementation((query: string) => {
      if (/from "subscriber_tags"/i.test(query)) throw new Error("D1_ERROR: disk I/O error: SQLITE_IOERR in subscriber_tags");
      return prepare(query);
    });
    vi.spyOn(console, "error").mockImplementation(() => {});
    const res = await t.call("GET", `${t.ws}/subscribers?tag=x`);
    expectError(res, 500, "internal_error");
    expect(res.body.error.type).toBe("api_error");
    expect(res.text).not.toMatch(/subscriber_tags|SQL|stack|at /i);
  });

  it("names a database without its migrations as a configuration problem, 503 configuration_error, not a 500", async () => {
    const t = await tenant();
    await env.DB.exec("DROP TRIGGER subscribers_tags_after_insert");
    await env.DB.exec("DROP TABLE subscriber_tags");
    vi.spyOn(console, "error").mockImplementation(() => {});
    const res = await t.call("GET", `${t.ws}/subscribers?tag=x`);
    expectError(res, 503, "configuration_error");
    expect(res.body.error.type).toBe("api_error");
    expect(res.body.error.message).toMatch(/migrations apply/);
    expect(res.text).not.toMatch(/subscriber_tags|SQLITE|stack/i);
  });

  it("puts a Request-Id header on successes too, unique per request", async () => {
    const t = await tenant();
    const a = await t.call("GET", "/v1/workspaces");
    const b = await call("GET", "/health");
    expect(a.headers.get("request-id")).toMatch(/^req_[0-9A-Z]{26}$/);
    expect(b.headers.get("request-id")).toMatch(/^req_/);
    expect(a.headers.get("request-id")).not.toBe(b.headers.get("request-id"));
  });
});

describe("the same mistake, the same words", () => {
  it("answers an update with nothing to change alike on every route, naming what it takes", async () => {
    const t = await tenant();
    const routes = {
      [`${t.ws}/subscribers/sub_x`]: "email, name, tags, add_tags, remove_tags, location, source, status",
      [`${t.ws}/newsletters/nl_x`]: "name, from_name, from_email, reply_to, address",
      [`${t.ws}/campaigns/cmp_x`]: "subject, preheader, html, text, segment_id, scheduled_at",
      [`${t.ws}/webhook_endpoints/we_x`]: "url, events, description, enabled",
    };
    for (const [path, fields] of Object.entries(routes)) {
      const res = await t.call("PATCH", path, { body: {} });
      expectError(res, 400, "validation_failed");
      expect(res.body.error.message, path).toBe(`Request body must contain at least one of: ${fields}`);
    }
  });
});

describe("utility routes", () => {
  it("serves /health without credentials", async () => {
    const res = await call("GET", "/health");
    expect(res.status).toBe(200);
    expect(res.body.status).toBe("ok");
  });

  it("ignores any query on /health and /openapi.json (a probe's cache-buster, a parameter given twice)", async () => {
    const health = await call("GET", "/health?x=1&x=2&t=1732700000");
    expect(health.status, health.text).toBe(200);
    expect(health.body.status).toBe("ok");
    const doc = await call("GET", "/openapi.json?x=1&x=2");
    expect(doc.status).toBe(200);
    expect(doc.text).toBe((await call("GET", "/openapi.json")).text);
  });

  it("serves an OpenAPI 3.1 document generated from the route schemas", async () => {
    const res = await call("GET", "/openapi.json");
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.servers).toEqual([{ url: "/v1" }]);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: "http", scheme: "bearer" });
    expect(doc.components.schemas).toHaveProperty("Error");
    expect(doc.components.schemas).toHaveProperty("Subscriber");
    const paths = doc.paths;
    expect(Object.keys(paths)).toEqual(
      expect.arrayContaining([
        "/workspaces",
        "/workspaces/{workspace_id}",
        "/workspaces/{workspace_id}/subscribers",
        "/workspaces/{workspace_id}/subscribers/{subscriber_id}",
        "/admin/workspaces",
        "/admin/credentials",
      ]),
    );
    const create = paths["/workspaces/{workspace_id}/subscribers"].post;
    expect(create.security).toEqual([{ bearerAuth: [] }]);
    expect(create.parameters).toContainEqual(expect.objectContaining({ name: "Idempotency-Key", in: "header" }));
    expect(create.requestBody.content["application/json"].schema).toBeDefined();
    expect(Object.keys(create.responses)).toEqual(expect.arrayContaining(["201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500"]));
    const list = paths["/workspaces/{workspace_id}/subscribers"].get;
    expect(list.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining(["workspace_id", "limit", "after", "status", "tag", "email"]),
    );
    expect(list.parameters).not.toContainEqual(expect.objectContaining({ name: "Idempotency-Key" }));
  });

  it("names every operation and documents the headers clients read", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const operations = Object.values(doc.paths as Record<string, Record<string, any>>).flatMap((item) => Object.values(item));
    const ids = operations.map((op) => op.operationId);
    expect(ids.every((id) => typeof id === "string" && /^[a-z][A-Za-z]+$/.test(id)), ids.join(", ")).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expect.arrayContaining(["listSubscribers", "sendCampaign", "listCampaignDeliveries", "createCredential"]));
    for (const op of operations) {
      for (const response of Object.values(op.responses as Record<string, any>)) expect(response.headers).toHaveProperty("Request-Id");
    }
    const create = doc.paths["/workspaces/{workspace_id}/subscribers"].post;
    expect(create.responses["201"].headers).toHaveProperty("Idempotent-Replayed");
    expect(create.responses["401"].headers).toHaveProperty("WWW-Authenticate");
    expect(create.responses["429"].headers).toHaveProperty("Retry-After");
    const operator = doc.paths["/admin/credentials"].post;
    // Its key's two errors too (the operator's creates take an Idempotency-Key), but no scope or rate limit.
    expect(Object.keys(operator.responses).sort()).toEqual(["201", "400", "401", "404", "409", "413", "415", "422", "500", "503"]);
    expect(operator.responses["201"].headers).toHaveProperty("Idempotent-Replayed");
    expect(operator.parameters.map((p: { name: string }) => p.name)).toContain("Idempotency-Key");
    // Every operation that takes a body documents the body's own errors, writes or not.
    for (const op of operations.filter((o) => o.requestBody)) expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(["413", "415"]));
  });
});
