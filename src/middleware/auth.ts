import { createMiddleware } from "hono/factory";
import { credentialCacheFor } from "../credentials/credential-cache";
import { findCredentialByHash } from "../credentials/credentials.repository";
import { hashToken, tokenMode } from "../credentials/tokens";
import { ApiError, notFound } from "../errors/api-error";
import { prefixPattern } from "../lib/ids";
import type { AppEnv, Scope } from "../lib/types";

const challenge = { "WWW-Authenticate": 'Bearer realm="newsletter"' };
const invalid = (message = "The bearer token is malformed, unknown or revoked") =>
  new ApiError("invalid_credential", message, {
    headers: { "WWW-Authenticate": 'Bearer realm="newsletter", error="invalid_token"' },
  });

/** Resolves `Authorization: Bearer svc_…` to the calling principal, or answers 401. */
export const authenticate = createMiddleware<AppEnv>(async (c, next) => {
  const header = c.req.header("authorization");
  if (!header) {
    throw new ApiError("missing_credential", "Send a credential as Authorization: Bearer <token>", { headers: challenge });
  }
  const match = /^Bearer +(\S+)\s*$/i.exec(header);
  if (!match) throw invalid("The Authorization header must be Bearer <token>, with the svc_test_… or svc_live_… token after the word Bearer");
  const token = match[1];
  const mode = token ? tokenMode(token) : undefined;
  if (!token || !mode) throw invalid();

  const tokenHash = await hashToken(token);
  const cache = credentialCacheFor(c.req.url);
  let credential = await cache.get(tokenHash);
  if (!credential) {
    credential = await findCredentialByHash(c.var.db, tokenHash);
    if (credential && credential.revokedAt === null) c.executionCtx.waitUntil(cache.remember(credential));
  }
  if (!credential || credential.revokedAt !== null || credential.mode !== mode) throw invalid();

  c.set("principal", {
    credentialId: credential.id,
    mode: credential.mode,
    scopes: credential.scopes as Scope[],
    workspaceIds: credential.workspaceIds,
  });
  await next();
});

/**
 * Seconds until the rate limiter's current window ends. Its windows are fixed and aligned to the
 * clock (a 60 s period rolls over at every whole minute), so that is when a rejected client may
 * succeed again; never 0, so a client that honours it does not retry within the same window.
 */
export const secondsLeftInWindow = (periodSeconds: number, nowMs: number) => {
  const periodMs = periodSeconds * 1000;
  return Math.max(1, Math.ceil((periodMs - (nowMs % periodMs)) / 1000));
};

/** Per-credential limit through the Workers rate-limiting binding. */
export const rateLimit = createMiddleware<AppEnv>(async (c, next) => {
  const { success } = await c.env.RATE_LIMITER.limit({ key: c.var.principal.credentialId });
  if (!success) {
    const period = Number(c.env.RATE_LIMIT_PERIOD) || 60;
    const wait = secondsLeftInWindow(period, Date.now());
    throw new ApiError("rate_limited", `Too many requests for this credential; retry after ${wait} seconds`, {
      headers: { "Retry-After": String(wait) },
    });
  }
  await next();
});

export const requireScope = (scope: Scope) =>
  createMiddleware<AppEnv>(async (c, next) => {
    if (!c.var.principal.scopes.includes(scope)) {
      throw new ApiError("insufficient_scope", `This credential lacks the ${scope} scope required by this route`);
    }
    await next();
  });

const WORKSPACE_ID = prefixPattern("workspace");

/**
 * A workspace the credential may not access answers exactly like one that does not exist.
 * An id without the prefix is left to the route's validator (400 validation_failed).
 */
export const workspaceAccess = createMiddleware<AppEnv>(async (c, next) => {
  const workspaceId = c.req.param("workspace_id");
  if (workspaceId && WORKSPACE_ID.test(workspaceId) && !c.var.principal.workspaceIds.includes(workspaceId)) {
    throw notFound("workspace", workspaceId);
  }
  await next();
});
