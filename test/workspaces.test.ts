import { describe, expect, it } from "vitest";
import { call, createCredential, createWorkspace, expectError, tenant } from "./helpers";

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe("GET /workspaces", () => {
  it("lists only the workspaces the credential may access, newest first", async () => {
    const a = await createWorkspace("A");
    const b = await createWorkspace("B");
    await createWorkspace("Not mine");
    // Another tenant's workspace, granted to its own credential: never listed here either.
    const theirs = await createWorkspace("Theirs");
    await createCredential([theirs.id]);
    const { token } = await createCredential([a.id, b.id]);
    const res = await call("GET", "/v1/workspaces", { token });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        { id: b.id, object: "workspace", name: "B", created_at: expect.stringMatching(ISO_MS) },
        { id: a.id, object: "workspace", name: "A", created_at: expect.stringMatching(ISO_MS) },
      ],
      pagination: { has_more: false, next_cursor: null },
    });
  });

  it("pages with limit and after", async () => {
    const ids = [];
    for (const name of ["1", "2", "3"]) ids.push((await createWorkspace(name)).id);
    const { token } = await createCredential(ids);
    const first = await call("GET", "/v1/workspaces?limit=2", { token });
    expect(first.body.data.map((w: { id: string }) => w.id)).toEqual([ids[2], ids[1]]);
    expect(first.body.pagination.has_more).toBe(true);
    const second = await call("GET", `/v1/workspaces?limit=2&after=${first.body.pagination.next_cursor}`, { token });
    expect(second.body.data.map((w: { id: string }) => w.id)).toEqual([ids[0]]);
    expect(second.body.pagination).toEqual({ has_more: false, next_cursor: null });
  });

  it("is served identically with and without /v1", async () => {
    const t = await tenant();
    const withPrefix = await t.call("GET", "/v1/workspaces");
    const without = await t.call("GET", "/workspaces");
    expect(without.status).toBe(200);
    expect(without.body).toEqual(withPrefix.body);
  });

  it("rejects an out-of-range limit and unknown query parameters", async () => {
    const t = await tenant();
    expectError(await t.call("GET", "/v1/workspaces?limit=0"), 400, "validation_failed", "limit");
    expectError(await t.call("GET", "/v1/workspaces?limit=101"), 400, "validation_failed", "limit");
    expectError(await t.call("GET", "/v1/workspaces?colour=red"), 400, "validation_failed", "colour");
    expectError(await t.call("GET", "/v1/workspaces?after=forged"), 400, "invalid_cursor", "after");
  });

  it.each([
    ["limit=0", "limit must be an integer from 1 to 100"],
    ["limit=101", "limit must be an integer from 1 to 100"],
    ["limit=000", "limit must be an integer from 1 to 100"],
    ["limit=0101", "limit must be an integer from 1 to 100"],
    ["limit=1e1", "limit must be an integer from 1 to 100"],
    ["limit=0x10", "limit must be an integer from 1 to 100"],
    ["limit=%2010", "limit must be an integer from 1 to 100"],
    ["limit=", "limit must be an integer from 1 to 100"],
    ["limit=99999999999999999999", "limit must be an integer from 1 to 100"],
    ["limit=1&limit=2", "limit must be given once"],
  ])("says what is wrong with ?%s", async (query, message) => {
    const t = await tenant();
    const res = await t.call("GET", `/v1/workspaces?${query}`);
    expectError(res, 400, "validation_failed", "limit");
    expect(res.body.error.message).toBe(message);
    expect(res.body.error.details).toEqual([{ param: "limit", message }]);
  });

  it("reads limit as the integer its digits spell, leading zeros included (as `type: integer` does)", async () => {
    const t = await tenant();
    for (const query of ["limit=01", "limit=010", "limit=0100"]) {
      const res = await t.call("GET", `/v1/workspaces?${query}`);
      expect(res.status, `${query}: ${res.text}`).toBe(200);
    }
  });

  it("documents limit as an integer from 1 to 100, default 20", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const limit = doc.paths["/workspaces"].get.parameters.find((p: { name: string }) => p.name === "limit");
    expect(limit.schema).toMatchObject({ type: "integer", minimum: 1, maximum: 100, default: 20 });
    expect(limit.schema.pattern).toBeUndefined();
  });
});

describe("GET /workspaces/{workspace_id}", () => {
  it("returns an accessible workspace", async () => {
    const t = await tenant("Mine");
    const res = await t.call("GET", t.ws);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ id: t.workspace.id, object: "workspace", name: "Mine", created_at: expect.stringMatching(ISO_MS) });
  });

  it("answers 404 alike for another tenant's workspace and one that does not exist", async () => {
    const t = await tenant();
    const other = await createWorkspace("Other");
    const foreign = await t.call("GET", `/v1/workspaces/${other.id}`);
    const missing = await t.call("GET", "/v1/workspaces/ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T");
    expectError(foreign, 404, "not_found", "workspace_id");
    expectError(missing, 404, "not_found", "workspace_id");
    expect(foreign.body.error.message.replace(other.id, "X")).toBe(missing.body.error.message.replace("ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T", "X"));
    // Ids are opaque (the specification's pattern is the prefix): any id with it is looked up.
    for (const id of ["ws_does_not_exist", "ws_", "ws_00000000-0000-0000-0000-000000000000"]) {
      expectError(await t.call("GET", `/v1/workspaces/${id}`), 404, "not_found", "workspace_id");
      expectError(await t.call("GET", `/v1/workspaces/${id}/subscribers`), 404, "not_found", "workspace_id");
      expectError(await t.call("POST", `/v1/workspaces/${id}/subscribers`, { body: { email: "a@example.com" } }), 404, "not_found", "workspace_id");
    }
  });

  it("validates the id prefix", async () => {
    const t = await tenant();
    const res = await t.call("GET", "/v1/workspaces/sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T");
    expectError(res, 400, "validation_failed", "workspace_id");
    expect(res.body.error.message).toBe("workspace_id must be a workspace id, which starts with ws_");
  });
});
