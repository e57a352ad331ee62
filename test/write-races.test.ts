import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { type ApiResponse, tenant } from "./helpers";
import { createCampaign, createNewsletter, type Tenant } from "./send.fixtures";

// A PATCH that writes nothing finds out why with a read after its batch. Another request's write
// can land between the two: these tests put one exactly there (the next D1 batch commits, then the
// other request runs to its end before the first reads anything), and hold the first request's
// answer to what some order of the two requests gives.

afterEach(() => {
  vi.restoreAllMocks();
});

/** Right after the next D1 batch (the PATCH's write, refused), `between` runs: another request's whole write. */
const writeBetween = (between: () => Promise<ApiResponse>) => {
  const batch = env.DB.batch.bind(env.DB);
  const seen: ApiResponse[] = [];
  const spy = vi.spyOn(env.DB, "batch").mockImplementationOnce(async (statements) => {
    const results = await batch(statements);
    seen.push(await between());
    return results;
  });
  return { spy, seen };
};

const patch = (t: Tenant, path: string, body: unknown) => t.call("PATCH", `${t.ws}${path}`, { body });
const read = async (t: Tenant, path: string) => (await t.call("GET", `${t.ws}${path}`)).body.data;

describe("a PATCH refused or a no-op, with another write landing before it reads why", () => {
  it("takes an email its owner gave up meanwhile: 200 with the email, not the subscriber unchanged", async () => {
    const t = await tenant();
    const a = (await t.call("POST", `${t.ws}/subscribers`, { body: { email: "x@example.com" } })).body.data;
    const b = (await t.call("POST", `${t.ws}/subscribers`, { body: { email: "b@example.com" } })).body.data;
    const other = writeBetween(() => patch(t, `/subscribers/${a.id}`, { email: "y@example.com" }));
    const res = await patch(t, `/subscribers/${b.id}`, { email: "x@example.com" });
    expect(other.spy).toHaveBeenCalled();
    expect(other.seen[0]?.status).toBe(200);
    // Ordered after the other request: the email was free, and is B's now.
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.email).toBe("x@example.com");
    expect((await read(t, `/subscribers/${b.id}`)).email).toBe("x@example.com");
    // One subscriber.updated for each write that applied.
    const events = (await t.call("GET", `${t.ws}/events?type=subscriber.updated`)).body.data;
    expect(events.filter((e: { data: { object: { id: string } } }) => e.data.object.id === b.id)).toHaveLength(1);
  });

  it("still refuses an email another subscriber holds: 409 with its id", async () => {
    const t = await tenant();
    const a = (await t.call("POST", `${t.ws}/subscribers`, { body: { email: "x@example.com" } })).body.data;
    const b = (await t.call("POST", `${t.ws}/subscribers`, { body: { email: "b@example.com" } })).body.data;
    const other = writeBetween(() => patch(t, `/subscribers/${a.id}`, { name: "A" }));
    const res = await patch(t, `/subscribers/${b.id}`, { email: "X@example.com" });
    expect(other.spy).toHaveBeenCalled();
    expect(res.status, res.text).toBe(409);
    expect(res.body.error.code).toBe("subscriber_exists");
  });

  it("adds a tag to a full list once another request made room: the tag is kept", async () => {
    const t = await tenant();
    const full = Array.from({ length: 50 }, (_, i) => `t${i}`);
    const s = (await t.call("POST", `${t.ws}/subscribers`, { body: { email: "full@example.com", tags: full } })).body.data;
    const other = writeBetween(() => patch(t, `/subscribers/${s.id}`, { remove_tags: ["t0"] }));
    const res = await patch(t, `/subscribers/${s.id}`, { add_tags: ["new"] });
    expect(other.seen[0]?.status).toBe(200);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.tags).toContain("new");
    const tags = (await read(t, `/subscribers/${s.id}`)).tags;
    expect(tags).toContain("new");
    expect(tags).not.toContain("t0");
    expect(tags).toHaveLength(50);
  });

  it("answers a no-op with the values it asked for, never another request's: the write is made again on what changed", async () => {
    const t = await tenant();
    const s = (await t.call("POST", `${t.ws}/subscribers`, { body: { email: "s@example.com" } })).body.data;
    writeBetween(() => patch(t, `/subscribers/${s.id}`, { status: "unsubscribed" }));
    const res = await patch(t, `/subscribers/${s.id}`, { status: "active" });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.status).toBe("active");
    expect((await read(t, `/subscribers/${s.id}`)).status).toBe("active");

    const nl = await createNewsletter(t, { name: "N0" });
    writeBetween(() => patch(t, `/newsletters/${nl.id}`, { name: "N1" }));
    const renamed = await patch(t, `/newsletters/${nl.id}`, { name: "N0" });
    expect(renamed.body.data.name).toBe("N0");
    expect((await read(t, `/newsletters/${nl.id}`)).name).toBe("N0");

    const campaign = await createCampaign(t, { subject: "S0", newsletter_id: nl.id });
    writeBetween(() => patch(t, `/campaigns/${campaign.id}`, { subject: "S1" }));
    const edited = await patch(t, `/campaigns/${campaign.id}`, { subject: "S0" });
    expect(edited.body.data.subject).toBe("S0");
    expect((await read(t, `/campaigns/${campaign.id}`)).subject).toBe("S0");

    const endpoint = (await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url: "https://hooks.example.com/a", events: ["*"], description: "D0" } })).body.data;
    writeBetween(() => patch(t, `/webhook_endpoints/${endpoint.id}`, { description: "D1" }));
    const described = await patch(t, `/webhook_endpoints/${endpoint.id}`, { description: "D0" });
    expect(described.body.data.description).toBe("D0");
    expect((await read(t, `/webhook_endpoints/${endpoint.id}`)).description).toBe("D0");
  });

  it("answers a campaign edit made impossible meanwhile with its reason: 409 campaign_not_editable", async () => {
    const t = await tenant();
    const campaign = await createCampaign(t, { subject: "S0" });
    writeBetween(() => t.call("POST", `${t.ws}/campaigns/${campaign.id}/archive`));
    const res = await patch(t, `/campaigns/${campaign.id}`, { subject: "S0" });
    expect(res.status, res.text).toBe(409);
    expect(res.body.error.code).toBe("campaign_not_editable");
  });

  it("archives a campaign whose send another request unscheduled meanwhile: 200 archived, not 409 'this one is draft'", async () => {
    const t = await tenant();
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const campaign = await createCampaign(t, { subject: "S0", scheduled_at: at });
    expect((await t.call("POST", `${t.ws}/campaigns/${campaign.id}/send`)).status).toBe(202);
    writeBetween(() => t.call("POST", `${t.ws}/campaigns/${campaign.id}/unschedule`));
    const res = await t.call("POST", `${t.ws}/campaigns/${campaign.id}/archive`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.status).toBe("archived");
  });

  it("makes its write once with nothing in between: a no-op is one batch (and its read), not tried again", async () => {
    const t = await tenant();
    const s = (await t.call("POST", `${t.ws}/subscribers`, { body: { email: "n@example.com", name: "N" } })).body.data;
    const batch = vi.spyOn(env.DB, "batch");
    const res = await patch(t, `/subscribers/${s.id}`, { name: "N" });
    expect(res.status).toBe(200);
    expect(res.body.data.updated_at).toBe(s.updated_at);
    expect(batch).toHaveBeenCalledTimes(1);
  });
});
