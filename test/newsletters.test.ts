import { describe, expect, it } from "vitest";
import { call, createCredential, expectError, tenant } from "./helpers";

describe("newsletters", () => {
  it("creates, retrieves and lists, every field present", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/newsletters`, { body: { name: " Weekly ", from_email: "news@example.com" } });
    expect(created.status, created.text).toBe(201);
    const nl = created.body.data;
    expect(nl).toEqual({
      id: expect.stringMatching(/^nl_[0-9A-Z]{26}$/),
      object: "newsletter",
      name: "Weekly",
      from_name: null,
      from_email: "news@example.com",
      reply_to: null,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updated_at: nl.created_at,
    });
    const full = await t.call("POST", `/workspaces/${t.workspace.id}/newsletters`, {
      body: { name: "Daily", from_email: "daily@example.com", from_name: "Acme", reply_to: "help@example.com" },
    });
    expect(full.body.data).toMatchObject({ from_name: "Acme", reply_to: "help@example.com" });

    const got = await t.call("GET", `${t.ws}/newsletters/${nl.id}`);
    expect(got.status).toBe(200);
    expect(got.body.data).toEqual(nl);

    const page1 = await t.call("GET", `${t.ws}/newsletters?limit=1`);
    expect(page1.body.data.map((n: { id: string }) => n.id)).toEqual([full.body.data.id]);
    expect(page1.body.pagination.has_more).toBe(true);
    const page2 = await t.call("GET", `${t.ws}/newsletters?limit=1&after=${page1.body.pagination.next_cursor}`);
    expect(page2.body.data.map((n: { id: string }) => n.id)).toEqual([nl.id]);
    expect(page2.body.pagination).toEqual({ has_more: false, next_cursor: null });
  });

  it("validates the body and the query", async () => {
    const t = await tenant();
    const url = `${t.ws}/newsletters`;
    expectError(await t.call("POST", url, { body: { from_email: "a@example.com" } }), 400, "validation_failed", "name");
    expectError(await t.call("POST", url, { body: { name: "", from_email: "a@example.com" } }), 400, "validation_failed", "name");
    expectError(await t.call("POST", url, { body: { name: "x".repeat(201), from_email: "a@example.com" } }), 400, "validation_failed", "name");
    expectError(await t.call("POST", url, { body: { name: "N" } }), 400, "validation_failed", "from_email");
    expectError(await t.call("POST", url, { body: { name: "N", from_email: "not-an-email" } }), 400, "validation_failed", "from_email");
    expectError(
      await t.call("POST", url, { body: { name: "N", from_email: "a@example.com", reply_to: "nope" } }),
      400,
      "validation_failed",
      "reply_to",
    );
    expectError(
      await t.call("POST", url, { body: { name: "N", from_email: "a@example.com", color: "red" } }),
      400,
      "validation_failed",
      "color",
    );
    expectError(await t.call("GET", `${url}?limit=0`), 400, "validation_failed", "limit");
    expectError(await t.call("GET", `${url}?limit=101`), 400, "validation_failed", "limit");
    expectError(await t.call("GET", `${url}?after=forged`), 400, "invalid_cursor", "after");
    expectError(await t.call("GET", `${url}/cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T`), 400, "validation_failed", "newsletter_id");
    expectError(await t.call("GET", `${url}/nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T`), 404, "not_found");
  });

  it("needs campaigns:read to read and campaigns:write to create", async () => {
    const t = await tenant();
    const readOnly = await createCredential([t.workspace.id], { scopes: ["campaigns:read"] });
    const writeOnly = await createCredential([t.workspace.id], { scopes: ["campaigns:write"] });
    const body = { name: "N", from_email: "a@example.com" };
    expectError(await call("POST", `${t.ws}/newsletters`, { token: readOnly.token, body }), 403, "insufficient_scope");
    const created = await call("POST", `${t.ws}/newsletters`, { token: writeOnly.token, body });
    expect(created.status).toBe(201);
    expectError(await call("GET", `${t.ws}/newsletters`, { token: writeOnly.token }), 403, "insufficient_scope");
    expect((await call("GET", `${t.ws}/newsletters/${created.body.data.id}`, { token: readOnly.token })).status).toBe(200);
  });

  it("never shows another workspace's newsletter", async () => {
    const a = await tenant("A");
    const b = await tenant("B");
    const created = await a.call("POST", `${a.ws}/newsletters`, { body: { name: "N", from_email: "a@example.com" } });
    expectError(await b.call("GET", `${a.ws}/newsletters/${created.body.data.id}`), 404, "not_found");
    expectError(await b.call("GET", `${b.ws}/newsletters/${created.body.data.id}`), 404, "not_found");
    expect((await b.call("GET", `${b.ws}/newsletters`)).body.data).toEqual([]);
  });
});
