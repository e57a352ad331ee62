import { log } from "../lib/log";
import type { Context, HonoRequest } from "hono";
import { createMiddleware } from "hono/factory";
import { createDb, type Db } from "../db/client";
import { ApiError } from "../errors/api-error";
import { ConfigurationError, missingBindings } from "../errors/configuration";
import { renderError } from "../errors/render";
import { cursorCodec } from "../lib/cursor";
import { decodedComponent } from "../lib/http";
import { newId } from "../lib/ids";
import { countedD1, countedKv, countRoundTrips, newRoundTrips, serverTiming } from "../lib/round-trips";
import { signerFor } from "../lib/signing";
import type { AppEnv } from "../lib/types";

/**
 * First middleware: gives the request its id (echoed as `Request-Id`), its per-request services and
 * its round-trip count (`Server-Timing`), and writes the one structured log line when the response
 * is ready. A deployment missing a binding answers 503 configuration_error naming it (except /health,
 * which reports it).
 */
export const requestContext = createMiddleware<AppEnv>(async (c, next) => {
  const started = Date.now();
  const requestId = newId("request", started);
  c.set("requestId", requestId);
  const trips = newRoundTrips();
  await countRoundTrips(trips, async () => {
    const missing = missingBindings(c.env);
    if (missing.length > 0 && c.req.path !== "/health") {
      // Answered here, so that the request still gets its log line below.
      c.res = renderError(c, ConfigurationError.bindings(missing));
      return;
    }
    if (!missing.includes("DB")) {
      const d1 = countedD1(c.env.DB);
      c.set("db", dbFor(d1));
      c.set("signer", signerFor({ DB: d1, CURSOR_SECRET: c.env.CURSOR_SECRET, CURSOR_SECRET_PREVIOUS: c.env.CURSOR_SECRET_PREVIOUS }));
      c.set("cursors", cursorCodec(c.var.signer));
    }
    if (!missing.includes("IDEMPOTENCY_KV")) c.set("kv", countedKv(c.env.IDEMPOTENCY_KV));
    await next();
  });
  c.header("Request-Id", requestId);
  c.header("Server-Timing", serverTiming(trips));
  const status = c.res.status;
  const level = c.get("warning") ? "warn" : status >= 500 ? "error" : "info";
  const line = {
    request_id: requestId,
    method: c.req.method,
    route: c.get("route") ?? linkRoute(c.req.method, c.req.path) ?? null,
    // A link's token (unsubscribe, confirmation) is the only authority over its subscriber's consent: never logged.
    path: loggedPath(c.req.path),
    status,
    duration_ms: Date.now() - started,
    db_calls: trips.db.calls,
    kv_calls: trips.kv.calls,
    credential_id: c.get("principal")?.credentialId ?? null,
    ...(c.get("warning") && { warning: c.get("warning") }),
  };
  log(level, "request", line);
});

/** A run of URL-safe characters long enough to be a link's token (66; the ids the service makes are at most 31). */
const TOKEN_RUN = /[A-Za-z0-9_-]{40,}/g;

/**
 * The path as the log shows it: a link's token never, in whatever shape the link arrives (`u` or `c`
 * as the path's first segment but `v1`, in any letter case, with slashes doubled or escaped: the
 * segment after it, and every one after that but a final `resubscribe`), nor any token-shaped run
 * anywhere (a link pasted under another path).
 */
export const loggedPath = (path: string): string => {
  const segments = path.split("/").flatMap((segment) => (decodedComponent(segment) ?? segment).split("/"));
  // The first segment that says something, past a leading `v1`.
  const named = segments.flatMap((s, i) => (s === "" ? [] : [i]));
  const first = (segments[named[0] ?? -1]?.toLowerCase() === "v1" ? named[1] : named[0]) ?? -1;
  if (first >= 0 && first < segments.length - 1 && /^[uc]$/i.test(segments[first] ?? "")) {
    const tail = segments.length - first > 2 && /^resubscribe$/i.test(segments.at(-1) ?? "") ? "/resubscribe" : "";
    return `${segments.slice(0, first + 1).join("/")}/{token}${tail}`;
  }
  const masked = segments.map((s) => s.replace(TOKEN_RUN, "{token}"));
  return masked.some((s, i) => s !== segments[i]) ? masked.join("/") : path;
};

/** The link routes' names for the log (they are not apiRoutes): only for the methods they answer. */
const linkRoute = (method: string, path: string): string | undefined => {
  const m = /^(?:\/v1)?\/(?:(u)\/[^/]+(\/resubscribe)?|(c)\/[^/]+)\/?$/.exec(path);
  if (!m || (method !== "GET" && method !== "POST") || (m[2] && method !== "POST")) return undefined;
  return m[3] ? `${method} /c/{token}` : `${method} /u/{token}${m[2] ?? ""}`;
};

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

/** The default cap on a request body; a route may set its own (`apiRoute`'s `maxBodyBytes`). */
export const MAX_BODY_BYTES = 64 * 1024;
/** `application/json`, with parameters (charset) allowed; not other `+json` types. */
const JSON_TYPE = /^application\/json\s*(?:;.*)?$/i;

/**
 * Reads and checks a request body once, before the route's validators: size (413), media type (415)
 * and JSON syntax (400 invalid_json). The decoded text goes into Hono's body cache, which its JSON
 * validator reads (an empty body reads as `{}`, whatever its content type says); the raw bytes stay
 * cached for idempotency fingerprints.
 */
export const readJsonBody = (maxBytes = MAX_BODY_BYTES) =>
  createMiddleware<AppEnv>(async (c, next) => {
    if (c.req.method === "GET" || c.req.method === "HEAD" || c.req.method === "OPTIONS") return next();
    const bytes = await readCapped(c, maxBytes);
    cacheBytes(c.req, bytes);
    if (bytes.byteLength === 0) {
      cacheText(c.req, "{}");
      // No body has no media type to refuse (`fetch(url, { body: "" })` labels it text/plain): the
      // route's validator sees it as an empty JSON body.
      const type = c.req.header("content-type");
      if (type !== undefined && !JSON_TYPE.test(type)) {
        const headers = new Headers(c.req.raw.headers);
        headers.set("content-type", "application/json");
        c.req.raw = new Request(c.req.raw.url, { method: c.req.method, headers });
      }
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
    } catch {
      // JSON between systems is UTF-8 (RFC 8259), whatever a charset parameter says.
      throw new ApiError("invalid_json", "Request body is not valid UTF-8: send JSON encoded as UTF-8");
    }
    try {
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

export const jsonBody = readJsonBody();

/**
 * The body, read as a stream with the cap enforced while reading: a chunked upload without
 * Content-Length is refused after at most `maxBytes` plus one chunk, never buffered whole. A body
 * that ends early (the client went away) is the client's problem: a 400, logged as a warning.
 */
export const readCapped = async (c: Context<AppEnv>, maxBytes: number): Promise<Uint8Array> => {
  const tooLarge = () => new ApiError("payload_too_large", `Request body must be at most ${maxBytes} bytes`);
  if (Number(c.req.header("content-length") ?? 0) > maxBytes) throw tooLarge();
  const body = c.req.raw.body;
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        reader.cancel().catch(() => {});
        throw tooLarge();
      }
      chunks.push(value);
    }
  } catch (err) {
    if (err instanceof ApiError) throw err;
    c.set("warning", `request body could not be read: ${err instanceof Error ? err.message : String(err)}`);
    throw new ApiError("invalid_json", "The request body ended before it was complete");
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
};

// Hono keeps promises in its body cache (its type says values): `json()` chains on the cached text,
// `arrayBuffer()` (the idempotency fingerprint) on the cached bytes.
const cacheText = (req: HonoRequest, text: string) => {
  (req.bodyCache as { text?: Promise<string> }).text = Promise.resolve(text);
};
const cacheBytes = (req: HonoRequest, bytes: Uint8Array) => {
  (req.bodyCache as { arrayBuffer?: Promise<ArrayBuffer> }).arrayBuffer = Promise.resolve(
    bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer,
  );
};
