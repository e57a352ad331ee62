import { logError } from "../lib/log";
import { z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { createMiddleware } from "hono/factory";
import { answeredBefore, keyReused, ReplayInstead } from "../db/commit";
import { ApiError } from "../errors/api-error";
import { IDEMPOTENCY_TTL_SECONDS, type IdempotentRequest, recordUnlessTaken } from "../idempotency/idempotency";
import { type Sealer, sealerFrom } from "../idempotency/sealed";
import { opened, renderedOf, replayResponse, type SealedResponse, storable, type StoredResponse } from "../idempotency/stored-response";
import { sha256Hex } from "../lib/crypto";
import { countRoundTrips, newRoundTrips } from "../lib/round-trips";
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
        "Makes the request safe to retry: within 24 hours, a retry with the same key, method, path and body gets the original response back, byte for byte, with `Idempotent-Replayed: true`. The key is recorded in the same atomic write as the change itself, so no failure can separate them. The same key with another method, path or body is a 422 `idempotency_key_reused`; while the first request is still running, a 409 `idempotency_key_in_use`. Keys are scoped to the credential. Validation failures and 5xx responses are not kept, so a retry runs again. Use a new key (a UUID, say) for every new request.",
    }),
});

/** The KV copy also carries the fingerprint, so a mismatch is told apart without D1. */
type KvEntry = (StoredResponse | SealedResponse) & { fingerprint: string };

/** Whose keys a request's are (the credential's id, or the operator's scope), and how its answers are stored. */
export type KeyScope = { id: string; sealer?: Sealer };

/** Keys whose first request is still running in this isolate (credential id + key). */
const inFlight = new Set<string>();

/**
 * Idempotency-Key, around the handler. KV is the fast replay path: a key it knows is answered without
 * D1. Otherwise the handler runs, and its write's batch (src/db/commit.ts) carries the key's record,
 * which D1 alone decides: the first batch to commit it wins, and every other request with the key is
 * answered from it. An answer that wrote nothing (an error) is recorded after the handler, unless the
 * key got a record meanwhile, which then answers instead. KV gets the final answer off the critical
 * path (`waitUntil`).
 */
const idempotencyIn = (scopeOf: (c: Context<AppEnv>) => Promise<KeyScope>) =>
  createMiddleware<AppEnv>(async (c, next) => {
    const key = c.req.header("idempotency-key");
    // A key out of bounds claims nothing: the route's header validator (IdempotencyHeaders) rejects
    // it as any other invalid parameter, with its details.
    if (key === undefined || key.length < KEY_MIN || key.length > KEY_MAX) return next();

    const { id: credentialId, sealer } = await scopeOf(c);
    const fingerprint = await fingerprintOf(c);
    // KV keys are limited to 512 bytes; a 255-character header value may not fit next to the scope.
    const kvKey = `idempotency:${credentialId}:${await sha256Hex(key)}`;

    const cached = await c.var.kv.get<KvEntry>(kvKey, "json");
    if (cached) {
      if (cached.fingerprint !== fingerprint) throw keyReused();
      return replayResponse(await opened(cached, sealer));
    }

    // Two requests with one key in this isolate at once: the second is told to wait, as the contract
    // says. Across isolates the record's primary key decides, and the loser replays the winner's answer.
    const flightKey = `${credentialId}\n${key}`;
    if (inFlight.has(flightKey)) {
      throw new ApiError(
        "idempotency_key_in_use",
        "A request with this Idempotency-Key is still being processed; retry after it completes",
        // A write takes well under a second; the retry then gets its answer replayed.
        { param: "Idempotency-Key", headers: { "Retry-After": "1" } },
      );
    }
    const request: IdempotentRequest = { credentialId, key, fingerprint, state: "pending", ...(sealer && { sealer }) };
    c.set("idempotency", request);
    inFlight.add(flightKey);
    try {
      await next();
    } finally {
      inFlight.delete(flightKey);
    }

    // Errors thrown downstream have already been rendered into c.res by onError at this point.
    if (request.state === "replayed" || request.state === "rejected") return;
    const rendered = await renderedOf(c.res);
    // Not kept (so a retry runs again), or, after a commit, kept in D1 already as the write's answer.
    if (!isRemembered(rendered.status, rendered.body)) return;
    const stored = await storable(rendered, sealer);
    if (request.state === "pending") {
      const earlier = await recordUnlessTaken(c.var.db, request, Date.now(), stored);
      if (earlier) {
        // The key was answered by a request that committed first: that answer is this request's too.
        const answer = await answeredBefore(request, earlier);
        if (!(answer instanceof ReplayInstead)) throw answer;
        c.res = answer.response;
        return;
      }
    }
    const entry: KvEntry = { ...stored, fingerprint };
    // After the response, off its critical path (and so outside its Server-Timing count).
    const copy = countRoundTrips(newRoundTrips(), () =>
      c.var.kv.put(kvKey, JSON.stringify(entry), { expirationTtl: IDEMPOTENCY_TTL_SECONDS }),
    );
    c.executionCtx.waitUntil(
      copy.catch((err: unknown) => {
        // D1 holds the record; a replay that misses KV finds it there.
        logError("idempotency_kv_copy_failed", { request_id: c.var.requestId }, err);
      }),
    );
  });

/** Idempotency-Key on the API's writes: keys are the credential's. */
export const idempotency = idempotencyIn(async (c) => ({ id: c.var.principal.credentialId }));

/** Method, path without `/v1` (so both spellings of a route are one request) and the body's SHA-256. */
const fingerprintOf = async (c: Context<AppEnv>) => {
  // Hono caches the bytes: jsonBody has already read them, and the validators read them again.
  const bodyHash = await sha256Hex(await c.req.arrayBuffer());
  return sha256Hex(`${c.req.method}\n${c.req.path}\n${bodyHash}`);
};

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

/**
 * The operator's Idempotency-Keys: a scope of their own, named for the operator token (a new token
 * starts afresh), and sealed under a key derived from it, since a credential's create answers with
 * its token: no copy of D1 or KV shows it.
 */
export const operatorIdempotency = idempotencyIn(async (c) => {
  const token = c.env.ADMIN_TOKEN as string;
  const id = `operator:${(await sha256Hex(token)).slice(0, 16)}`;
  return { id, sealer: await sealerFrom(token, id) };
});
