import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { createScheduledController } from "cloudflare:test";
import worker from "../src/index";
import { type ApiResponse, call, createCredential, expectError, seedSubscribers, tenant } from "./helpers";

const withKey = (key: string, body?: unknown) => ({ headers: { "Idempotency-Key": key }, ...(body !== undefined && { body }) });

const countSubscribers = async (workspaceId: string) =>
  (await env.DB.prepare("select count(*) as n from subscribers where workspace_id = ?").bind(workspaceId).first<{ n: number }>())!.n;

const keyRow = (credentialId: string, key: string) =>
  env.DB.prepare("select * from idempotency_keys where credential_id = ? and key = ?")
    .bind(credentialId, key)
    .first<{ fingerprint: string; expires_at: number; response: string }>();

/** The replay is the original answer, byte for byte, marked as a replay and with its own Request-Id. */
const expectReplayOf = (replay: ApiResponse, original: ApiResponse) => {
  expect(replay.status).toBe(original.status);
  expect(replay.text).toBe(original.text);
  expect(replay.headers.get("content-type")).toBe(original.headers.get("content-type"));
  expect(replay.headers.get("idempotent-replayed")).toBe("true");
  expect(replay.headers.get("request-id")).toMatch(/^req_/);
  expect(replay.headers.get("request-id")).not.toBe(original.headers.get("request-id"));
};

/** Every stored response gone from KV: the next request with the key is answered from D1's record. */
const forgetKv = async () => {
  const { keys } = await env.IDEMPOTENCY_KV.list();
  await Promise.all(keys.map((k) => env.IDEMPOTENCY_KV.delete(k.name)));
};

afterEach(() => {
  vi.restoreAllMocks();
});

describe("Idempotency-Key", () => {
  it("replays the stored response byte for byte without creating anything again", async () => {
    const t = await tenant();
    const first = await t.call("POST", `${t.ws}/subscribers`, withKey("replay-key-1", { email: "ada@example.com" }));
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get("idempotent-replayed")).toBeNull();

    const again = await t.call("POST", `${t.ws}/subscribers`, withKey("replay-key-1", { email: "ada@example.com" }));
    expectReplayOf(again, first);
    expect(again.body.data.id).toBe(first.body.data.id);
    expect(await countSubscribers(t.workspace.id)).toBe(1);

    // The path is fingerprinted without /v1: both spellings of the route are the same request.
    const unversioned = await t.call(
      "POST",
      `/workspaces/${t.workspace.id}/subscribers`,
      withKey("replay-key-1", { email: "ada@example.com" }),
    );
    expectReplayOf(unversioned, first);
    expect(await countSubscribers(t.workspace.id)).toBe(1);
  });

  it("replays from the D1 claim row when KV does not have the response yet", async () => {
    const t = await tenant();
    const first = await t.call("POST", `${t.ws}/subscribers`, withKey("d1-fallback", { email: "bo@example.com" }));
    expect(first.status, first.text).toBe(201);
    // As seen from a location KV has not reached yet.
    vi.spyOn(env.IDEMPOTENCY_KV, "get").mockResolvedValue(null as never);
    const again = await t.call("POST", `${t.ws}/subscribers`, withKey("d1-fallback", { email: "bo@example.com" }));
    expectReplayOf(again, first);
    expect(await countSubscribers(t.workspace.id)).toBe(1);
  });

  it("answers 422 idempotency_key_reused for another body, path or method", async () => {
    const t = await tenant();
    const first = await t.call("POST", `${t.ws}/subscribers`, withKey("reuse-key-1", { email: "cy@example.com" }));
    expect(first.status, first.text).toBe(201);
    const id = first.body.data.id as string;

    const otherBody = await t.call("POST", `${t.ws}/subscribers`, withKey("reuse-key-1", { email: "di@example.com" }));
    expectError(otherBody, 422, "idempotency_key_reused", "Idempotency-Key");
    expect(otherBody.body.error.type).toBe("idempotency_error");

    // Same JSON value, other bytes: the fingerprint is over the bytes sent.
    const otherBytes = await t.call("POST", `${t.ws}/subscribers`, {
      headers: { "Idempotency-Key": "reuse-key-1", "content-type": "application/json" },
      raw: '{ "email": "cy@example.com" }',
    });
    expectError(otherBytes, 422, "idempotency_key_reused");

    const otherPath = await t.call("PATCH", `${t.ws}/subscribers/${id}`, withKey("reuse-key-1", { email: "cy@example.com" }));
    expectError(otherPath, 422, "idempotency_key_reused");

    // No path has two idempotent methods, so the method is shown changing along with the path.
    const patched = await t.call("PATCH", `${t.ws}/subscribers/${id}`, withKey("reuse-key-2", { name: "Cy" }));
    expect(patched.status, patched.text).toBe(200);
    const postOnPatchedPath = await t.call("POST", `${t.ws}/subscribers`, withKey("reuse-key-2", { name: "Cy" }));
    expectError(postOnPatchedPath, 422, "idempotency_key_reused");

    expect(await countSubscribers(t.workspace.id)).toBe(1);
  });

  it("accepts keys of 8 to 255 characters and rejects the rest with 400 validation_failed", async () => {
    const t = await tenant();
    const post = (key: string, email: string) => t.call("POST", `${t.ws}/subscribers`, withKey(key, { email }));

    expectError(await post("k".repeat(7), "a@example.com"), 400, "validation_failed", "Idempotency-Key");
    expectError(await post("k".repeat(256), "b@example.com"), 400, "validation_failed", "Idempotency-Key");
    expectError(await post("", "c@example.com"), 400, "validation_failed", "Idempotency-Key");
    const short = await post("k".repeat(7), "a@example.com");
    expect(short.body.error.details).toEqual([{ param: "Idempotency-Key", message: "Idempotency-Key must be at least 8 characters" }]);
    expect(await countSubscribers(t.workspace.id)).toBe(0);

    const eight = await post("k".repeat(8), "d@example.com");
    expect(eight.status, eight.text).toBe(201);
    const max = await post("k".repeat(255), "e@example.com");
    expect(max.status, max.text).toBe(201);
    expectReplayOf(await post("k".repeat(255), "e@example.com"), max);
    expect(await countSubscribers(t.workspace.id)).toBe(2);
  });

  it("lets exactly one of 20 concurrent requests with one key do the work", async () => {
    const t = await tenant();
    const body = { email: "race@example.com", tags: ["x"] };
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => t.call("POST", `${t.ws}/subscribers`, withKey("concurrent-key", body))),
    );
    const originals = answers.filter((a) => a.status === 201 && a.headers.get("idempotent-replayed") === null);
    expect(originals).toHaveLength(1);
    const [original] = originals;
    for (const answer of answers) {
      if (answer === original) continue;
      if (answer.status === 409) {
        expectError(answer, 409, "idempotency_key_in_use", "Idempotency-Key");
        expect(answer.body.error.type).toBe("idempotency_error");
      } else {
        expectReplayOf(answer, original!);
      }
    }
    expect(await countSubscribers(t.workspace.id)).toBe(1);
    // Once the first has finished, every retry gets the stored success.
    expectReplayOf(await t.call("POST", `${t.ws}/subscribers`, withKey("concurrent-key", body)), original!);
  });

  it("scopes keys to the credential", async () => {
    const t = await tenant();
    const other = await createCredential([t.workspace.id]);
    const first = await t.call("POST", `${t.ws}/subscribers`, withKey("shared-key-1", { email: "one@example.com" }));
    const second = await call("POST", `${t.ws}/subscribers`, { token: other.token, ...withKey("shared-key-1", { email: "two@example.com" }) });
    expect(first.status, first.text).toBe(201);
    expect(second.status, second.text).toBe(201);
    expect(second.headers.get("idempotent-replayed")).toBeNull();
    expect(second.body.data.id).not.toBe(first.body.data.id);
    expect(await countSubscribers(t.workspace.id)).toBe(2);
  });

  it("does not store a validation failure: the corrected retry with the same key runs", async () => {
    const t = await tenant();
    const invalid = await t.call("POST", `${t.ws}/subscribers`, withKey("fix-and-retry", { email: "not-an-email" }));
    expectError(invalid, 400, "validation_failed", "email");
    expect(await keyRow(t.credential.id, "fix-and-retry")).toBeNull();

    const fixed = await t.call("POST", `${t.ws}/subscribers`, withKey("fix-and-retry", { email: "fixed@example.com" }));
    expect(fixed.status, fixed.text).toBe(201);
    expect(fixed.headers.get("idempotent-replayed")).toBeNull();
    expectReplayOf(
      await t.call("POST", `${t.ws}/subscribers`, withKey("fix-and-retry", { email: "fixed@example.com" })),
      fixed,
    );
  });

  it("does not store a 5xx: the retry runs again", async () => {
    const t = await tenant();
    const prepare = env.DB.prepare.bind(env.DB);
    const failing = vi.spyOn(env.DB, "prepare").mockImplementation((query: string) => {
      if (/^insert into "subscribers"/i.test(query)) throw new Error("D1 is unavailable");
      return prepare(query);
    });
    const put = vi.spyOn(env.IDEMPOTENCY_KV, "put");
    // The unexpected exception is logged as it should be; keep it out of the test output.
    vi.spyOn(console, "error").mockImplementation(() => {});
    const failed = await t.call("POST", `${t.ws}/subscribers`, withKey("server-error", { email: "later@example.com" }));
    expectError(failed, 500, "internal_error");
    expect(put).not.toHaveBeenCalled();
    expect(await keyRow(t.credential.id, "server-error")).toBeNull();

    failing.mockRestore();
    const retried = await t.call("POST", `${t.ws}/subscribers`, withKey("server-error", { email: "later@example.com" }));
    expect(retried.status, retried.text).toBe(201);
    expect(retried.headers.get("idempotent-replayed")).toBeNull();
    expect(await countSubscribers(t.workspace.id)).toBe(1);
  });

  it("stores the handler's own errors: a 409 subscriber_exists replays as that 409", async () => {
    const t = await tenant();
    const existing = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "taken@example.com" } });
    expect(existing.status).toBe(201);
    const conflict = await t.call("POST", `${t.ws}/subscribers`, withKey("conflict-key", { email: "Taken@example.com" }));
    expectError(conflict, 409, "subscriber_exists", "email");
    // The refused write wrote no event: only the first create's.
    const events = await env.DB.prepare("SELECT type FROM events WHERE workspace_id = ?").bind(t.workspace.id).all<{ type: string }>();
    expect(events.results.map((e) => e.type)).toEqual(["subscriber.created"]);

    // Even once the conflict is gone, the key keeps answering what it answered.
    await env.DB.prepare("delete from subscribers where id = ?").bind(existing.body.data.id).run();
    const replayed = await t.call("POST", `${t.ws}/subscribers`, withKey("conflict-key", { email: "Taken@example.com" }));
    expectReplayOf(replayed, conflict);
    expect(replayed.body.error.request_id).toBe(conflict.body.error.request_id);
    expect(await countSubscribers(t.workspace.id)).toBe(0);
  });

  it("stores a refused update as refused: a keyed PATCH to a taken email is a 409, and so is its replay from D1", async () => {
    const t = await tenant();
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "first@example.com" } });
    const second = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "second@example.com" } });
    const path = `${t.ws}/subscribers/${second.body.data.id}`;
    const refused = await t.call("PATCH", path, withKey("patch-taken-1", { email: "first@example.com" }));
    expectError(refused, 409, "subscriber_exists", "email");
    await forgetKv();
    expectReplayOf(await t.call("PATCH", path, withKey("patch-taken-1", { email: "first@example.com" })), refused);
    expect((await t.call("GET", path)).body.data.email).toBe("second@example.com");
  });

  it("stores a refused campaign edit as refused: 409 campaign_not_editable, and so is its replay from D1", async () => {
    const t = await tenant();
    const newsletter = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "Weekly", from_email: "news@example.com" } });
    const campaign = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "Hello", newsletter_id: newsletter.body.data.id } });
    const path = `${t.ws}/campaigns/${campaign.body.data.id}`;
    expect((await t.call("POST", `${path}/archive`)).status).toBe(200);
    const refused = await t.call("PATCH", path, withKey("campaign-edit-1", { subject: "New" }));
    expectError(refused, 409, "campaign_not_editable");
    await forgetKv();
    expectReplayOf(await t.call("PATCH", path, withKey("campaign-edit-1", { subject: "New" })), refused);
    expect((await t.call("GET", path)).body.data.subject).toBe("Hello");
  });

  it("makes PATCH idempotent: a replay does not apply the change again", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "pat@example.com" } });
    const path = `${t.ws}/subscribers/${created.body.data.id}`;
    const patched = await t.call("PATCH", path, withKey("patch-key-1", { name: "Pat", tags: ["vip"] }));
    expect(patched.status, patched.text).toBe(200);

    const later = await t.call("PATCH", path, { body: { name: "Patricia" } });
    expect(later.status).toBe(200);

    const replayed = await t.call("PATCH", path, withKey("patch-key-1", { name: "Pat", tags: ["vip"] }));
    expectReplayOf(replayed, patched);
    expect(replayed.body.data.name).toBe("Pat");
    const current = await t.call("GET", path);
    expect(current.body.data.name).toBe("Patricia");
    expect(current.body.data.updated_at).toBe(later.body.data.updated_at);
  });

  it("keeps responses for 24 hours, after which the key runs anew", async () => {
    const t = await tenant();
    const put = vi.spyOn(env.IDEMPOTENCY_KV, "put");
    const first = await t.call("POST", `${t.ws}/subscribers`, withKey("expiring-key", { email: "exp@example.com" }));
    expect(first.status, first.text).toBe(201);
    expect(put).toHaveBeenCalledTimes(1);
    const [kvKey, , options] = put.mock.calls[0]!;
    expect(options).toEqual({ expirationTtl: 86_400 });
    const row = await keyRow(t.credential.id, "expiring-key");
    expect(JSON.parse(row!.response)).toMatchObject({ status: 201, resource: "subscriber" });
    expect(row!.expires_at - Date.now()).toBeGreaterThan(86_400_000 - 60_000);
    expect(row!.expires_at - Date.now()).toBeLessThanOrEqual(86_400_000);

    // What 24 hours do: the KV entry's TTL runs out and the claim row's retention ends.
    await env.IDEMPOTENCY_KV.delete(kvKey as string);
    await env.DB.prepare("update idempotency_keys set expires_at = ? where credential_id = ? and key = ?")
      .bind(Date.now() - 1, t.credential.id, "expiring-key")
      .run();
    await env.DB.prepare("delete from subscribers where workspace_id = ?").bind(t.workspace.id).run();

    const anew = await t.call("POST", `${t.ws}/subscribers`, withKey("expiring-key", { email: "exp@example.com" }));
    expect(anew.status, anew.text).toBe(201);
    expect(anew.headers.get("idempotent-replayed")).toBeNull();
    expect(anew.body.data.id).not.toBe(first.body.data.id);

    // An expired key is free for another request too.
    await env.IDEMPOTENCY_KV.delete(kvKey as string);
    await env.DB.prepare("update idempotency_keys set expires_at = ? where credential_id = ? and key = ?")
      .bind(Date.now() - 1, t.credential.id, "expiring-key")
      .run();
    const other = await t.call("POST", `${t.ws}/subscribers`, withKey("expiring-key", { email: "new@example.com" }));
    expect(other.status, other.text).toBe(201);
  });

  it("a write that fails under an expired key not yet purged is a 500, not an answer from the expired record", async () => {
    const t = await tenant();
    expect((await t.call("POST", `${t.ws}/subscribers`, withKey("expired-then-failed", { email: "old@example.com" }))).status).toBe(201);
    await env.DB.prepare("update idempotency_keys set expires_at = ? where credential_id = ? and key = ?")
      .bind(Date.now() - 1, t.credential.id, "expired-then-failed")
      .run();
    await forgetKv();
    vi.spyOn(env.DB, "batch").mockRejectedValueOnce(new Error("D1 is unavailable"));
    vi.spyOn(console, "error").mockImplementation(() => {});
    const failed = await t.call("POST", `${t.ws}/subscribers`, withKey("expired-then-failed", { email: "new@example.com" }));
    expectError(failed, 500, "internal_error");
    vi.restoreAllMocks();
    const retried = await t.call("POST", `${t.ws}/subscribers`, withKey("expired-then-failed", { email: "new@example.com" }));
    expect(retried.status, retried.text).toBe(201);
    expect(retried.headers.get("idempotent-replayed")).toBeNull();
  });

  it("records an error answered under an expired key not yet purged: D1 holds the new answer", async () => {
    const t = await tenant();
    const missing = `${t.ws}/campaigns/cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T/test`;
    const first = await t.call("POST", missing, withKey("reused-after-a-day", { emails: ["a@example.com"] }));
    expectError(first, 404, "not_found", "campaign_id");
    const expire = async () => {
      await env.DB.prepare("update idempotency_keys set expires_at = ? where credential_id = ? and key = ?")
        .bind(Date.now() - 1, t.credential.id, "reused-after-a-day")
        .run();
      await forgetKv();
    };
    // A day later (the record expired, the sweep has not run, KV's copy is gone), another request.
    await expire();
    const second = await t.call("POST", missing, withKey("reused-after-a-day", { emails: ["b@example.com"] }));
    expectError(second, 404, "not_found", "campaign_id");
    const row = await keyRow(t.credential.id, "reused-after-a-day");
    expect(row!.expires_at).toBeGreaterThan(Date.now());
    expect(JSON.parse(row!.response).body).toBe(second.text);

    // D1 is the truth: with KV's copy gone, the key is the second request's, and another is a 422.
    await forgetKv();
    const third = await t.call("POST", `${t.ws}/subscribers`, withKey("reused-after-a-day", { email: "c@example.com" }));
    expectError(third, 422, "idempotency_key_reused");
    expect(await countSubscribers(t.workspace.id)).toBe(0);
    expectReplayOf(await t.call("POST", missing, withKey("reused-after-a-day", { emails: ["b@example.com"] })), second);
  });

  it("purges expired records in the cron sweep, and only those", async () => {
    const t = await tenant();
    const insert = env.DB.prepare(
      "insert into idempotency_keys (credential_id, key, fingerprint, response, created_at, expires_at) values (?, ?, 'f', '{}', 0, ?)",
    );
    await env.DB.batch([
      insert.bind(t.credential.id, "old-key-1", Date.now() - 1),
      insert.bind(t.credential.id, "old-key-2", Date.now() - 60_000),
    ]);
    const fresh = await t.call("POST", `${t.ws}/subscribers`, withKey("fresh-key", { email: "p@example.com" }));
    expect(fresh.status).toBe(201);

    await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env);
    expect(await keyRow(t.credential.id, "old-key-1")).toBeNull();
    expect(await keyRow(t.credential.id, "old-key-2")).toBeNull();
    expect(await keyRow(t.credential.id, "fresh-key")).not.toBeNull();
  });

});

/** Holds every D1 batch until `open()`: a request caught there is in flight, before its write commits. */
const holdBatches = () => {
  let resolve = () => {};
  const gate = new Promise<void>((done) => {
    resolve = done;
  });
  const batch = env.DB.batch.bind(env.DB);
  let held = 0;
  const spy = vi.spyOn(env.DB, "batch").mockImplementation(async (statements) => {
    held++;
    await gate;
    return batch(statements);
  });
  return { open: resolve, spy, held: () => held };
};

describe("Idempotency-Key with a request in flight", () => {
  it("answers 409 to a retry while the first runs here, then replays its result", async () => {
    const t = await tenant();
    const body = { email: "slow@example.com" };
    const gate = holdBatches();
    const slow = t.call("POST", `${t.ws}/subscribers`, withKey("slow-key-1", body));
    await vi.waitUntil(() => gate.held() === 1);

    const retry = await t.call("POST", `${t.ws}/subscribers`, withKey("slow-key-1", body));
    expectError(retry, 409, "idempotency_key_in_use", "Idempotency-Key");
    expect(retry.body.error.type).toBe("idempotency_error");
    expect(retry.headers.get("retry-after")).toBe("1");
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    // Nothing of the first request is written until its batch commits: no record, no row.
    expect(await keyRow(t.credential.id, "slow-key-1")).toBeNull();

    gate.open();
    const first = await slow;
    expect(first.status, first.text).toBe(201);
    gate.spy.mockRestore();
    expectReplayOf(await t.call("POST", `${t.ws}/subscribers`, withKey("slow-key-1", body)), first);
    expect(await countSubscribers(t.workspace.id)).toBe(1);
  });

  it("a key in flight for one credential does not hold up another credential's request with the same key", async () => {
    const t = await tenant();
    const other = await createCredential([t.workspace.id]);
    // The other credential's token is looked up (and cached) before the gate closes.
    expect((await call("GET", `${t.ws}/subscribers?limit=1`, { token: other.token })).status).toBe(200);
    const gate = holdBatches();
    const slow = t.call("POST", `${t.ws}/subscribers`, withKey("flight-key-1", { email: "one@example.com" }));
    await vi.waitUntil(() => gate.held() === 1);
    const second = call("POST", `${t.ws}/subscribers`, { token: other.token, ...withKey("flight-key-1", { email: "two@example.com" }) });
    await vi.waitUntil(() => gate.held() === 2);
    gate.open();
    const [a, b] = await Promise.all([slow, second]);
    expect(a.status, a.text).toBe(201);
    expect(b.status, b.text).toBe(201);
    expect(await countSubscribers(t.workspace.id)).toBe(2);
  });

  it("answers with the request that committed first when another isolate won the key: nothing of its own is written", async () => {
    const t = await tenant();
    const body = { name: "Weekly", from_email: "news@example.com" };
    const put = vi.spyOn(env.IDEMPOTENCY_KV, "put");
    const winner = await t.call("POST", `${t.ws}/newsletters`, withKey("race-key-1", body));
    expect(winner.status, winner.text).toBe(201);
    // As seen from another isolate that has not met the key yet: KV has not got the answer there.
    await env.IDEMPOTENCY_KV.delete(put.mock.calls[0]![0] as string);

    const loser = await t.call("POST", `${t.ws}/newsletters`, withKey("race-key-1", body));
    expectReplayOf(loser, winner);
    const list = await t.call("GET", `${t.ws}/newsletters`);
    expect(list.body.data.map((n: { id: string }) => n.id)).toEqual([winner.body.data.id]);

    // Another body under the same key, in the same situation, is refused and writes nothing.
    await env.IDEMPOTENCY_KV.delete(put.mock.calls[0]![0] as string);
    const misuse = await t.call("POST", `${t.ws}/newsletters`, withKey("race-key-1", { ...body, name: "Other" }));
    expectError(misuse, 422, "idempotency_key_reused", "Idempotency-Key");
    expect((await t.call("GET", `${t.ws}/newsletters`)).body.data).toHaveLength(1);
  });
});

describe("Idempotency-Key on campaign writes", () => {
  const draftCampaign = async (t: Awaited<ReturnType<typeof tenant>>) => {
    const newsletter = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "Weekly", from_email: "news@example.com" } });
    expect(newsletter.status, newsletter.text).toBe(201);
    const campaign = await t.call("POST", `${t.ws}/campaigns`, {
      ...withKey("campaign-create-1", { subject: "Hello", newsletter_id: newsletter.body.data.id }),
    });
    expect(campaign.status, campaign.text).toBe(201);
    const again = await t.call("POST", `${t.ws}/campaigns`, {
      ...withKey("campaign-create-1", { subject: "Hello", newsletter_id: newsletter.body.data.id }),
    });
    expectReplayOf(again, campaign);
    const list = await t.call("GET", `${t.ws}/campaigns`);
    expect(list.body.data).toHaveLength(1);
    return campaign.body.data.id as string;
  };

  /** Lets the send finish, so its queue messages are not left for another test to consume. */
  const settled = async (t: Awaited<ReturnType<typeof tenant>>, operationId: string) => {
    await vi.waitUntil(
      async () => {
        const op = await t.call("GET", `${t.ws}/operations/${operationId}`);
        return op.body.data.status === "succeeded" || op.body.data.status === "failed";
      },
      { timeout: 20_000, interval: 50 },
    );
  };

  const operationsOf = async (campaignId: string) =>
    (await env.DB.prepare("select count(*) as n from operations where campaign_id = ?").bind(campaignId).first<{ n: number }>())!.n;

  it("starts a send once when it is retried with the same key", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 3);
    const campaignId = await draftCampaign(t);
    const send = `${t.ws}/campaigns/${campaignId}/send`;

    const first = await t.call("POST", send, withKey("send-key-1", { integration_slug: "sandbox" }));
    expect(first.status, first.text).toBe(202);
    const again = await t.call("POST", send, withKey("send-key-1", { integration_slug: "sandbox" }));
    expectReplayOf(again, first);
    expect(again.body.data.id).toBe(first.body.data.id);
    expect(await operationsOf(campaignId)).toBe(1);

    // Without the key, a second send is a new request, and the campaign is no longer a draft.
    expectError(await t.call("POST", send, { body: { integration_slug: "sandbox" } }), 409, "campaign_not_sendable");
    await settled(t, first.body.data.id);
    expectReplayOf(await t.call("POST", send, withKey("send-key-1", { integration_slug: "sandbox" })), first);
    expect(await operationsOf(campaignId)).toBe(1);
  });

  it("answers concurrent sends with one key with the one operation or 409 idempotency_key_in_use", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 2);
    const campaignId = await draftCampaign(t);
    const send = `${t.ws}/campaigns/${campaignId}/send`;
    const answers = await Promise.all(Array.from({ length: 10 }, () => t.call("POST", send, withKey("send-key-2"))));
    const originals = answers.filter((a) => a.status === 202 && a.headers.get("idempotent-replayed") === null);
    expect(originals, answers.map((a) => a.text).join("\n")).toHaveLength(1);
    for (const answer of answers) {
      if (answer === originals[0]) continue;
      if (answer.status === 409) expectError(answer, 409, "idempotency_key_in_use");
      else expectReplayOf(answer, originals[0]!);
    }
    expect(await operationsOf(campaignId)).toBe(1);
    await settled(t, originals[0]!.body.data.id);
  });
});

describe("Idempotency-Key in the OpenAPI description", () => {
  it("documents the header on every write route and on no read route", async () => {
    const doc = await call("GET", "/openapi.json");
    expect(doc.status).toBe(200);
    type Operation = { parameters?: { name: string; in: string; required?: boolean; schema?: { minLength?: number; maxLength?: number } }[] };
    const paths = doc.body.paths as Record<string, Record<string, Operation>>;
    let writes = 0;
    for (const [path, operations] of Object.entries(paths)) {
      if (!path.startsWith("/workspaces")) continue;
      for (const [method, operation] of Object.entries(operations)) {
        const header = operation.parameters?.find((p) => p.in === "header" && p.name.toLowerCase() === "idempotency-key");
        // A preview is a read that takes a body: nothing to make idempotent.
        if ((method === "post" || method === "patch") && !path.endsWith("/preview")) {
          writes++;
          expect(header, `${method} ${path}`).toBeDefined();
          expect(header!.name).toBe("Idempotency-Key");
          expect(header!.required ?? false).toBe(false);
          expect(header!.schema).toMatchObject({ minLength: 8, maxLength: 255 });
        } else {
          expect(header, `${method} ${path}`).toBeUndefined();
        }
      }
    }
    expect(writes).toBeGreaterThanOrEqual(2);
  });
});
