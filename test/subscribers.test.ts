import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, call, createWorkspace, expectError, seedSubscribers, tenant } from "./helpers";

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe("POST /workspaces/{workspace_id}/subscribers", () => {
  it("creates a subscriber with every field present", async () => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "  Ada@Example.com ", name: "Ada" } });
    expect(res.status).toBe(201);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      data: {
        id: expect.stringMatching(/^sub_[0-9A-Z]{26}$/),
        object: "subscriber",
        email: "Ada@Example.com",
        name: "Ada",
        status: "active",
        tags: [],
        location: null,
        source: null,
        created_at: expect.stringMatching(ISO_MS),
        updated_at: expect.stringMatching(ISO_MS),
      },
    });
    const fetched = await t.call("GET", `${t.ws}/subscribers/${res.body.data.id}`);
    expect(fetched.body).toEqual(res.body);
  });

  it("trims tags, drops duplicates and keeps their order", async () => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, {
      body: { email: "t@example.com", tags: [" beta ", "weekly", "beta", "alpha"], location: "Berlin", source: "import", status: "pending" },
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ tags: ["beta", "weekly", "alpha"], location: "Berlin", source: "import", status: "pending" });
  });

  it("keeps tags in Unicode NFC: a precomposed and a decomposed é are one tag, in filters and segments too", async () => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "nfc@example.com", tags: ["caf\u00e9", "cafe\u0301"] } });
    expect(res.body.data.tags).toEqual(["caf\u00e9"]);
    for (const tag of ["caf\u00e9", "cafe\u0301"]) {
      const found = await t.call("GET", `${t.ws}/subscribers?tag=${encodeURIComponent(tag)}`);
      expect(found.body.data.map((s: { id: string }) => s.id)).toEqual([res.body.data.id]);
    }
    const segment = await t.call("POST", `${t.ws}/segments`, { body: { name: "Cafe", filter: { tags_any: ["cafe\u0301"] } } });
    expect(segment.body.data.filter.tags_any).toEqual(["caf\u00e9"]);
  });

  it("holds a tag to 40 characters as kept too: one that grows in NFC past it is refused, so any tag read back can be written back", async () => {
    const t = await tenant();
    // U+FB2A (a Hebrew letter with its dot) is two characters in NFC: 40 of them would be kept as 80.
    const grows = "\uFB2A".repeat(40);
    const refused = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "shin@example.com", tags: [grows] } });
    expectError(refused, 400, "validation_failed", "tags[0]");
    expect(refused.body.error.message).toBe("tags[0] must be at most 40 characters in Unicode NFC, as tags are kept (it has 80)");
    const fits = "\uFB2A".repeat(20);
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "shin@example.com", tags: [fits] } });
    expect(created.status, created.text).toBe(201);
    const [kept] = created.body.data.tags;
    expect([...kept]).toHaveLength(40);
    // Written back as read: a 200 no-op; as a filter and in a segment, the same tag.
    const same = await t.call("PATCH", `${t.ws}/subscribers/${created.body.data.id}`, { body: { tags: [kept] } });
    expect(same.status, same.text).toBe(200);
    expect(same.body.data).toEqual(created.body.data);
    expect((await t.call("GET", `${t.ws}/subscribers?tag=${encodeURIComponent(kept)}`)).body.data).toHaveLength(1);
    expect((await t.call("POST", `${t.ws}/segments`, { body: { name: "Shin", filter: { tags_any: [kept] } } })).status).toBe(201);
  });

  it("refuses a filter whose percent-escapes are not UTF-8, rather than reading the escapes as text", async () => {
    const t = await tenant();
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "pct@example.com", tags: ["x%E9"] } });
    // Latin-1 é, an encoded lone surrogate, a stray %: each a 400 naming the parameter.
    for (const query of ["tag=x%E9", "tag=%ED%A0%80", "email=a%@example.com"]) {
      const res = await t.call("GET", `${t.ws}/subscribers?${query}`);
      expectError(res, 400, "validation_failed", query.split("=")[0]);
      expect(res.body.error.message).toMatch(/must be percent-encoded UTF-8/);
    }
    // The tag named with its % escaped finds it.
    expect((await t.call("GET", `${t.ws}/subscribers?tag=x%25E9`)).body.data).toHaveLength(1);
  });

  it("rejects an email already in the workspace, case-insensitively, naming the existing subscriber", async () => {
    const t = await tenant();
    const first = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "dup@example.com" } });
    const second = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "DUP@Example.COM" } });
    expectError(second, 409, "subscriber_exists", "email");
    expect(second.body.error.details[0].subscriber_id).toBe(first.body.data.id);
    // Another workspace may hold the same address.
    const other = await tenant("Other");
    expect((await other.call("POST", `${other.ws}/subscribers`, { body: { email: "dup@example.com" } })).status).toBe(201);
  });

  it.each([
    [{}, "email", "email is required"],
    [{ email: "not-an-email" }, "email", "email must be a valid email address"],
    [{ email: 42 }, "email", "email must be a string"],
    [{ email: `${"a".repeat(250)}@example.com` }, "email", "email must be at most 254 characters"],
    [{ email: "a@example.com", name: "n".repeat(201) }, "name", "name must be at most 200 characters"],
    [{ email: "a@example.com", location: 5 }, "location", "location must be a string"],
    [{ email: "a@example.com", tags: "news" }, "tags", "tags must be an array"],
    [{ email: "a@example.com", tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }, "tags", "tags must have at most 50 items"],
    [{ email: "a@example.com", tags: Array.from({ length: 51 }, () => "same") }, "tags", "tags must have at most 50 items"],
    [{ email: "a@example.com", tags: ["ok", "x".repeat(41)] }, "tags[1]", "tags[1] must be at most 40 characters"],
    [{ email: "a@example.com", tags: ["   "] }, "tags[0]", "tags[0] must not be empty"],
    [{ email: "a@example.com", status: "subscribed" }, "status", "status must be one of: active, unsubscribed, bounced, pending"],
    [{ email: "a@example.com", nickname: "Ada" }, "nickname", "nickname is not a recognized parameter"],
  ])("rejects %j with 400 validation_failed on %s", async (body, param, message) => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, { body });
    expectError(res, 400, "validation_failed", param);
    expect(res.body.error.type).toBe("invalid_request_error");
    expect(res.body.error.message).toBe(message);
    expect(res.body.error.details).toContainEqual({ param, message });
  });

  it("reports every invalid field in details", async () => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, { body: { name: 1, status: "x" } });
    expectError(res, 400, "validation_failed");
    expect(res.body.error.details.map((d: { param: string }) => d.param).sort()).toEqual(["email", "name", "status"]);
  });
});

describe("GET /workspaces/{workspace_id}/subscribers/{subscriber_id}", () => {
  it("answers 404 for an unknown id and for another workspace's subscriber", async () => {
    const mine = await tenant("Mine");
    const theirs = await tenant("Theirs");
    const created = await theirs.call("POST", `${theirs.ws}/subscribers`, { body: { email: "x@example.com" } });
    expectError(await mine.call("GET", `${mine.ws}/subscribers/sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T`), 404, "not_found");
    expectError(await mine.call("GET", `${mine.ws}/subscribers/${created.body.data.id}`), 404, "not_found");
    expectError(await mine.call("GET", `${theirs.ws}/subscribers/${created.body.data.id}`), 404, "not_found");
  });

  it("validates both path ids", async () => {
    const t = await tenant();
    expectError(await t.call("GET", `${t.ws}/subscribers/cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T`), 400, "validation_failed", "subscriber_id");
    expectError(await t.call("GET", "/v1/workspaces/nope/subscribers/sub_1"), 400, "validation_failed", "workspace_id");
  });
});

describe("PATCH /workspaces/{workspace_id}/subscribers/{subscriber_id}", () => {
  it("changes nothing when every value given is already there: the same resource, its updated_at, no event", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "same@example.com", name: "Ann", tags: ["x", "y"], status: "unsubscribed" } });
    const path = `${t.ws}/subscribers/${created.body.data.id}`;
    const eventsBefore = (await t.call("GET", `${t.ws}/events?limit=100`)).body.data.length;
    for (const body of [{ name: "Ann" }, { tags: ["x", "y"] }, { status: "unsubscribed" }, { email: "same@example.com", name: "Ann", location: null }]) {
      const res = await t.call("PATCH", path, { body });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data).toEqual(created.body.data);
    }
    expect((await t.call("GET", `${t.ws}/events?limit=100`)).body.data).toHaveLength(eventsBefore);
    // A real change still is one, with its event.
    const renamed = await t.call("PATCH", path, { body: { name: "Anna", tags: ["x", "y"] } });
    expect(renamed.body.data).toMatchObject({ name: "Anna", tags: ["x", "y"] });
    expect(renamed.body.data.updated_at).not.toBe(created.body.data.updated_at);
    expect((await t.call("GET", `${t.ws}/events?limit=100`)).body.data).toHaveLength(eventsBefore + 1);
    // Unchanged, but the email asked for is another subscriber's: still the 409.
    const other = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "other@example.com" } });
    expect((await t.call("PATCH", path, { body: { email: "OTHER@example.com" } })).status).toBe(409);
    expect(other.status).toBe(201);
  });

  const setup = async () => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, {
      body: { email: "p@example.com", name: "P", tags: ["old"], location: "Paris" },
    });
    return { t, sub: res.body.data, path: `${t.ws}/subscribers/${res.body.data.id}` };
  };

  it("changes the consent status and the given fields only", async () => {
    const { t, sub, path } = await setup();
    await new Promise((r) => setTimeout(r, 5));
    const res = await t.call("PATCH", path, { body: { status: "unsubscribed", name: "Pat" } });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ ...sub, status: "unsubscribed", name: "Pat", updated_at: expect.stringMatching(ISO_MS) });
    expect(res.body.data.updated_at > sub.updated_at).toBe(true);
    expect((await t.call("GET", path)).body.data).toEqual(res.body.data);
  });

  it("clears name, location and source with null and replaces tags", async () => {
    const { t, path } = await setup();
    const res = await t.call("PATCH", path, { body: { name: null, location: null, source: null, tags: ["new", "new", "vip"] } });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ name: null, location: null, source: null, tags: ["new", "vip"] });
    const byOld = await t.call("GET", `${t.ws}/subscribers?tag=old`);
    const byNew = await t.call("GET", `${t.ws}/subscribers?tag=vip`);
    expect(byOld.body.data).toEqual([]);
    expect(byNew.body.data.map((s: { id: string }) => s.id)).toEqual([res.body.data.id]);
  });

  it("adds and removes tags in the write itself: concurrent edits keep each other's, a no-op writes nothing", async () => {
    const { t, sub, path } = await setup();
    const added = await t.call("PATCH", path, { body: { add_tags: ["vip", "old", "beta"], remove_tags: ["gone"] } });
    expect(added.status, added.text).toBe(200);
    expect(added.body.data.tags).toEqual(["old", "vip", "beta"]);
    // Two clients, each adding its own tag, at once: both kept (a whole-list replace would lose one).
    const [a, b] = await Promise.all([t.call("PATCH", path, { body: { add_tags: ["paid"] } }), t.call("PATCH", path, { body: { add_tags: ["crm"] } })]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect([...(await t.call("GET", path)).body.data.tags].sort()).toEqual(["beta", "crm", "old", "paid", "vip"]);
    const removed = await t.call("PATCH", path, { body: { remove_tags: ["old", "beta"] } });
    expect([...removed.body.data.tags].sort()).toEqual(["crm", "paid", "vip"]);
    // The tag filter (and so segments) follows.
    expect((await t.call("GET", `${t.ws}/subscribers?tag=old`)).body.data).toEqual([]);
    expect((await t.call("GET", `${t.ws}/subscribers?tag=paid`)).body.data.map((x: { id: string }) => x.id)).toEqual([sub.id]);
    // Adding what it has and removing what it lacks changes nothing: no updated_at moved, no event.
    const events = (await t.call("GET", `${t.ws}/events?limit=100`)).body.data.length;
    const same = await t.call("PATCH", path, { body: { add_tags: ["vip"], remove_tags: ["never"] } });
    expect(same.body.data).toEqual(removed.body.data);
    expect((await t.call("GET", `${t.ws}/events?limit=100`)).body.data).toHaveLength(events);
    // With other fields, in the same write; a tag in both lists ends removed.
    const both = await t.call("PATCH", path, { body: { name: "Pat", add_tags: ["x", "y"], remove_tags: ["y"] } });
    expect(both.body.data.name).toBe("Pat");
    expect(both.body.data.tags.slice(-1)).toEqual(["x"]);
    expect(both.body.data.tags).not.toContain("y");
  });

  it("refuses tag edits beside a whole list, or past 50 tags, naming the field", async () => {
    const { t, path } = await setup();
    expectError(await t.call("PATCH", path, { body: { tags: ["a"], add_tags: ["b"] } }), 400, "validation_failed", "add_tags");
    expectError(await t.call("PATCH", path, { body: { tags: ["a"], remove_tags: ["b"] } }), 400, "validation_failed", "remove_tags");
    expectError(await t.call("PATCH", path, { body: { add_tags: [] } }), 400, "validation_failed", "add_tags");
    await t.call("PATCH", path, { body: { tags: Array.from({ length: 49 }, (_, i) => `t${i}`) } });
    expect((await t.call("PATCH", path, { body: { add_tags: ["t49"] } })).body.data.tags).toHaveLength(50);
    const over = await t.call("PATCH", path, { body: { add_tags: ["t50"] } });
    expectError(over, 400, "validation_failed", "add_tags");
    expect(over.body.error.message).toBe("add_tags would give the subscriber more than 50 tags (it has 50)");
    // Removing as many as it adds stays within.
    expect((await t.call("PATCH", path, { body: { add_tags: ["t50"], remove_tags: ["t0"] } })).body.data.tags).toHaveLength(50);
  });

  it("requires at least one property and rejects unknown ones", async () => {
    const { t, path } = await setup();
    const empty = await t.call("PATCH", path, { body: {} });
    expectError(empty, 400, "validation_failed");
    expect(empty.body.error.message).toContain("at least one");
    expectError(await t.call("PATCH", path, { body: { id: "sub_x" } }), 400, "validation_failed", "id");
    expectError(await t.call("PATCH", path, { body: { email: null } }), 400, "validation_failed", "email");
    expectError(await t.call("PATCH", path, { body: { status: "gone" } }), 400, "validation_failed", "status");
  });

  it("keeps emails unique: 409 for another subscriber's address, fine for a change of case", async () => {
    const { t, sub, path } = await setup();
    const other = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "taken@example.com" } });
    const clash = await t.call("PATCH", path, { body: { email: "TAKEN@example.com" } });
    expectError(clash, 409, "subscriber_exists", "email");
    expect(clash.body.error.details[0].subscriber_id).toBe(other.body.data.id);
    expect((await t.call("GET", path)).body.data.email).toBe(sub.email);
    const recased = await t.call("PATCH", path, { body: { email: "P@EXAMPLE.com" } });
    expect(recased.status).toBe(200);
    expect(recased.body.data.email).toBe("P@EXAMPLE.com");
  });

  it("answers 404 for a subscriber of another workspace", async () => {
    const { path } = await setup();
    const stranger = await tenant("Stranger");
    const id = path.split("/").at(-1);
    expectError(await stranger.call("PATCH", `${stranger.ws}/subscribers/${id}`, { body: { name: "x" } }), 404, "not_found");
    expectError(await stranger.call("PATCH", path, { body: { name: "x" } }), 404, "not_found");
  });
});

describe("GET /workspaces/{workspace_id}/subscribers", () => {
  const ids = (res: { body: { data: { id: string }[] } }) => res.body.data.map((s) => s.id);

  /** Every page of a list, following next_cursor. */
  const walk = async (t: Awaited<ReturnType<typeof tenant>>, query: string) => {
    const pages: string[][] = [];
    let after: string | null = null;
    do {
      const res = await t.call("GET", `${t.ws}/subscribers?${query}${after ? `&after=${encodeURIComponent(after)}` : ""}`);
      expect(res.status, res.text).toBe(200);
      pages.push(ids(res));
      expect(res.body.pagination.has_more).toBe(res.body.pagination.next_cursor !== null);
      after = res.body.pagination.next_cursor;
    } while (after && pages.length < 50);
    return pages;
  };

  it("returns 20 newest first by default", async () => {
    const t = await tenant();
    const seeded = await seedSubscribers(t.workspace.id, 25);
    const res = await t.call("GET", `${t.ws}/subscribers`);
    expect(ids(res)).toEqual(seeded.slice().reverse().slice(0, 20));
    expect(res.body.pagination.has_more).toBe(true);
    expect(typeof res.body.pagination.next_cursor).toBe("string");
  });

  it("pages through every subscriber once, in order, with and without filters", async () => {
    const t = await tenant();
    const statuses = ["active", "unsubscribed", "bounced", "pending"];
    const seeded = await seedSubscribers(t.workspace.id, 47, (i) => ({
      status: statuses[i % 4],
      tags: i % 3 === 0 ? ["news", `n${i}`] : ["other"],
    }));
    const newestFirst = seeded.slice().reverse();

    const all = await walk(t, "limit=10");
    expect(all.map((p) => p.length)).toEqual([10, 10, 10, 10, 7]);
    expect(all.flat()).toEqual(newestFirst);

    const active = await walk(t, "limit=5&status=active");
    expect(active.flat()).toEqual(newestFirst.filter((_, j) => (46 - j) % 4 === 0));

    const tagged = await walk(t, "limit=4&tag=news");
    expect(tagged.flat()).toEqual(newestFirst.filter((_, j) => (46 - j) % 3 === 0));

    const both = await walk(t, "limit=2&tag=news&status=active");
    expect(both.flat()).toEqual(newestFirst.filter((_, j) => (46 - j) % 12 === 0));
    expect(both.length).toBe(2);
  });

  it("filters by email, case-insensitively", async () => {
    const t = await tenant();
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "Find.Me@Example.com" } });
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "other@example.com" } });
    const res = await t.call("GET", `${t.ws}/subscribers?email=${encodeURIComponent("find.me@EXAMPLE.com")}`);
    expect(res.body.data.map((s: { email: string }) => s.email)).toEqual(["Find.Me@Example.com"]);
    expect(res.body.pagination).toEqual({ has_more: false, next_cursor: null });
    // Only ASCII letters fold: the Kelvin sign (U+212A), which JavaScript lower-cases to k, names no stored address.
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "kate@example.com" } });
    expect((await t.call("GET", `${t.ws}/subscribers?email=${encodeURIComponent("\u212Aate@example.com")}`)).body.data).toEqual([]);
  });

  it("accepts limit 1 and 100", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 2);
    expect((await t.call("GET", `${t.ws}/subscribers?limit=1`)).body.data).toHaveLength(1);
    expect((await t.call("GET", `${t.ws}/subscribers?limit=100`)).body.data).toHaveLength(2);
  });

  it("trims the tag and email filters as stored values are trimmed", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: " f3@x.example ", tags: [" weekly "] } });
    const found = [created.body.data.id];
    expect(ids(await t.call("GET", `${t.ws}/subscribers?tag=%20weekly`))).toEqual(found);
    expect(ids(await t.call("GET", `${t.ws}/subscribers?tag=weekly%20%20`))).toEqual(found);
    expect(ids(await t.call("GET", `${t.ws}/subscribers?email=%20F3@x.example%20`))).toEqual(found);
  });

  it("matches tags exactly", async () => {
    const t = await tenant();
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "a@example.com", tags: ["News"] } });
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "b@example.com", tags: ["news letter"] } });
    expect((await t.call("GET", `${t.ws}/subscribers?tag=news`)).body.data).toEqual([]);
    expect((await t.call("GET", `${t.ws}/subscribers?tag=News`)).body.data).toHaveLength(1);
  });

  it("refuses query parameters on routes that take none, naming them", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "q@example.com" } });
    const one = await t.call("GET", `${t.ws}/subscribers/${created.body.data.id}?expand=tags`);
    expectError(one, 400, "validation_failed", "expand");
    expect(one.body.error.message).toBe("expand is not a recognized parameter");
    expectError(await t.call("POST", `${t.ws}/subscribers?foo=1`, { body: { email: "r@example.com" } }), 400, "validation_failed", "foo");
    expect((await t.call("GET", `${t.ws}/subscribers?email=r@example.com`)).body.data).toEqual([]);
  });

  it.each([
    ["limit=0", "limit", "limit must be an integer from 1 to 100"],
    ["limit=101", "limit", "limit must be an integer from 1 to 100"],
    ["limit=abc", "limit", "limit must be an integer from 1 to 100"],
    ["limit=2.5", "limit", "limit must be an integer from 1 to 100"],
    ["status=gone", "status", "status must be one of: active, unsubscribed, bounced, pending"],
    [`tag=${"t".repeat(41)}`, "tag", "tag must be at most 40 characters"],
    ["tag=", "tag", "tag must not be empty"],
    ["sort=asc", "sort", "sort is not a recognized parameter"],
    // Only decimal digits: no exponent, hex, sign, spaces or empty value.
    ["limit=1e1", "limit", "limit must be an integer from 1 to 100"],
    ["limit=0x10", "limit", "limit must be an integer from 1 to 100"],
    ["limit=%2010", "limit", "limit must be an integer from 1 to 100"],
    ["limit=10%20", "limit", "limit must be an integer from 1 to 100"],
    ["limit=%2B10", "limit", "limit must be an integer from 1 to 100"],
    ["limit=-1", "limit", "limit must be an integer from 1 to 100"],
    ["limit=99999999999999999999", "limit", "limit must be an integer from 1 to 100"],
    ["limit=", "limit", "limit must be an integer from 1 to 100"],
    ["limit=1&limit=2", "limit", "limit must be given once"],
    ["status=active&status=bounced", "status", "status must be given once"],
    ["tag=a&tag=b", "tag", "tag must be given once"],
    ["email=a@x.example&email=b@x.example", "email", "email must be given once"],
    ["after=a&after=b", "after", "after must be given once"],
    ["tag=%20%20", "tag", "tag must not be empty"],
    [`email=${"e".repeat(255)}`, "email", "email must be at most 254 characters"],
  ])("rejects ?%s", async (query, param, message) => {
    const t = await tenant();
    const res = await t.call("GET", `${t.ws}/subscribers?${query}`);
    expectError(res, 400, "validation_failed", param);
    if (message) expect(res.body.error.message).toBe(message);
  });

  it("rejects cursors it did not issue for this list", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 3);
    const page = await t.call("GET", `${t.ws}/subscribers?limit=1`);
    const cursor: string = page.body.pagination.next_cursor;
    const [payload, mac] = cursor.split(".") as [string, string];
    const tampered = `${payload}.${mac.startsWith("A") ? "B" : "A"}${mac.slice(1)}`;
    const forgedPosition = `${btoa("sub_ZZZZZZZZZZZZZZZZZZZZZZZZZZ").replace(/=+$/, "")}.${mac}`;
    for (const after of ["garbage", tampered, forgedPosition, `${cursor}.x`, "", " ", "a".repeat(600), `${cursor}${"A".repeat(600)}`]) {
      expectError(await t.call("GET", `${t.ws}/subscribers?after=${encodeURIComponent(after)}`), 400, "invalid_cursor", "after");
    }
    // A cursor from another workspace's list, even one the same credential can read, is not valid here.
    const other = await createWorkspace("Other");
    const both = await call("POST", "/admin/credentials", {
      token: ADMIN_TOKEN,
      body: { mode: "test", workspace_ids: [t.workspace.id, other.id] },
    });
    const res = await call("GET", `/v1/workspaces/${other.id}/subscribers?after=${encodeURIComponent(cursor)}`, {
      token: both.body.data.token,
    });
    expectError(res, 400, "invalid_cursor");
    expect((await t.call("GET", `${t.ws}/subscribers?limit=1&after=${encodeURIComponent(cursor)}`)).status).toBe(200);
  });

  it("binds a cursor to the filters its page was read with: with others it is refused, never a page of another list", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 4, (i) => ({ tags: i % 2 === 0 ? ["even"] : ["odd"] }));
    const page = await t.call("GET", `${t.ws}/subscribers?tag=even&limit=1`);
    const after = encodeURIComponent(page.body.pagination.next_cursor);
    for (const query of ["tag=odd", "", "status=active&tag=even"]) {
      const res = await t.call("GET", `${t.ws}/subscribers?${query}&after=${after}`);
      expectError(res, 400, "invalid_cursor", "after");
      expect(res.body.error.message).toContain("same filters");
    }
    const next = await t.call("GET", `${t.ws}/subscribers?limit=1&after=${after}&tag=even`);
    expect(next.status).toBe(200);
    expect(next.body.data[0].tags).toEqual(["even"]);
  });

  it("never shows another workspace's subscribers", async () => {
    const a = await tenant("A");
    const b = await tenant("B");
    await seedSubscribers(b.workspace.id, 5, () => ({ tags: ["vip"], status: "unsubscribed" }));
    expect((await a.call("GET", `${a.ws}/subscribers`)).body.data).toEqual([]);
    // Nor through any filter: each is a range of this workspace's own rows.
    for (const query of ["tag=vip", "status=unsubscribed", "tag=vip&status=unsubscribed", "email=user0@example.com", "email=user0@example.com&tag=vip"]) {
      const res = await a.call("GET", `${a.ws}/subscribers?${query}`);
      expect(res.status, res.text).toBe(200);
      expect(res.body.data, query).toEqual([]);
    }
    expect((await b.call("GET", `${b.ws}/subscribers?tag=vip`)).body.data).toHaveLength(5);
    // Filters combine: the address within the tag, or nothing when it is not in the tag or status.
    expect((await b.call("GET", `${b.ws}/subscribers?email=user0@example.com&tag=vip`)).body.data.map((s: { email: string }) => s.email)).toEqual(["user0@example.com"]);
    expect((await b.call("GET", `${b.ws}/subscribers?email=user0@example.com&tag=weekly`)).body.data).toEqual([]);
    expect((await b.call("GET", `${b.ws}/subscribers?email=user0@example.com&status=active`)).body.data).toEqual([]);
    expectError(await a.call("GET", `${b.ws}/subscribers`), 404, "not_found");
    expectError(await a.call("POST", `${b.ws}/subscribers`, { body: { email: "x@example.com" } }), 404, "not_found");
  });
});

describe("subscriber body rules", () => {
  it("stores optional text that is blank after trimming as null, on create and on update", async () => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "x@y.co", name: "", location: "", source: "   " } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ name: null, location: null, source: null });
    const path = `${t.ws}/subscribers/${res.body.data.id}`;
    expect((await t.call("GET", path)).body.data).toMatchObject({ name: null, location: null, source: null });

    await t.call("PATCH", path, { body: { name: "Ada", location: "Paris", source: "import" } });
    const cleared = await t.call("PATCH", path, { body: { name: " ", location: "", source: "\t\n" } });
    expect(cleared.status, cleared.text).toBe(200);
    expect(cleared.body.data).toMatchObject({ name: null, location: null, source: null });
    expect((await t.call("GET", path)).body.data).toMatchObject({ name: null, location: null, source: null });
    // A required field still rejects blank.
    const blankEmail = await t.call("PATCH", path, { body: { email: "  " } });
    expectError(blankEmail, 400, "validation_failed", "email");
    expect(blankEmail.body.error.message).toBe("email must not be empty");
  });

  it("types name, location and source as nullable in the OpenAPI document", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    for (const schema of ["CreateSubscriberRequest", "UpdateSubscriberRequest"]) {
      for (const field of ["name", "location", "source"]) {
        expect(doc.components.schemas[schema].properties[field].type, `${schema}.${field}`).toEqual(["string", "null"]);
      }
    }
  });

  it("limits tags to 50 entries, repeats included (a schema can state that), and drops duplicates", async () => {
    const t = await tenant();
    const fifty = Array.from({ length: 50 }, (_, i) => `t${i}`);
    const res = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "tags@example.com", tags: fifty } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.tags).toEqual(fifty);
    const patched = await t.call("PATCH", `${t.ws}/subscribers/${res.body.data.id}`, {
      body: { tags: [...Array.from({ length: 10 }, () => "x"), ...fifty.slice(1, 41)] },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data.tags).toEqual(["x", ...fifty.slice(1, 41)]);
    const tooMany = await t.call("PATCH", `${t.ws}/subscribers/${res.body.data.id}`, { body: { tags: [...fifty, " t0 "] } });
    expectError(tooMany, 400, "validation_failed", "tags");
    expect(tooMany.body.error.message).toBe("tags must have at most 50 items");
    const doc = (await call("GET", "/openapi.json")).body;
    expect(doc.components.schemas.CreateSubscriberRequest.properties.tags).toMatchObject({ maxItems: 50 });
  });

  it.each([
    ["name", { name: "\ud800" }, "name must be well-formed Unicode text"],
    ["name", { name: "a\udc00b" }, "name must be well-formed Unicode text"],
    ["name", { name: "a\u0000b" }, "name must not contain control characters"],
    ["name", { name: "\u000bAda" }, "name must not contain control characters"],
    ["location", { location: "Paris\u007f" }, "location must not contain control characters"],
    ["source", { source: "\u001b[31m" }, "source must not contain control characters"],
    ["tags[1]", { tags: ["ok", "b\u0007"] }, "tags[1] must not contain control characters"],
    ["email", { email: "a\u0000@example.com" }, "email must not contain control characters"],
  ])("rejects ill-formed or control text in %s", async (param, fields, message) => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "ctl@example.com", ...fields } });
    expectError(res, 400, "validation_failed", param);
    expect(res.body.error.message).toBe(message);
    expect(res.body.error.details).toEqual([{ param, message }]);
    const sub = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "ok@example.com" } });
    const patched = await t.call("PATCH", `${t.ws}/subscribers/${sub.body.data.id}`, { body: fields });
    expectError(patched, 400, "validation_failed", param);
    expect(patched.body.error.message).toBe(message);
  });

  it("keeps tabs, newlines and astral characters", async () => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "tab@example.com", name: "Ada\tL.\r\nB 😀", tags: ["🎉"] } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ name: "Ada\tL.\r\nB 😀", tags: ["🎉"] });
  });
});

describe("subscriber email addresses", () => {
  it.each([
    "user+tag@example.com",
    '"john doe"@example.com',
    '"a\\"b"@example.com',
    '"a@b"@example.com',
    "a@localhost",
    "a@[192.168.0.1]",
    "a@[IPv6:2001:db8::1]",
    "o'brien@example.co.uk",
    "!#$%&'*+-/=?^_`{|}~@example.com",
    "first.last@sub.example.com",
    "x@xn--bcher-kva.example",
    "x@a-b.example",
    `${"l".repeat(64)}@example.com`,
    `a@${"d".repeat(63)}.example`,
  ])("accepts %s", async (email) => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, { body: { email } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.email).toBe(email);
  });

  const invalid = "email must be a valid email address";
  it.each([
    ["ü@example.com", "email must contain ASCII characters only"],
    ["a@exämple.com", "email must contain ASCII characters only"],
    [`${"l".repeat(65)}@example.com`, "email must have at most 64 characters before the @"],
    [`${"l".repeat(60)}@${"d".repeat(63)}.${"d".repeat(63)}.${"d".repeat(63)}.com`, "email must be at most 254 characters"],
    ["a@-example.com", invalid],
    ["a@example-.com", invalid],
    ["a@ex_ample.com", invalid],
    [`a@${"d".repeat(64)}.example`, invalid],
    ["a..b@example.com", invalid],
    [".a@example.com", invalid],
    ["a.@example.com", invalid],
    ["a@example..com", invalid],
    ["a@example.com.", invalid],
    ["a@", invalid],
    ["@example.com", invalid],
    ["example.com", invalid],
    ["a@b@example.com", invalid],
    ["john doe@example.com", invalid],
    ['"unterminated@example.com', invalid],
    ['"a\tb"@example.com', invalid],
    ["a@[300.1.1.1]", invalid],
    ["a@[example.com]", invalid],
    ["a@[IPv6:zz::1]", invalid],
    ["a@[192.168.0.1", invalid],
    ["a(comment)@example.com", invalid],
  ])("rejects %s", async (email, message) => {
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, { body: { email } });
    expectError(res, 400, "validation_failed", "email");
    expect(res.body.error.message).toBe(message);
    expect(res.body.error.details).toHaveLength(1);
  });

  it("does not validate the list filter as an address: it is only trimmed and bounded", async () => {
    const t = await tenant();
    const res = await t.call("GET", `${t.ws}/subscribers?email=not-an-address`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual([]);
  });
});

describe("subscriber path messages", () => {
  it.each(["sub_", `sub_${"A".repeat(65)}`, "sub_does_not_exist", "sub_00000000-0000-0000-0000-000000000000", "sub_%20x"])(
    "looks up the opaque id %s and finds nothing: 404, on every subscriber route",
    async (id) => {
      const t = await tenant();
      for (const [method, suffix, body] of [
        ["GET", "", undefined],
        ["PATCH", "", { name: "Ada" }],
      ] as const) {
        const res = await t.call(method, `${t.ws}/subscribers/${id}${suffix}`, { body });
        expectError(res, 404, "not_found", "subscriber_id");
        expect(res.body.error.message).toBe(`No such subscriber: ${decodeURIComponent(id)}`);
      }
    },
  );

  it("repeats an id it did not find at most 200 characters long, control characters escaped", async () => {
    const t = await tenant();
    const long = await t.call("GET", `${t.ws}/subscribers/sub_${"a".repeat(5_000)}`);
    expectError(long, 404, "not_found", "subscriber_id");
    expect(long.body.error.message).toBe(`No such subscriber: sub_${"a".repeat(200 - 1 - 4)}…`);
    // Cut between characters: never half of an emoji's surrogate pair.
    const emoji = await t.call("GET", `${t.ws}/subscribers/sub_${"a".repeat(194)}%F0%9F%98%80bbbb`);
    expect(emoji.body.error.message).toBe(`No such subscriber: sub_${"a".repeat(194)}…`);
    expect(emoji.body.error.message.isWellFormed()).toBe(true);
    const control = await t.call("GET", `${t.ws}/subscribers/sub_%00x%0A`);
    expect(control.body.error.message).toBe("No such subscriber: sub_\\u0000x\\u000a");
    const path = await t.call("GET", `/v1/${"p".repeat(3_000)}`);
    expectError(path, 404, "not_found");
    expect(path.body.error.message.length).toBeLessThanOrEqual("No route for GET ".length + 200);
    // An id of another kind in a body is said to be one.
    const segment = await t.call("POST", `${t.ws}/segments`, { body: { name: "S", filter: { tags_any: ["x"] } } });
    const misplaced = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "Hi", newsletter_id: segment.body.data.id } });
    expectError(misplaced, 400, "resource_missing", "newsletter_id");
    expect(misplaced.body.error.message).toBe(`No newsletter ${segment.body.data.id} exists in this workspace (seg_… is a segment id)`);
  });

  it("says what is wrong with an id without its prefix", async () => {
    const t = await tenant();
    for (const id of ["cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T", "01JD6Q3Z6W9X8B4N2M5K7P1R3T", "SUB_01JD6Q3Z6W9X8B4N2M5K7P1R3T"]) {
      const res = await t.call("GET", `${t.ws}/subscribers/${id}`);
      expectError(res, 400, "validation_failed", "subscriber_id");
      expect(res.body.error.message).toBe("subscriber_id must be a subscriber id, which starts with sub_");
    }
  });

  it("names the path parameter of a subscriber that does not exist", async () => {
    const t = await tenant();
    const path = `${t.ws}/subscribers/sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T`;
    for (const res of [await t.call("GET", path), await t.call("PATCH", path, { body: { name: "x" } })]) {
      expectError(res, 404, "not_found", "subscriber_id");
      expect(res.body.error.message).toBe("No such subscriber: sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T");
    }
  });
});
