import { createExecutionContext } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { expect, vi } from "vitest";
import { createApp } from "../src/app";
import { departureFromDocument } from "./openapi/conformance";

export const ADMIN_TOKEN = "test-admin-token-0123456789abcdef0123";
const BASE = "https://api.example.test";

export type ApiResponse<T = any> = { status: number; headers: Headers; body: T; text: string; url?: string };

export type CallOptions = {
  token?: string | null;
  body?: unknown;
  /** Raw body bytes/text, sent as is. */
  raw?: BodyInit;
  headers?: Record<string, string>;
  /** A deployment configured otherwise: these bindings and vars over the test environment's. */
  env?: Partial<Env>;
  /** The address the request is sent to (default https://api.example.test). */
  origin?: string;
};

let app: ReturnType<typeof createApp> | undefined;

/** One HTTP request through the worker's own fetch handler, as a client would send it. */
export const call = async <T = any>(method: string, path: string, options: CallOptions = {}): Promise<ApiResponse<T>> => {
  const headers = new Headers(options.headers);
  if (options.token) headers.set("authorization", `Bearer ${options.token}`);
  let body: BodyInit | undefined = options.raw;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    if (!headers.has("content-type")) headers.set("content-type", "application/json");
  }
  const request = new Request(`${options.origin ?? BASE}${path}`, { method, headers, body });
  const res = options.env
    ? await (app ??= createApp()).fetch(request, { ...env, ...options.env } as Env, createExecutionContext())
    : await exports.default.fetch(request);
  const text = await res.text();
  // Every answer of the suite is held to /openapi.json, as a client generated from it would read it.
  expect(await departureFromDocument(method, path, res.status, res.headers, text)).toBeUndefined();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed as T, text, url: `${method} ${path}` };
};

/** The D1 and KV calls a response reports in its Server-Timing header (README "Rate limits and logs"). */
export const tripsOf = (res: { headers: Headers }): { db: number; kv: number; header: string } => {
  const header = res.headers.get("server-timing") ?? "";
  const calls = (name: string) => {
    const match = new RegExp(`${name};dur=[0-9.]+;desc="(\\d+) calls?"`).exec(header);
    if (!match) throw new Error(`no ${name} entry in Server-Timing: ${header}`);
    return Number(match[1]);
  };
  return { db: calls("db"), kv: calls("kv"), header };
};

export const admin = (method: string, path: string, body?: unknown) => call(method, path, { token: ADMIN_TOKEN, body });

export const createWorkspace = async (name = "Acme") => {
  const res = await admin("POST", "/admin/workspaces", { name });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; name: string };
};

export const createCredential = async (
  workspaceIds: string[],
  options: { mode?: "test" | "live"; scopes?: string[] } = {},
) => {
  const res = await admin("POST", "/admin/credentials", {
    mode: options.mode ?? "test",
    workspace_ids: workspaceIds,
    ...(options.scopes && { scopes: options.scopes }),
  });
  expect(res.status).toBe(201);
  return res.body.data as { id: string; token: string };
};

/** A workspace and a credential with every scope on it; `overrides`: the deployment it runs on is configured otherwise. */
export const tenant = async (name = "Acme", mode: "test" | "live" = "test", overrides?: Partial<Env>) => {
  const workspace = await createWorkspace(name);
  const credential = await createCredential([workspace.id], { mode });
  const as = (method: string, path: string, options: Omit<CallOptions, "token" | "env"> = {}) =>
    call(method, path, { ...options, token: credential.token, ...(overrides && { env: overrides }) });
  return { workspace, credential, token: credential.token, ws: `/v1/workspaces/${workspace.id}`, call: as };
};

/** Fast seeding straight into D1 (ids in creation order), for tests about reading and paging. */
export const seedSubscribers = async (
  workspaceId: string,
  count: number,
  make: (i: number) => { email?: string; status?: string; tags?: string[] } = () => ({}),
) => {
  const ids: string[] = [];
  // Created one millisecond apart, the last just now: all before any send the test makes next.
  const base = Date.now() - count;
  const statements: D1PreparedStatement[] = [];
  const insert = env.DB.prepare(
    "insert into subscribers (id, workspace_id, email, email_key, name, status, tags, location, source, created_at, updated_at) values (?, ?, ?, ?, null, ?, ?, null, null, ?, ?)",
  );
  for (let i = 0; i < count; i++) {
    const spec = make(i);
    const id = `sub_${(base + i).toString(36).padStart(10, "0").toUpperCase()}${String(i).padStart(16, "0")}`;
    const email = spec.email ?? `user${i}@example.com`;
    ids.push(id);
    statements.push(
      insert.bind(id, workspaceId, email, email.toLowerCase(), spec.status ?? "active", JSON.stringify(spec.tags ?? []), base + i, base + i),
    );
  }
  for (let i = 0; i < statements.length; i += 500) await env.DB.batch(statements.slice(i, i + 500));
  return ids;
};

export const expectError = (res: ApiResponse, status: number, code: string, param?: string) => {
  expect(res.status, res.text).toBe(status);
  expect(res.body?.error?.code, res.text).toBe(code);
  expect(typeof res.body.error.message).toBe("string");
  expect(res.body.error.request_id).toMatch(/^req_/);
  expect(res.headers.get("request-id")).toBe(res.body.error.request_id);
  if (param !== undefined) expect(res.body.error.param).toBe(param);
};

/** Waits until `check` holds, looking every 25 ms; fails after `timeoutMs` with what it waited for. */
export const until = async (check: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = "the condition") => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
};

/**
 * The next D1 batch commits, then the request dies before anything else happens: from then on every
 * D1 call it makes fails, as nothing of a dead isolate runs.
 */
export const dieAfterNextCommit = () => {
  const batch = env.DB.batch.bind(env.DB);
  const dead = () => {
    throw new Error("the isolate is gone");
  };
  const spy = vi.spyOn(env.DB, "batch").mockImplementationOnce(async (statements) => {
    await batch(statements);
    vi.spyOn(env.DB, "prepare").mockImplementation(dead);
    vi.spyOn(env.DB, "batch").mockImplementation(dead);
    throw new Error("the isolate died right after the commit");
  });
  vi.spyOn(console, "error").mockImplementation(() => {});
  const kvPut = vi.spyOn(env.IDEMPOTENCY_KV, "put");
  return { spy, kvPut };
};
