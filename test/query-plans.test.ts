import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { createDb } from "../src/db/client";
import { queuedChunk } from "../src/sending/deliveries.repository";
import { recipientWindow } from "../src/sending/fanout.repository";
import type { OperationState } from "../src/sending/send.repository";
import { subscriberBatchStatements } from "../src/subscribers/subscribers.batch";
import { listSubscribersPage } from "../src/subscribers/subscribers.repository";
import { seedSubscribers, tenant } from "./helpers";
import { createCampaign } from "./send.fixtures";
import { harness, send } from "./send.harness";

// The plans D1's own SQLite makes for the statements whose cost must not grow with the workspace.
// A JSON list read with json_each and joined to a large table lets the planner put the large table
// outside: each of its rows then scans the list, and the statement's cost grows with the workspace
// (it did, for the two below). What these assert is the lookup each item or row gets: by a key,
// never by the workspace alone.

/** The statement's query plan, one detail line per step. */
const planOf = async (sql: string, params: unknown[]) =>
  (await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`).bind(...params).all<{ detail: string }>()).results.map((r) => r.detail);

/** A D1 binding that records what is prepared and bound on it (the statements run as usual). */
const recording = () => {
  const statements: { sql: string; params: unknown[] }[] = [];
  const d1 = {
    prepare: (sql: string) => {
      const statement = env.DB.prepare(sql);
      const bind = statement.bind.bind(statement);
      statement.bind = (...params: unknown[]) => {
        statements.push({ sql, params });
        return bind(...params);
      };
      return statement;
    },
  } as unknown as D1Database;
  return { d1, statements };
};

describe("query plans that must not grow with the workspace", () => {
  it("a fan-out window checks a segment's tags by subscriber_tags' whole key, for tags_any and tags_all", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 50, (i) => ({ tags: [i % 2 === 0 ? "even" : "odd"] }));
    for (const segmentFilter of [{ tags_any: ["even", "vip"] }, { tags_all: ["even"] }, { tags_any: ["odd"], tags_all: ["odd"] }]) {
      const { d1, statements } = recording();
      const op: OperationState = {
        id: "op_plan",
        workspaceId: t.workspace.id,
        campaignId: "cmp_plan",
        status: "running",
        deliveryIntegration: "sandbox",
        fanoutCursor: null,
        fanoutDone: false,
        startAt: null,
        createdAt: Date.now(),
        segmentFilter,
      };
      const window = await recipientWindow(d1, op, null, 500);
      expect(window).toHaveLength(50);
      const [statement] = statements;
      const plan = await planOf(statement!.sql, statement!.params);
      const tagLookups = plan.filter((line) => /subscriber_tags/.test(line));
      expect(tagLookups.length, plan.join("\n")).toBeGreaterThan(0);
      for (const line of tagLookups) expect(line).toMatch(/\(workspace_id=\? AND tag=\? AND subscriber_id=\?\)/);
      expect(plan.some((line) => /^SCAN subscribers/.test(line)), plan.join("\n")).toBe(false);
    }
  });

  it("a batch import finds each item's owner by the workspace's unique address index", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 50);
    const items = Array.from({ length: 3 }, (_, i) => ({ email: `plan${i}@example.com`, status: "active" }));
    const batch = subscriberBatchStatements(createDb(env.DB), t.workspace.id, items, Date.now());
    const plans = await Promise.all(
      batch.statements.map((statement) => {
        const { sql, params } = (statement as unknown as { toSQL(): { sql: string; params: unknown[] } }).toSQL();
        return planOf(sql, params);
      }),
    );
    for (const plan of plans) {
      // Never every subscriber of the workspace: only by id or by (workspace, address).
      const subscriberLookups = plan.filter((line) => /\b(subscribers|owner)\b/.test(line));
      for (const line of subscriberLookups) expect(line, plan.join("\n")).not.toMatch(/\(workspace_id=\?\)|^SCAN (subscribers|owner)/);
    }
    // The answer (the third statement) looks each item's address up in the unique index.
    expect(plans[2]?.join("\n")).toMatch(/SEARCH owner USING INDEX subscribers_workspace_email_uq \(workspace_id=\? AND email_key=\?\)/);
  });

  it("a subscriber list filtered by email and tag finds the one address by its unique index, then the tag by its key", async () => {
    const t = await tenant();
    await seedSubscribers(t.workspace.id, 300, (i) => ({ tags: i % 2 === 0 ? ["even"] : [] }));
    const { d1, statements } = recording();
    const db = createDb(d1);
    const tagged = await listSubscribersPage(db, t.workspace.id, { tag: "even", email: "user4@example.com" }, undefined, 21);
    expect(tagged.map((s) => s.email)).toEqual(["user4@example.com"]);
    expect(await listSubscribersPage(db, t.workspace.id, { tag: "even", email: "user5@example.com" }, undefined, 21)).toEqual([]);
    expect((await listSubscribersPage(db, t.workspace.id, { tag: "even", email: "USER4@example.com", status: "active" }, undefined, 21)).length).toBe(1);
    const plan = await planOf(statements[0]!.sql, statements[0]!.params);
    expect(plan.join("\n")).toMatch(/SEARCH subscribers USING INDEX subscribers_workspace_email_uq \(workspace_id=\? AND email_key=\?\)/);
    for (const line of plan.filter((l) => /subscriber_tags/.test(l))) expect(line).toMatch(/\(workspace_id=\? AND tag=\? AND subscriber_id=\?\)/);
    // Through the API, with its cursor rules, the same.
    const res = await t.call("GET", `${t.ws}/subscribers?tag=even&email=user4%40example.com`);
    expect(res.body.data.map((s: { email: string }) => s.email)).toEqual(["user4@example.com"]);
  });

  it("a delivery step reads its own chunk between two bounds of the index, not every delivery after it", async () => {
    // A send's operation (its queue messages are only captured), then 5,000 queued deliveries in
    // chunks of 100 (chunk_end: each chunk's last subscriber), written as the fan-out writes them.
    const h = await harness("live");
    const campaign = await createCampaign(h.t);
    const op = await send(h.t, campaign.id, { integration_slug: "sandbox" });
    const many = `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 4999)`;
    await env.DB.batch([
      env.DB.prepare(
        `${many} INSERT INTO subscribers (id, workspace_id, email, email_key, status, tags, created_at, updated_at)
         SELECT printf('sub_plan%05d', i), ?1, printf('u%d@example.com', i), printf('u%d@example.com', i), 'active', '[]', 0, 0 FROM n`,
      ).bind(h.t.workspace.id),
      env.DB.prepare(
        `${many} INSERT INTO deliveries (id, workspace_id, campaign_id, operation_id, subscriber_id, email, status, attempts, chunk_end, created_at, updated_at, asked_seq)
         SELECT printf('dlv_plan%05d', i), ?1, ?2, ?3, printf('sub_plan%05d', i), printf('u%d@example.com', i), 'queued', 0,
                printf('sub_plan%05d', (i / 100) * 100 + 99), 0, 0, 0 FROM n`,
      ).bind(h.t.workspace.id, campaign.id, op.id),
    ]);
    const { d1, statements } = recording();
    const first = await queuedChunk(d1, campaign.id, null, null, 101);
    expect(first.rows).toHaveLength(100);
    expect(first.chunkEnd).toBe("sub_plan00099");
    expect(first.more).toBe(true);
    const [statement] = statements;
    const plan = await planOf(statement!.sql, statement!.params);
    // The chunk by its own index, whole; a range (the first row, the rows of chunks recorded before
    // chunk_end existed, whether more are queued) always between two bounds; never a campaign's every row.
    const reads = plan.filter((line) => /^SEARCH (d|m|deliveries) /.test(line));
    expect(reads.filter((line) => line.includes("deliveries_campaign_chunk_idx (campaign_id=? AND chunk_end=?)")), plan.join("\n")).toHaveLength(1);
    for (const line of reads.filter((l) => l.includes("deliveries_campaign_subscriber_uq"))) {
      expect(line, plan.join("\n")).toMatch(/\(campaign_id=\? AND subscriber_id>\? AND subscriber_id<\?\)/);
    }
    expect(plan.some((line) => /^SCAN (d|deliveries)\b/.test(line)), plan.join("\n")).toBe(false);
    // What D1 counts as read: the chunk, its subscribers and the rows after it up to the next chunk
    // (some 400), not the 4,900 after it.
    const run = await env.DB.prepare(statement!.sql).bind(...statement!.params).all();
    expect(run.meta.rows_read).toBeLessThan(600);
    // A step in the middle of the range reads as little.
    const middle = recording();
    const mid = await queuedChunk(middle.d1, campaign.id, "sub_plan02499", null, 101);
    expect(mid.rows.map((r) => r.subscriberId)).toEqual(Array.from({ length: 100 }, (_, i) => `sub_plan${String(2500 + i).padStart(5, "0")}`));
    const again = await env.DB.prepare(middle.statements[0]!.sql).bind(...middle.statements[0]!.params).all();
    expect(again.meta.rows_read).toBeLessThan(600);
  });
});
