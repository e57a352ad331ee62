import { createMiddleware } from "hono/factory";
import { cachedCredential, rememberCredential } from "../credentials/credential-cache";
import { findCredentialByHash } from "../credentials/credentials.repository";
import { hashToken, tokenMode } from "../credentials/tokens";
import { ApiError, notFound } from "../errors/api-error";
import type { AppEnv, Scope } from "../lib/types";

const challenge = { "WWW-Authenticate": 'Bearer realm="newsletter"' };
const invalid = () =>
  new ApiError("invalid_credential", "The bearer token is malformed, unknown or revoked", {
    headers: { "WWW-Authenticate": 'Bearer realm="newsletter", error="invalid_token"' },
  });

/** Resolves `Authorization: Bearer svc_…` to the calling principal, or answers 401. */
export const authenticate = createMiddleware<AppEnv>(async (c, next) => {
  const header = c.req.header("authorization");
  if (!header) {
    throw new ApiError("missing_credential", "Send a credential as Authorization: Bearer <token>", { headers: challenge });
  }
  const match = /^Bearer +(\S+)\s*$/i.exec(header);
  const token = match?.[1];
  const mode = token ? tokenMode(token) : undefined;
  if (!token || !mode) throw invalid();

  const tokenHash = await hashToken(token);
  let credential = await cachedCredential(tokenHash);
  if (!credential) {
    credential = await findCredentialByHash(c.var.db, tokenHash);
    if (credential && credential.revokedAt === null) c.executionCtx.waitUntil(rememberCredential(credential));
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

/** Per-credential limit through the Workers rate-limiting binding. */
export const rateLimit = createMiddleware<AppEnv>(async (c, next) => {
  const { success } = await c.env.RATE_LIMITER.limit({ key: c.var.principal.credentialId });
  if (!success) {
    const period = c.env.RATE_LIMIT_PERIOD || "60";
    throw new ApiError("rate_limited", `Too many requests for this credential; retry after ${period} seconds`, {
      headers: { "Retry-After": period },
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

const WORKSPACE_ID = /^ws_[0-9A-Za-z]{1,64}$/;

/**
 * A workspace the credential may not access answers exactly like one that does not exist.
 * Malformed ids are left to the route's validator (400 validation_failed).
 */
export const workspaceAccess = createMiddleware<AppEnv>(async (c, next) => {
  const workspaceId = c.req.param("workspace_id");
  if (workspaceId && WORKSPACE_ID.test(workspaceId) && !c.var.principal.workspaceIds.includes(workspaceId)) {
    throw notFound("workspace", workspaceId);
  }
  await next();
});
