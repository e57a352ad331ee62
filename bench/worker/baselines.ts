import { Hono } from "hono";
import { cursorCodec } from "../../src/lib/cursor";
import { newId } from "../../src/lib/ids";
import { signerFor } from "../../src/lib/signing";
import type { AppEnv } from "../../src/lib/types";
import { requestContext } from "../../src/middleware/request-context";
import { deliveryInsertStatements } from "../../src/sending/fanout.repository";
import { sandboxIntegration } from "../../src/sending/integrations/sandbox";
import { FANOUT_WINDOW } from "../../src/sending/fanout";
import { listScope } from "../../src/lib/http";
import { findSubscriberSql, insertSubscriberSql, listSubscribersSql } from "./statements";
import { composeEmail, composerFor } from "../../src/sending/compose";
import { BENCH_TEMPLATE } from "./bench.content";

// Baselines for bench/run.mjs, served only by the bench entry (bench/worker/index.ts), never by the
// deployed worker: `/bench/constant` is the framework's floor (routing and the request-context
// middleware, nothing else) and `/bench/raw/*` the storage floor (the repository's SQL straight on
// env.DB: no auth, validation, drizzle or serialisation).

export const baselines = new Hono<AppEnv>().basePath("/bench");

// The API's own first middleware (request id, `Request-Id`, the access-log line), so that each ratio
// isolates what the API route adds on top of it.
baselines.use("*", requestContext);

baselines.get("/constant", (c) => c.json({ status: "ok" }));

baselines.get("/raw/workspaces/:workspace_id/subscribers/:subscriber_id", async (c) => {
  const row = await c.env.DB.prepare(findSubscriberSql)
    .bind(c.req.param("workspace_id"), c.req.param("subscriber_id"))
    .first();
  return row ? c.json({ data: row }) : c.json({ error: "not found" }, 404);
});

baselines.get("/raw/workspaces/:workspace_id/subscribers", async (c) => {
  const limit = Number(c.req.query("limit") ?? 20);
  const { sql, params } = listSubscribersSql(
    c.req.param("workspace_id"),
    { status: c.req.query("status"), tag: c.req.query("tag"), after: c.req.query("after") },
    limit + 1,
  );
  const { results } = await c.env.DB.prepare(sql)
    .bind(...params)
    .all();
  return c.json({ data: results.slice(0, limit), has_more: results.length > limit });
});

baselines.post("/raw/workspaces/:workspace_id/subscribers", async (c) => {
  const body = await c.req.json<{ email: string; tags?: string[] }>();
  const now = Date.now();
  const email = body.email.trim();
  const row = await c.env.DB.prepare(insertSubscriberSql)
    .bind(
      newId("subscriber", now),
      c.req.param("workspace_id"),
      email,
      email.toLowerCase(),
      null,
      "active",
      JSON.stringify(body.tags ?? []),
      null,
      null,
      now,
      now,
    )
    .first();
  return row ? c.json({ data: row }, 201) : c.json({ error: "exists" }, 409);
});

/** A stored response read back from KV: the floor of an idempotent replay. */
baselines.get("/raw/kv/:key", async (c) => {
  const stored = await c.env.IDEMPOTENCY_KV.get(c.req.param("key"));
  return stored === null ? c.json({ error: "not found" }, 404) : c.body(stored, 200, { "content-type": "application/json" });
});

baselines.put("/raw/kv/:key", async (c) => {
  await c.env.IDEMPOTENCY_KV.put(c.req.param("key"), await c.req.text(), { expirationTtl: 86_400 });
  return c.json({ stored: true });
});

/**
 * The signed cursor of the list position `offset` rows deep, for the depth benchmark. OFFSET here
 * only locates the position once; the pages themselves are keyset reads.
 */
baselines.get("/cursor", async (c) => {
  const workspaceId = c.req.query("workspace_id") ?? "";
  const offset = Number(c.req.query("offset") ?? 0);
  const tag = c.req.query("tag");
  const status = c.req.query("status");
  const statusClause = status === undefined ? "" : " and s.status = ?";
  const sql =
    tag === undefined
      ? `select s.id from subscribers s where s.workspace_id = ?${statusClause} order by s.id desc limit 1 offset ?`
      : `select s.id from subscriber_tags t join subscribers s on s.id = t.subscriber_id where t.workspace_id = ? and t.tag = ?${statusClause} order by t.subscriber_id desc limit 1 offset ?`;
  const params = [workspaceId, ...(tag === undefined ? [] : [tag]), ...(status === undefined ? [] : [status]), offset];
  const row = await c.env.DB.prepare(sql)
    .bind(...params)
    .first<{ id: string }>();
  if (!row) return c.json({ error: "no such position" }, 404);
  // The list's scope as the API makes it: the workspace's subscribers with these filters.
  const cursor = await cursorCodec(signerFor(c.env)).encode(listScope(`subscribers:${workspaceId}`, { status, tag }), row.id);
  return c.json({ position: row.id, cursor });
});

// Renders `n` messages of the content benchmark's template, as one queue message does: compiled once,
// then one signed link and one render per recipient. The client times n against n = 0.
baselines.get("/content-template", (c) => c.json(BENCH_TEMPLATE));

baselines.post("/render", async (c) => {
  const n = Math.min(Number(c.req.query("n") ?? 0), 100_000);
  const composer = composerFor(
    { campaignId: "cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T", ...BENCH_TEMPLATE, newsletterName: "Bench Weekly", address: "1 Bench Street", fromName: "Bench", fromEmail: "bench@bench.example", replyTo: null },
    c.env,
    signerFor(c.env),
  );
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const email = await composeEmail(composer, { id: newId("subscriber"), email: `user${i}@example.com`, name: `User ${i}`, tags: ["a"], location: "Paris", source: null }, "dlv_bench");
    bytes += (email.html?.length ?? 0) + email.text.length;
  }
  return c.json({ n, bytes });
});

/**
 * The storage floor of a send's fan-out: every active subscriber of the workspace gets a delivery row
 * for `campaign_id`, read and written in windows of FANOUT_WINDOW with the pipeline's own statements
 * (the page read, then the batched INSERT … SELECT FROM json_each and the operation's counters), each
 * row created already sent, as a sandbox send creates it.
 */
baselines.post("/raw/fanout", async (c) => {
  const { workspace_id: workspaceId, campaign_id: campaignId } = await c.req.json<{ workspace_id: string; campaign_id: string }>();
  const started = Date.now();
  const operationId = newId("operation", started);
  // Running while its rows are written (deliveries are inserted only into a running operation), its
  // fan-out already marked done, so no message or sweep (none runs under the benchmark) would take it
  // up; it ends succeeded below.
  await c.env.DB.prepare(
    `INSERT INTO operations (id, workspace_id, campaign_id, type, status, integration_slug, delivery_integration, mode, fanout_done, created_at, updated_at)
     VALUES (?1, ?2, ?3, 'campaign_send', 'running', 'sandbox', 'sandbox', 'test', 1, ?4, ?4)`,
  )
    .bind(operationId, workspaceId, campaignId, started)
    .run();
  let after = "";
  let recipients = 0;
  let statements = 1;
  for (;;) {
    const { results } = await c.env.DB.prepare(
      `SELECT id, email FROM subscribers WHERE workspace_id = ?1 AND status = 'active' AND id > ?2 ORDER BY id LIMIT ?3`,
    )
      .bind(workspaceId, after, FANOUT_WINDOW)
      .all<{ id: string; email: string }>();
    statements++;
    if (results.length === 0) break;
    const now = Date.now();
    // The rows a sandbox send writes: created already sent, with the sandbox's message id.
    const rows = results.map((r) => ({ id: newId("delivery", now), subscriberId: r.id, email: r.email }));
    const settle = sandboxIntegration.settleAtCreation;
    await c.env.DB.batch(deliveryInsertStatements(c.env.DB, { rows, settle, workspaceId, campaignId, operationId, now }));
    statements += 2;
    recipients += results.length;
    after = results.at(-1)?.id ?? after;
    if (results.length < FANOUT_WINDOW) break;
  }
  await c.env.DB.prepare(`UPDATE operations SET status = 'succeeded', completed_at = ?2 WHERE id = ?1`).bind(operationId, Date.now()).run();
  statements++;
  return c.json({ operation_id: operationId, recipients, statements, ms: Date.now() - started });
});
