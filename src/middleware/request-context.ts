import type { HonoRequest } from "hono";
import { createMiddleware } from "hono/factory";
import { createDb, type Db } from "../db/client";
import { ApiError } from "../errors/api-error";
import { cursorCodec } from "../lib/cursor";
import { newId } from "../lib/ids";
import type { AppEnv } from "../lib/types";

/**
 * First middleware: gives the request its id (echoed as `Request-Id`), its per-request services,
 * and writes the one structured log line when the response is ready.
 */
export const requestContext = createMiddleware<AppEnv>(async (c, next) => {
  const started = Date.now();
  const requestId = newId("request", started);
  c.set("requestId", requestId);
  c.set("db", dbFor(c.env.DB));
  c.set("cursors", lazyCursors(c.env.CURSOR_SECRET));
  await next();
  c.header("Request-Id", requestId);
  console.log(
    JSON.stringify({
      level: "info",
      request_id: requestId,
      method: c.req.method,
      route: c.get("route") ?? null,
      path: c.req.path,
      status: c.res.status,
      duration_ms: Date.now() - started,
      credential_id: c.get("principal")?.credentialId ?? null,
    }),
  );
});

// drizzle() walks the whole schema to build its relational config: a fifth of a simple read's CPU
// when done per request. The instance holds nothing per request, so one per binding object is kept.
const databases = new WeakMap<D1Database, Db>();
const dbFor = (d1: D1Database): Db => {
  let db = databases.get(d1);
  if (!db) {
    db = createDb(d1);
    databases.set(d1, db);
  }
  return db;
};

const lazyCursors = (secret: string | undefined): ReturnType<typeof cursorCodec> => {
  if (secret) return cursorCodec(secret);
  const unconfigured = () => Promise.reject(new Error("CURSOR_SECRET is not configured"));
  return { encode: unconfigured, decode: unconfigured };
};

const MAX_BODY_BYTES = 64 * 1024;
/** `application/json`, with parameters (charset) allowed; not other `+json` types. */
const JSON_TYPE = /^application\/json\s*(?:;.*)?$/i;

/**
 * Reads and checks a request body once, before the route's validators: size (413), media type (415)
 * and JSON syntax (400 invalid_json). The decoded text goes into Hono's body cache, which its JSON validator
 * reads (an empty body reads as `{}`, so a body-less POST sent with a JSON content type is fine); the
 * raw bytes stay cached for idempotency fingerprints.
 */
export const jsonBody = createMiddleware<AppEnv>(async (c, next) => {
  if (c.req.method === "GET" || c.req.method === "HEAD" || c.req.method === "OPTIONS") return next();
  const tooLarge = () => new ApiError("payload_too_large", `Request body must be at most ${MAX_BODY_BYTES} bytes`);
  if (Number(c.req.header("content-length") ?? 0) > MAX_BODY_BYTES) throw tooLarge();
  const bytes = await c.req.arrayBuffer();
  if (bytes.byteLength > MAX_BODY_BYTES) throw tooLarge();
  if (bytes.byteLength === 0) {
    cacheText(c.req, "{}");
    return next();
  }
  const contentType = c.req.header("content-type");
  if (!contentType || !JSON_TYPE.test(contentType)) {
    throw new ApiError("unsupported_media_type", "Request body must be JSON, sent with Content-Type: application/json");
  }
  let text: string;
  let parsed: unknown;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
    parsed = JSON.parse(text);
  } catch {
    throw new ApiError("invalid_json", "Request body is not valid JSON");
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new ApiError("invalid_json", "Request body must be a JSON object");
  }
  cacheText(c.req, text);
  return next();
});

// Hono keeps promises in its body cache (its type says values): `json()` chains on the cached text.
const cacheText = (req: HonoRequest, text: string) => {
  (req.bodyCache as { text?: Promise<string> }).text = Promise.resolve(text);
};
