import { logError } from "../lib/log";
import type { Context } from "hono";
import { AGAIN, commit, writeExplained } from "../db/commit";
import { holdsAll } from "../db/differs";
import { webhookEndpoints } from "../db/schema";
import { ApiError, invalidParam, notFound } from "../errors/api-error";
import { createRouter } from "../lib/create-app";
import { envelope, listPage } from "../lib/http";
import { newId } from "../lib/ids";
import type { AppEnv } from "../lib/types";
import { serializeAttempt } from "./attempts.schemas";
import { deliverTry } from "./consumer";
import {
  countEndpoints,
  deleteEndpoint as deleteEndpointRow,
  type EndpointChanges,
  endpointInWorkspace,
  findEndpoint,
  insertEndpoint,
  listAttemptsPage,
  listEndpointsPage,
  newSecret,
  testEndpointStatements,
  rotateSecret as rotateSecretRow,
  updateEndpoint as updateEndpointRow,
} from "./endpoints.repository";
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listAttempts,
  listEndpoints,
  rotateSecret,
  testEndpoint,
  updateEndpoint,
} from "./endpoints.routes";
import {
  MAX_ENDPOINTS_PER_WORKSPACE,
  serializeDeletedEndpoint,
  serializeEndpoint,
  serializeEndpointWithSecret,
} from "./endpoints.schemas";
import { isDevelopmentDeployment, isLoopbackUrl, nonPublicUrlProblem } from "./url-rules";

/**
 * The rule that depends on who asks and where. On a deployed service, endpoints point at public
 * hosts (the events of every mode of the workspace go to them). On a local development deployment,
 * a test credential may point them anywhere, and a live credential at this machine (the contract's
 * `http://localhost` and `http://127.0.0.1` for development) but not at a private network.
 */
const checkPublicUrl = (c: Context<AppEnv>, url: string | undefined) => {
  if (url === undefined) return;
  const live = c.var.principal.mode === "live";
  const development = isDevelopmentDeployment(c.env);
  if (development && (!live || isLoopbackUrl(url))) return;
  const problem = nonPublicUrlProblem(url);
  if (!problem) return;
  const why = development
    ? `${problem} with a live credential (in local development a live credential may use this machine's addresses, a test credential any local one)`
    : `${problem} on a deployed service (PUBLIC_BASE_URL is public; local addresses are for local development)`;
  throw invalidParam("url", `url ${why}`);
};

const missing = (id: string) => notFound("endpoint", id, "webhook endpoint");

export const webhookEndpointsRouter = createRouter()
  .openapi(createEndpoint, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const body = c.req.valid("json");
    checkPublicUrl(c, body.url);
    const now = Date.now();
    const id = newId("webhook_endpoint", now);
    const [[row]] = await commit(
      c,
      [
        insertEndpoint(c.var.db, {
          id,
          workspaceId: workspace_id,
          url: body.url,
          events: body.events,
          description: body.description ?? null,
          enabled: body.enabled ?? true,
          secret: newSecret(),
          createdAt: now,
          updatedAt: now,
          deletedAt: null,
        }),
      ],
      { status: 201, resource: "webhook_endpoint_with_secret", id },
    );
    if (row) return c.json(envelope(serializeEndpointWithSecret(row)), 201);
    const existing = await countEndpoints(c.var.db, workspace_id);
    throw new ApiError(
      "webhook_endpoint_limit_reached",
      `A workspace can have at most ${MAX_ENDPOINTS_PER_WORKSPACE} webhook endpoints (this one has ${existing}); delete one first`,
    );
  })
  .openapi(listEndpoints, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const { limit, after } = c.req.valid("query");
    const request = { list: `webhook_endpoints:${workspace_id}`, after, limit };
    const page = await listPage(c, request, (position, take) => listEndpointsPage(c.var.db, workspace_id, position, take), serializeEndpoint);
    return c.json(page, 200);
  })
  .openapi(getEndpoint, async (c) => {
    const { workspace_id, endpoint_id } = c.req.valid("param");
    const row = await findEndpoint(c.var.db, workspace_id, endpoint_id);
    if (!row) throw missing(endpoint_id);
    return c.json(envelope(serializeEndpoint(row)), 200);
  })
  .openapi(updateEndpoint, async (c) => {
    const { workspace_id, endpoint_id } = c.req.valid("param");
    const body = c.req.valid("json");
    checkPublicUrl(c, body.url);
    const changes: EndpointChanges = { updatedAt: Date.now() };
    if (body.url !== undefined) changes.url = body.url;
    if (body.events !== undefined) changes.events = body.events;
    if (body.description !== undefined) changes.description = body.description;
    if (body.enabled !== undefined) changes.enabled = body.enabled;
    const { updatedAt: _, ...given } = changes;
    return writeExplained(async () => {
      const [[row]] = await commit(c, [updateEndpointRow(c.var.db, workspace_id, endpoint_id, changes)], {
        status: 200,
        resource: "webhook_endpoint",
        id: endpoint_id,
      });
      if (row) return c.json(envelope(serializeEndpoint(row)), 200);
      // Nothing written: no such endpoint, or every value given is already there.
      const current = await findEndpoint(c.var.db, workspace_id, endpoint_id);
      if (!current) throw missing(endpoint_id);
      return holdsAll(webhookEndpoints, current, given) ? c.json(envelope(serializeEndpoint(current)), 200) : AGAIN;
    });
  })
  .openapi(deleteEndpoint, async (c) => {
    const { workspace_id, endpoint_id } = c.req.valid("param");
    const [[row]] = await commit(c, [deleteEndpointRow(c.var.db, workspace_id, endpoint_id, Date.now())], {
      status: 200,
      resource: "deleted_webhook_endpoint",
      id: endpoint_id,
    });
    if (!row) throw missing(endpoint_id);
    return c.json(envelope(serializeDeletedEndpoint(row)), 200);
  })
  .openapi(rotateSecret, async (c) => {
    const { workspace_id, endpoint_id } = c.req.valid("param");
    const [[row]] = await commit(
      c,
      [rotateSecretRow(c.var.db, workspace_id, endpoint_id, newSecret(), Date.now())],
      { status: 200, resource: "webhook_endpoint_with_secret", id: endpoint_id },
    );
    if (!row) throw missing(endpoint_id);
    return c.json(envelope(serializeEndpointWithSecret(row)), 200);
  })
  .openapi(testEndpoint, async (c) => {
    const { workspace_id, endpoint_id } = c.req.valid("param");
    const now = Date.now();
    const ids = { workspaceId: workspace_id, endpointId: endpoint_id, eventId: newId("event", now), attemptId: newId("webhook_attempt", now) };
    const [, [attempt]] = await commit(c, testEndpointStatements(c.var.db, ids, now), {
      status: 200,
      resource: "webhook_attempt",
      id: ids.attemptId,
    });
    if (!attempt) throw missing(endpoint_id);
    // At once, beside the answer: the attempt's first try, with the retries of any other.
    c.executionCtx.waitUntil(
      deliverTry(c.env, attempt.id, 0).catch((err: unknown) => {
        logError("webhook_test_failed", { attempt_id: attempt.id }, err);
      }),
    );
    return c.json(envelope(serializeAttempt(attempt)), 200);
  })
  .openapi(listAttempts, async (c) => {
    const { workspace_id, endpoint_id } = c.req.valid("param");
    const { limit, after } = c.req.valid("query");
    const request = { list: `webhook_attempts:${endpoint_id}`, after, limit };
    const page = await listPage(
      c,
      request,
      async (position, take) => {
        // One round trip: the endpoint's presence in the workspace and the page, read together.
        const [endpoint, rows] = await c.var.db.batch([
          endpointInWorkspace(c.var.db, workspace_id, endpoint_id),
          listAttemptsPage(c.var.db, endpoint_id, position, take),
        ]);
        if (endpoint.length === 0) throw missing(endpoint_id);
        return rows;
      },
      serializeAttempt,
    );
    return c.json(page, 200);
  });
