import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { ApiError } from "../errors/api-error";
import {
  type Claim,
  claimIdempotencyKey,
  completeIdempotencyKey,
  findIdempotencyKey,
  type IdempotencyKeyRow,
  releaseIdempotencyKey,
} from "../idempotency/idempotency.repository";
import { sha256Hex } from "../lib/crypto";
import type { AppEnv } from "../lib/types";

const KEY_MIN = 8;
const KEY_MAX = 255;

export const IdempotencyHeaders = z.object({
  "Idempotency-Key": z
    .string()
    .min(KEY_MIN)
    .max(KEY_MAX)
    .optional()
    .openapi({
      param: { name: "Idempotency-Key", in: "header" },
      description:
        "Makes the request safe to retry: within 24 hours, a retry with the same key, method, path and body gets the original response back, byte for byte, with `Idempotent-Replayed: true`. The same key with another method, path or body is a 422 `idempotency_key_reused`; while the first request is still running, a 409 `idempotency_key_in_use`. Keys are scoped to the credential. Validation failures and 5xx responses are not kept, so a retry runs again.",
      example: "3f1c2a9e-5b7d-4e61-9a0b-2c8d4f6e1a3b",
    }),
});

/** How long a response is replayed (KV expirationTtl, and the D1 row's retention). */
const IDEMPOTENCY_TTL_SECONDS = 86_400;
/** A claim whose holder has not finished by then is considered dead and may be taken over. */
const IDEMPOTENCY_LEASE_MS = 30_000;
const RETENTION_MS = IDEMPOTENCY_TTL_SECONDS * 1000;

/** A response as kept for replay: status, the headers the handler set, and the body text. */
type StoredResponse = { status: number; headers: Record<string, string>; body: string };
/** The KV value also carries the fingerprint, so a mismatch is told apart without D1. */
type KvEntry = StoredResponse & { fingerprint: string };

// Set per request by the layers around the handler; a replay gets its own.
const NOT_STORED_HEADERS = new Set(["request-id", "content-length", "date", "set-cookie"]);

export const idempotency = createMiddleware<AppEnv>(async (c, next) => {
  const key = c.req.header("idempotency-key");
  // A key out of bounds claims nothing: the route's header validator (IdempotencyHeaders) rejects
  // it as any other invalid parameter, with its details.
  if (key === undefined || key.length < KEY_MIN || key.length > KEY_MAX) return next();

  const { credentialId } = c.var.principal;
  const fingerprint = await fingerprintOf(c);
  // KV keys are limited to 512 bytes; a 255-character header value may not fit next to the scope.
  const kvKey = `idempotency:${credentialId}:${await sha256Hex(key)}`;

  const cached = await c.env.IDEMPOTENCY_KV.get<KvEntry>(kvKey, "json");
  if (cached) {
    if (cached.fingerprint !== fingerprint) throw reused();
    return replay(cached);
  }

  const claim = await acquire(c, { credentialId, key, fingerprint });
  if ("replay" in claim) return replay(claim.replay);

  await next();

  // Errors thrown downstream have already been rendered into c.res by onError at this point.
  const res = c.res;
  const body = await res.clone().text();
  try {
    if (!isRemembered(res.status, body)) {
      await releaseIdempotencyKey(c.var.db, claim);
      return;
    }
    const stored: StoredResponse = { status: res.status, headers: storedHeaders(res.headers), body };
    // D1 first: a holder that outlived its lease must not overwrite what the new holder stored.
    if (!(await completeIdempotencyKey(c.var.db, claim, JSON.stringify(stored), Date.now(), RETENTION_MS))) return;
    await c.env.IDEMPOTENCY_KV.put(kvKey, JSON.stringify({ ...stored, fingerprint } satisfies KvEntry), {
      expirationTtl: IDEMPOTENCY_TTL_SECONDS,
    });
  } catch (err) {
    // The work is done and its answer stands. If only KV failed, the claim row still replays it; if
    // D1 failed, the claim stays held until its lease ends, and retries meanwhile get 409.
    console.error(
      JSON.stringify({
        level: "error",
        request_id: c.var.requestId,
        message: "could not record the idempotent response",
        error: err instanceof Error ? { name: err.name, message: err.message } : String(err),
      }),
    );
  }
});

/** Method, path without `/v1` (so both spellings of a route are one request) and the body's SHA-256. */
const fingerprintOf = async (c: Context<AppEnv>) => {
  // Hono caches the bytes: jsonBody has already read them, and the validators read them again.
  const bodyHash = await sha256Hex(await c.req.arrayBuffer());
  return sha256Hex(`${c.req.method}\n${c.req.path}\n${bodyHash}`);
};

/**
 * The claim, or the response to replay. A row may vanish (released) or fall free (lease over)
 * between the failed claim and the read, hence the second attempt.
 */
const acquire = async (
  c: Context<AppEnv>,
  request: { credentialId: string; key: string; fingerprint: string },
): Promise<Claim | { replay: StoredResponse }> => {
  for (let attempt = 0; attempt < 2; attempt++) {
    const now = Date.now();
    const claimed = await claimIdempotencyKey(c.var.db, {
      ...request,
      now,
      leaseMs: IDEMPOTENCY_LEASE_MS,
      retentionMs: RETENTION_MS,
    });
    if (claimed) return claimed;
    const held = await findIdempotencyKey(c.var.db, request.credentialId, request.key);
    if (!held || isFree(held, Date.now())) continue;
    if (held.fingerprint !== request.fingerprint) throw reused();
    if (held.state === "completed" && held.response !== null) {
      return { replay: JSON.parse(held.response) as StoredResponse };
    }
    break;
  }
  throw new ApiError(
    "idempotency_key_in_use",
    "A request with this Idempotency-Key is still being processed; retry after it completes",
    { param: "Idempotency-Key" },
  );
};

const isFree = (row: IdempotencyKeyRow, now: number) =>
  row.expiresAt <= now || (row.state === "processing" && row.lockedUntil <= now);

const reused = () =>
  new ApiError(
    "idempotency_key_reused",
    "This Idempotency-Key was already used with another method, path or body; use a new key for a new request",
    { param: "Idempotency-Key" },
  );

/**
 * The handler's own outcomes are kept, errors included. Validation failures are not (the request
 * never started) and neither are 5xx (every write is one atomic batch, so it left nothing behind):
 * a retry with the same key runs again.
 */
const isRemembered = (status: number, body: string) => {
  if (status >= 500) return false;
  if (status !== 400) return true;
  try {
    return (JSON.parse(body) as { error?: { code?: string } }).error?.code !== "validation_failed";
  } catch {
    return true;
  }
};

const storedHeaders = (headers: Headers) => {
  const kept: Record<string, string> = {};
  for (const [name, value] of headers) if (!NOT_STORED_HEADERS.has(name)) kept[name] = value;
  return kept;
};

const replay = (stored: StoredResponse) =>
  new Response(stored.body, {
    status: stored.status,
    headers: { ...stored.headers, "Idempotent-Replayed": "true" },
  });
