import { env } from "cloudflare:workers";
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
      filter: { tags_any: ["beta", "alpha"], tags_all: null },
      created_at: expect.stringMatching(/\.\d{3}Z$/),
      updated_at: expect.stringMatching(/\.\d{3}Z$/),
    });
    const both = await t.call("POST", `${t.ws}/segments`, { body: { name: "Both", filter: { tags_any: ["a"], tags_all: ["b", "c"] } } });
    expect(both.body.data.filter).toEqual({ tags_any: ["a"], tags_all: ["b", "c"] });
    const allOnly = await t.call("POST", `${t.ws}/segments`, { body: { name: "All", filter: { tags_all: ["b"] } } });
    expect(allOnly.body.data.filter).toEqual({ tags_any: null, tags_all: ["b"] });

    expect((await t.call("GET", `${t.ws}/segments/${created.body.data.id}`)).body.data).toEqual(created.body.data);
    const list = await t.call("GET", `${t.ws}/segments?limit=1`);
    expect(list.body.data[0].id).toBe(allOnly.body.data.id);
    const next = await t.call("GET", `${t.ws}/segments?limit=2&after=${list.body.pagination.next_cursor}`);
    expect(next.body.data.map((s: { id: string }) => s.id)).toEqual([both.body.data.id, created.body.data.id]);
    expect(next.body.data[1]).toEqual(created.body.data);
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

  it("returns both filter keys, stores only the given ones, and reads null as not given", async () => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/segments`, { body: { name: "Any", filter: { tags_any: ["a"], tags_all: null } } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.filter).toEqual({ tags_any: ["a"], tags_all: null });
    // The send pipeline reads the stored JSON with optional keys: a list not given is not stored.
    const stored = await env.DB.prepare("select filter from segments where id = ?").bind(res.body.data.id).first<{ filter: string }>();
    expect(JSON.parse(stored?.filter ?? "")).toEqual({ tags_any: ["a"] });
    // What a segment reads back can be posted again as it is.
    const again = await t.call("POST", `${t.ws}/segments`, { body: { name: "Again", filter: res.body.data.filter } });
    expect(again.status, again.text).toBe(201);
    expect(again.body.data.filter).toEqual(res.body.data.filter);
    const none = await t.call("POST", `${t.ws}/segments`, { body: { name: "None", filter: { tags_any: null, tags_all: null } } });
    expectError(none, 400, "validation_failed", "filter");
    expect(none.body.error.message).toBe("filter must contain at least one of: tags_any, tags_all");

    const doc = (await call("GET", "/openapi.json")).body;
    const filter = doc.components.schemas.Segment.properties.filter;
    expect(filter.required).toEqual(["tags_any", "tags_all"]);
    expect(filter.properties.tags_any.type).toEqual(["array", "null"]);
    expect(filter.properties.tags_all.type).toEqual(["array", "null"]);
  });

  it("limits each tag list to 50 entries, repeats included, and drops duplicates", async () => {
    const t = await tenant();
    const post = (body: unknown) => t.call("POST", `${t.ws}/segments`, { body });
    const fifty = Array.from({ length: 50 }, (_, i) => `t${i}`);
    const ok = await post({ name: "S", filter: { tags_any: [...fifty.slice(0, 48), "t1", " t2 "], tags_all: fifty } });
    expect(ok.status, ok.text).toBe(201);
    expect(ok.body.data.filter.tags_any).toEqual(fifty.slice(0, 48));
    const distinct = await post({ name: "S", filter: { tags_all: [...fifty, "t50"] } });
    expectError(distinct, 400, "validation_failed", "filter.tags_all");
    expect(distinct.body.error.message).toBe("filter.tags_all must have at most 50 items");
    const repeats = await post({ name: "S", filter: { tags_any: Array.from({ length: 51 }, () => "a") } });
    expectError(repeats, 400, "validation_failed", "filter.tags_any");
    expect(repeats.body.error.message).toBe("filter.tags_any must have at most 50 items");
    const empty = await post({ name: "S", filter: { tags_any: [] } });
    expect(empty.body.error.message).toBe("filter.tags_any must have at least 1 item");
  });

  it("rejects ill-formed and control text in the name and the tags", async () => {
    const t = await tenant();
    const post = (body: unknown) => t.call("POST", `${t.ws}/segments`, { body });
    const lone = await post({ name: "\ud800", filter: { tags_any: ["a"] } });
    expectError(lone, 400, "validation_failed", "name");
    expect(lone.body.error.message).toBe("name must be well-formed Unicode text");
    const nul = await post({ name: "S", filter: { tags_any: ["a", "b\u0000"] } });
    expectError(nul, 400, "validation_failed", "filter.tags_any[1]");
    expect(nul.body.error.message).toBe("filter.tags_any[1] must not contain control characters");
  });

  it("names the path parameter of a segment that does not exist, and says what a segment id is", async () => {
    const t = await tenant();
    const missing = await t.call("GET", `${t.ws}/segments/seg_01JD6Q3Z6W9X8B4N2M5K7P1R3T`);
    expectError(missing, 404, "not_found", "segment_id");
    expectError(await t.call("GET", `${t.ws}/segments/seg_`), 404, "not_found", "segment_id");
    const bad = await t.call("GET", `${t.ws}/segments/segment_1`);
    expectError(bad, 400, "validation_failed", "segment_id");
    expect(bad.body.error.message).toBe("segment_id must be a segment id, which starts with seg_");
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
