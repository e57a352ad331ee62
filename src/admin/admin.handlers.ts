import { createMiddleware } from "hono/factory";
import { commit } from "../db/commit";
import { tombstoneCredential } from "../credentials/credential-cache";
import { findCredential, insertCredential, listCredentialsPage, revokeCredential } from "../credentials/credentials.repository";
import { hashToken, issueToken } from "../credentials/tokens";
import { ApiError, noRoute, notFound, resourceMissing } from "../errors/api-error";
import { createRouter } from "../lib/create-app";
import { sha256Hex } from "../lib/crypto";
import { envelope, listPage } from "../lib/http";
import { newId } from "../lib/ids";
import { type AppEnv, scopes as allScopes } from "../lib/types";
import { existingWorkspaceIds, findWorkspace, insertWorkspace, listWorkspacesPage } from "../workspaces/workspaces.repository";
import { serializeWorkspace } from "../workspaces/workspaces.schemas";
import {
  createCredentialRoute,
  createWorkspaceRoute,
  getCredentialRoute,
  getWorkspaceRoute,
  listCredentialsRoute,
  listWorkspacesRoute,
  revokeCredentialRoute,
} from "./admin.routes";
import { serializeCredential, serializeCredentialWithToken } from "./admin.schemas";

/** Constant-time comparison through digests, so the token's length and prefix do not leak. */
const sameSecret = async (given: string, expected: string) => (await sha256Hex(given)) === (await sha256Hex(expected));

export const operatorAuth = createMiddleware<AppEnv>(async (c, next) => {
  const adminToken = c.env.ADMIN_TOKEN;
  if (!adminToken) throw noRoute(c.req.method, new URL(c.req.url).pathname);
  const header = c.req.header("authorization");
  const challenge = { "WWW-Authenticate": 'Bearer realm="newsletter-operator"' };
  if (!header) throw new ApiError("missing_credential", "Send the operator token as Authorization: Bearer <token>", { headers: challenge });
  const token = /^Bearer +(\S+)\s*$/i.exec(header)?.[1];
  if (!token || !(await sameSecret(token, adminToken))) {
    const message = token ? "The operator token is wrong" : "The Authorization header must be Bearer <token>, with the operator token (ADMIN_TOKEN) after the word Bearer";
    throw new ApiError("invalid_credential", message, {
      headers: { "WWW-Authenticate": 'Bearer realm="newsletter-operator", error="invalid_token"' },
    });
  }
  await next();
});

export const adminRouter = createRouter()
  .openapi(createWorkspaceRoute, async (c) => {
    const { name } = c.req.valid("json");
    const now = Date.now();
    const row = { id: newId("workspace", now), name, createdAt: now };
    const answer = envelope(serializeWorkspace(row));
    await commit(c, [insertWorkspace(c.var.db, row)], { status: 201, body: answer, always: true });
    return c.json(answer, 201);
  })
  .openapi(createCredentialRoute, async (c) => {
    const body = c.req.valid("json");
    const workspaceIds = [...new Set(body.workspace_ids)];
    const found = await existingWorkspaceIds(c.var.db, workspaceIds);
    const missing = workspaceIds.findIndex((id) => !found.has(id));
    if (missing >= 0) {
      const id = workspaceIds[missing] as string;
      throw resourceMissing(`workspace_ids[${body.workspace_ids.indexOf(id)}]`, "workspace", id, "on this service");
    }
    const now = Date.now();
    const token = issueToken(body.mode);
    const credential = {
      id: newId("credential", now),
      name: body.name ?? null,
      mode: body.mode,
      tokenHash: await hashToken(token),
      scopes: [...new Set(body.scopes ?? allScopes)],
      workspaceIds,
      createdAt: now,
    };
    const answer = envelope(serializeCredentialWithToken({ ...credential, revokedAt: null }, token));
    // The token is in this answer only; a key's record of it is sealed (operatorIdempotency).
    await commit(c, insertCredential(c.var.db, credential), { status: 201, body: answer, always: true });
    return c.json(answer, 201);
  })
  .openapi(listWorkspacesRoute, async (c) => {
    const { limit, after } = c.req.valid("query");
    const page = await listPage(c, { list: "workspaces", after, limit }, (position, take) => listWorkspacesPage(c.var.db, position, take), serializeWorkspace);
    return c.json(page, 200);
  })
  .openapi(getWorkspaceRoute, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const row = await findWorkspace(c.var.db, workspace_id);
    if (!row) throw notFound("workspace", workspace_id);
    return c.json(envelope(serializeWorkspace(row)), 200);
  })
  .openapi(listCredentialsRoute, async (c) => {
    const { limit, after, workspace_id } = c.req.valid("query");
    const request = { list: "credentials", filters: { workspace_id }, after, limit };
    const page = await listPage(c, request, (position, take) => listCredentialsPage(c.var.db, workspace_id, position, take), serializeCredential);
    return c.json(page, 200);
  })
  .openapi(getCredentialRoute, async (c) => {
    const { credential_id } = c.req.valid("param");
    const row = await findCredential(c.var.db, credential_id);
    if (!row) throw notFound("credential", credential_id);
    return c.json(envelope(serializeCredential(row)), 200);
  })
  .openapi(revokeCredentialRoute, async (c) => {
    const { credential_id } = c.req.valid("param");
    const row = await revokeCredential(c.var.db, credential_id, Date.now());
    if (!row) throw notFound("credential", credential_id);
    await tombstoneCredential(row, (later) => c.executionCtx.waitUntil(later));
    return c.json(envelope(serializeCredential(row)), 200);
  });
