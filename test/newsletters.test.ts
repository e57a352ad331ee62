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
      address: null,
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

  it("keeps from_name on one line: a line break would end up in the From header", async () => {
    const t = await tenant();
    for (const from_name of ["Acme\r\nBcc: victim@example.org", "Acme\nNews", "Acme\rNews", "Acme\u2028News", "Acme\u2029News"]) {
      const res = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "a@example.com", from_name } });
      expectError(res, 400, "validation_failed", "from_name");
      expect(res.body.error.message).toBe("from_name must be a single line");
    }
    const n = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "a@example.com", from_name: " Acme\n" } });
    expect(n.body.data.from_name).toBe("Acme");
    expectError(await t.call("PATCH", `${t.ws}/newsletters/${n.body.data.id}`, { body: { from_name: "A\r\nB" } }), 400, "validation_failed", "from_name");
  });

  it("keeps name on one line: it is the subject of a message whose own renders blank, and the footer's sentence", async () => {
    const t = await tenant();
    for (const name of ["Weekly\r\nBcc: victim@example.org", "Weekly\nNews", "Weekly\rNews", "Weekly\u2028News", "Weekly\u2029News"]) {
      const res = await t.call("POST", `${t.ws}/newsletters`, { body: { name, from_email: "a@example.com" } });
      expectError(res, 400, "validation_failed", "name");
      expect(res.body.error.message).toBe("name must be a single line");
    }
    const n = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "\n Weekly \r\n", from_email: "a@example.com" } });
    expect(n.body.data.name).toBe("Weekly");
    expectError(await t.call("PATCH", `${t.ws}/newsletters/${n.body.data.id}`, { body: { name: "A\r\nB" } }), 400, "validation_failed", "name");
    expectError(await t.call("POST", `${t.ws}/newsletters`, { body: { name: " \n ", from_email: "a@example.com" } }), 400, "validation_failed", "name");
  });

  it("a PATCH whose every value is already there writes nothing: the newsletter as it is, updated_at unmoved", async () => {
    const t = await tenant();
    const n = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "a@example.com", address: "1 Main St" } });
    const path = `${t.ws}/newsletters/${n.body.data.id}`;
    await new Promise((r) => setTimeout(r, 5));
    for (const body of [{ name: "N" }, { from_name: null, reply_to: null }, { address: "1 Main St", from_email: "a@example.com" }]) {
      const same = await t.call("PATCH", path, { body });
      expect(same.status, same.text).toBe(200);
      expect(same.body.data).toEqual(n.body.data);
    }
    const renamed = await t.call("PATCH", path, { body: { name: "M", address: "1 Main St" } });
    expect(renamed.body.data.name).toBe("M");
    expect(renamed.body.data.updated_at).not.toBe(n.body.data.updated_at);
    expectError(await t.call("PATCH", `${t.ws}/newsletters/nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T`, { body: { name: "N" } }), 404, "not_found");
  });

  it("stores a blank from_name or reply_to as null and types both as nullable", async () => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/newsletters`, {
      body: { name: "N", from_email: " news@example.com ", from_name: "  ", reply_to: "" },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ from_email: "news@example.com", from_name: null, reply_to: null });
    expect((await t.call("GET", `${t.ws}/newsletters/${res.body.data.id}`)).body.data).toEqual(res.body.data);
    const nulls = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "a@example.com", from_name: null, reply_to: null } });
    expect(nulls.body.data).toMatchObject({ from_name: null, reply_to: null });
    const trimmed = await t.call("POST", `${t.ws}/newsletters`, {
      body: { name: "N", from_email: "a@example.com", from_name: " Acme ", reply_to: " help@example.com " },
    });
    expect(trimmed.body.data).toMatchObject({ from_name: "Acme", reply_to: "help@example.com" });
    const blankName = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "   ", from_email: "a@example.com" } });
    expect(blankName.body.error.message).toBe("name must not be empty");

    const doc = (await call("GET", "/openapi.json")).body;
    const props = doc.components.schemas.CreateNewsletterRequest.properties;
    expect(props.reply_to).toMatchObject({ type: ["string", "null"], pattern: expect.any(String) });
    expect(props.from_name).toMatchObject({ type: ["string", "null"], pattern: expect.any(String) });
    expect(props.from_email).toMatchObject({ type: "string", pattern: expect.any(String) });
    // No `format: email` anywhere, requests or answers: validators that assert it (ajv-formats) refuse
    // quoted local parts, single-label domains and address literals, which the service accepts and returns.
    expect(JSON.stringify(doc)).not.toContain('"format":"email"');
  });

  it("validates from_email and reply_to with the same address rules as subscribers", async () => {
    const t = await tenant();
    const post = (body: Record<string, unknown>) => t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", ...body } });
    expect((await post({ from_email: "news@localhost", reply_to: '"help desk"@example.com' })).status).toBe(201);
    expect((await post({ from_email: "news@[192.168.0.1]" })).status).toBe(201);
    for (const [field, value, message] of [
      ["from_email", "ü@example.com", "from_email must contain ASCII characters only"],
      ["from_email", "news@-example.com", "from_email must be a valid email address"],
      ["reply_to", `${"l".repeat(65)}@example.com`, "reply_to must have at most 64 characters before the @"],
      ["reply_to", "a@exämple.com", "reply_to must contain ASCII characters only"],
      ["from_email", "   ", "from_email must not be empty"],
    ] as const) {
      const res = await post({ from_email: "ok@example.com", [field]: value });
      expectError(res, 400, "validation_failed", field);
      expect(res.body.error.message).toBe(message);
    }
  });

  it("rejects ill-formed and control text", async () => {
    const t = await tenant();
    const post = (body: Record<string, unknown>) => t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "a@example.com", ...body } });
    for (const [field, value, message] of [
      ["name", "\ud83d", "name must be well-formed Unicode text"],
      ["from_name", "Acme\u0000", "from_name must not contain control characters"],
      ["from_name", "\u001f", "from_name must not contain control characters"],
    ] as const) {
      const res = await post({ [field]: value });
      expectError(res, 400, "validation_failed", field);
      expect(res.body.error.message).toBe(message);
    }
  });

  it("names the path parameter of a newsletter that does not exist", async () => {
    const t = await tenant();
    const res = await t.call("GET", `${t.ws}/newsletters/nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T`);
    expectError(res, 404, "not_found", "newsletter_id");
    // Ids are opaque: any id with the prefix is looked up, and names nothing here.
    const opaque = await t.call("GET", `${t.ws}/newsletters/nl_${"A".repeat(65)}-x_y`);
    expectError(opaque, 404, "not_found", "newsletter_id");
    const bad = await t.call("GET", `${t.ws}/newsletters/seg_01JD6Q3Z6W9X8B4N2M5K7P1R3T`);
    expectError(bad, 400, "validation_failed", "newsletter_id");
    expect(bad.body.error.message).toBe("newsletter_id must be a newsletter id, which starts with nl_");
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
