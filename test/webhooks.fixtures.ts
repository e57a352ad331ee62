import { env } from "cloudflare:workers";
import { expect, vi } from "vitest";
import { handleWebhookBatch } from "../src/webhooks/consumer";
import { newId } from "../src/lib/ids";
import { WEBHOOK_QUEUE } from "../src/webhooks/messages";
import { CapturedQueue, type Tenant } from "./send.fixtures";

export const RECEIVER = "https://hooks.example.test/newsletter";

export type Received = { url: string; headers: Record<string, string>; body: string };

/**
 * A receiver behind `fetch` (the worker's only way out): requests to `RECEIVER…` are recorded and
 * answered by `answer` (default 204), redirects followed as fetch follows them unless the request asks
 * for `redirect: "manual"`; anything else goes to the real fetch.
 */
export const receiver = (answer: (req: Received, signal?: AbortSignal) => Response | Promise<Response> = () => new Response(null, { status: 204 })) => {
  const received: Received[] = [];
  const original = globalThis.fetch;
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(RECEIVER)) return original(input, init);
    const req = { url, headers: { ...(init?.headers as Record<string, string>) }, body: String(init?.body) };
    received.push(req);
    const res = await answer(req, init?.signal ?? undefined);
    // As fetch does: a redirect is followed unless the request says otherwise.
    const location = res.headers.get("location");
    if (res.status >= 300 && res.status < 400 && location && (init?.redirect ?? "follow") === "follow") return globalThis.fetch(location, init);
    return res;
  });
  return { received, spy };
};

export const createEndpoint = async (t: Tenant, body: Record<string, unknown> = {}) => {
  const res = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url: RECEIVER, events: ["*"], ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { id: string; secret: string; url: string; events: string[] };
};

/** An event row written straight to D1, as if a change had just committed (nothing dispatched). */
export const seedEvent = async (workspaceId: string, options: { id?: string; createdAt?: number; type?: string } = {}) => {
  const createdAt = options.createdAt ?? Date.now();
  // Made as the service makes them (a ULID of the write's time): the sweeper purges by id range, so an
  // id of another shape could sort below the retention floor and vanish.
  const id = options.id ?? newId("event", createdAt);
  // Any resource the serializers know will do: a snapshot of an endpoint row, as json_object() writes it.
  await env.DB.prepare(
    `INSERT INTO events (id, workspace_id, type, resource, resource_id, snapshot, created_at, dispatched_at)
     VALUES (?1, ?2, ?3, 'webhook_endpoint', ?4, ?5, ?6, NULL)`,
  )
    .bind(id, workspaceId, options.type ?? "subscriber.created", "we_seed", endpointSnapshot(createdAt), createdAt)
    .run();
  return id;
};

const endpointSnapshot = (at: number) =>
  JSON.stringify({
    id: "we_seed",
    workspace_id: "ws_seed",
    url: RECEIVER,
    events: '["*"]',
    description: null,
    enabled: 1,
    secret: "",
    created_at: at,
    updated_at: at,
    deleted_at: null,
  });

type FakeMessage = { id: string; body: unknown; attempts: number; ack: ReturnType<typeof vi.fn>; retry: ReturnType<typeof vi.fn> };

/** Runs the webhook consumer over `bodies` as one batch, with `queue` standing for the webhook queue. */
export const consume = async (queue: CapturedQueue, bodies: unknown[], overrides: Partial<Env> = {}, from: string = WEBHOOK_QUEUE) => {
  const messages: FakeMessage[] = bodies.map((body, i) => ({
    id: `msg-${i}`,
    timestamp: new Date(),
    body,
    attempts: 1,
    ack: vi.fn(),
    retry: vi.fn(),
  }));
  const batch = { queue: from, messages, ackAll: vi.fn(), retryAll: vi.fn() } as unknown as MessageBatch<unknown>;
  await handleWebhookBatch(batch, { ...env, ...overrides, WEBHOOK_QUEUE: queue.asBinding() });
  return messages;
};

export const attemptRow = (id: string) =>
  env.DB.prepare("SELECT status, attempts, last_status_code, last_error, next_attempt_at FROM webhook_attempts WHERE id = ?")
    .bind(id)
    .first<{ status: string; attempts: number; last_status_code: number | null; last_error: string | null; next_attempt_at: number | null }>();

export { CapturedQueue };

type EventRow = { id: string; type: string; resource_id: string };

/** The workspace's events as stored (the outbox), oldest first. */
export const storedEvents = async (workspaceId: string) =>
  (await env.DB.prepare("SELECT id, type, resource_id FROM events WHERE workspace_id = ? ORDER BY id").bind(workspaceId).all<EventRow>())
    .results;

/** POST /subscribers: Ada, unless `body` says otherwise. */
export const createSubscriber = async (t: Tenant, body: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
  t.call("POST", `${t.ws}/subscribers`, { body: { email: "ada@example.com", name: "Ada", ...body }, headers });
