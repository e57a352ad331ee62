import { describe, expect, it } from "vitest";
import { call, createCredential, expectError, tenant } from "./helpers";

describe("segments", () => {
  it("creates, retrieves and lists, with the filter read back as written", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/segments`, {
      body: { name: "Beta", filter: { tags_any: [" beta ", "alpha", "beta"] } },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data).toEqual({
      id: expect.stringMatching(/^seg_[0-9A-Z]{26}$/),
      object: "segment",
      name: "Beta",
      filter: { tags_any: ["beta", "alpha"] },
      created_at: expect.stringMatching(/\.\d{3}Z$/),
      updated_at: expect.stringMatching(/\.\d{3}Z$/),
    });
    const both = await t.call("POST", `${t.ws}/segments`, { body: { name: "Both", filter: { tags_any: ["a"], tags_all: ["b", "c"] } } });
    expect(both.body.data.filter).toEqual({ tags_any: ["a"], tags_all: ["b", "c"] });

    expect((await t.call("GET", `${t.ws}/segments/${created.body.data.id}`)).body.data).toEqual(created.body.data);
    const list = await t.call("GET", `${t.ws}/segments?limit=1`);
    expect(list.body.data[0].id).toBe(both.body.data.id);
    const next = await t.call("GET", `${t.ws}/segments?limit=1&after=${list.body.pagination.next_cursor}`);
    expect(next.body.data[0].id).toBe(created.body.data.id);
    expect(next.body.pagination).toEqual({ has_more: false, next_cursor: null });
  });

  it("validates the body", async () => {
    const t = await tenant();
    const post = (body: unknown) => t.call("POST", `${t.ws}/segments`, { body });
    expectError(await post({ filter: { tags_any: ["a"] } }), 400, "validation_failed", "name");
    expectError(await post({ name: "S" }), 400, "validation_failed", "filter");
    expectError(await post({ name: "S", filter: {} }), 400, "validation_failed", "filter");
    expectError(await post({ name: "S", filter: { tags_any: [] } }), 400, "validation_failed", "filter.tags_any");
    expectError(await post({ name: "S", filter: { tags_all: ["x".repeat(41)] } }), 400, "validation_failed", "filter.tags_all[0]");
    expectError(await post({ name: "S", filter: { tags_all: [" "] } }), 400, "validation_failed", "filter.tags_all[0]");
    expectError(await post({ name: "S", filter: { tags_any: Array.from({ length: 51 }, (_, i) => `t${i}`) } }), 400, "validation_failed", "filter.tags_any");
    expectError(await post({ name: "S", filter: { tags_none: ["a"] } }), 400, "validation_failed", "filter.tags_none");
    expectError(await post({ name: "S", filter: { tags_any: ["a"] }, extra: 1 }), 400, "validation_failed", "extra");
    expectError(await post({ name: "S", filter: { tags_any: "a" } }), 400, "validation_failed", "filter.tags_any");
  });

  it("checks scopes and workspace access", async () => {
    const t = await tenant();
    const other = await tenant("Other");
    const readOnly = await createCredential([t.workspace.id], { scopes: ["campaigns:read"] });
    const body = { name: "S", filter: { tags_any: ["a"] } };
    expectError(await call("POST", `${t.ws}/segments`, { token: readOnly.token, body }), 403, "insufficient_scope");
    const created = await t.call("POST", `${t.ws}/segments`, { body });
    const subsOnly = await createCredential([t.workspace.id], { scopes: ["subscribers:read"] });
    expectError(await call("GET", `${t.ws}/segments/${created.body.data.id}`, { token: subsOnly.token }), 403, "insufficient_scope");
    expectError(await other.call("GET", `${t.ws}/segments/${created.body.data.id}`), 404, "not_found");
    expectError(await other.call("GET", `${other.ws}/segments/${created.body.data.id}`), 404, "not_found");
  });
});
