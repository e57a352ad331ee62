import { createRoute, type RouteConfig, z } from "@hono/zod-openapi";
import { createMiddleware } from "hono/factory";
import type { MiddlewareHandler } from "hono";
import { type ErrorCode, invalidParam } from "../errors/api-error";
import { bodyReadErrorResponses, errorResponse, keyInUseHeaders, payloadTooLarge, readErrorResponses, replayedHeader, requestIdHeader, writeErrorResponses } from "../errors/openapi";
import { requireScope, workspaceAccess } from "../middleware/auth";
import { IdempotencyHeaders, idempotency } from "../middleware/idempotency";
import { jsonBody, readJsonBody } from "../middleware/request-context";
import { validationFailed } from "./create-app";
import { decodedComponent } from "./http";
import type { AppEnv, Scope } from "./types";

type ApiRouteConfig = Omit<RouteConfig, "middleware" | "security"> & {
  /** The scope a credential needs for this route. */
  scope: Scope;
  /** Accepts `Idempotency-Key` (every POST/PATCH that creates or changes something). */
  idempotent?: boolean;
  /** A larger body cap than the default 64 KiB, for the routes that carry campaign content. */
  maxBodyBytes?: number;
  /** The route's own error codes, named in its 400 and 409 responses beside the ones every route has. */
  errorCodes?: { 400?: ErrorCode[]; 409?: ErrorCode[] };
};

/** The query of a route that takes no parameters: any is refused, as list routes refuse those they do not know. */
export const NoQuery = z.strictObject({});

/**
 * The statuses a stored Idempotency-Key answer can have (the handler's own outcomes): the others
 * (401, 403, 413, 415, 422, 429, 5xx) happen before the key is looked at or are never stored.
 */
const REPLAYABLE = /^(2\d\d|400|404|409)$/;

/** Names the matched route template for the access log. */
export const routeName = (method: string, path: string) =>
  createMiddleware<AppEnv>(async (c, next) => {
    c.set("route", `${method.toUpperCase()} ${path}`);
    await next();
  });

/**
 * The path checked ahead of the query (the validators check the query first): a request with a bad
 * id and a bad query parameter answers about the id, the part that names what is asked for.
 */
const pathFirst = (params: z.ZodType) =>
  createMiddleware<AppEnv>(async (c, next) => {
    const checked = params.safeParse(c.req.param());
    if (!checked.success) throw validationFailed(checked.error, "param");
    await next();
  });

/**
 * A query's values are read as UTF-8 percent-escapes, as its body's strings are JSON's UTF-8: a value
 * whose escapes do not decode (Latin-1 `%E9`, a lone surrogate's `%ED%A0%80`) is a 400 naming it,
 * never read as the escapes' literal text (which would match a tag literally named `x%E9`).
 */
const wellFormedQuery = createMiddleware<AppEnv>(async (c, next) => {
  const search = new URL(c.req.url).search.slice(1);
  for (const pair of search ? search.split("&") : []) {
    const [name = "", value = ""] = pair.split(/=(.*)/s).map((part) => part.replace(/\+/g, " "));
    const decodedName = decodedComponent(name);
    if (decodedName === undefined || decodedComponent(value) === undefined) {
      const param = decodedName ?? name;
      throw invalidParam(param, `${param} must be percent-encoded UTF-8 (its escapes are not)`);
    }
  }
  await next();
});

/**
 * Every authenticated route is declared through here, so each one gets the same guard chain
 * (after the credential and rate limit: scope → workspace access → body gate → idempotency →
 * validators → handler), the bearer security requirement, an operationId, and the error responses
 * and headers in its OpenAPI description.
 */
export const apiRoute = <const R extends ApiRouteConfig>(config: R) => {
  const { scope, idempotent, maxBodyBytes, errorCodes, ...route } = config;
  const middleware = [
    routeName(route.method, route.path),
    requireScope(scope),
    ...(route.path.includes("{workspace_id}") ? [workspaceAccess] : []),
    ...(route.request?.body ? [maxBodyBytes === undefined ? jsonBody : readJsonBody(maxBodyBytes)] : []),
    ...(idempotent ? [idempotency] : []),
    ...(route.request?.params ? [pathFirst(route.request.params as z.ZodType)] : []),
    ...(route.request?.query ? [wellFormedQuery] : []),
  ];
  // A route taking larger bodies says so where its 413 is described; its 400 and 409 name every code
  // they can carry.
  const query = (route.request?.query as { shape?: Record<string, unknown> } | undefined)?.shape;
  const lists = query !== undefined && "after" in query;
  const errors = {
    ...(idempotent ? writeErrorResponses : route.request?.body ? bodyReadErrorResponses : readErrorResponses),
    ...(route.request?.body && maxBodyBytes !== undefined && { 413: payloadTooLarge(maxBodyBytes) }),
    400: errorResponse([
      "validation_failed",
      ...(route.request?.body ? (["invalid_json"] as const) : []),
      ...(lists ? (["invalid_cursor"] as const) : []),
      ...(errorCodes?.[400] ?? []),
    ]),
    ...(idempotent && { 409: errorResponse([...(errorCodes?.[409] ?? []), "idempotency_key_in_use"], keyInUseHeaders) }),
  };
  const responses = Object.fromEntries(
    Object.entries({ ...errors, ...route.responses }).map(([status, response]) => [
      status,
      "$ref" in response
        ? response
        : { ...response, headers: { ...requestIdHeader, ...(idempotent && REPLAYABLE.test(status) && replayedHeader), ...response.headers } },
    ]),
  );
  return createRoute({
    ...route,
    operationId: route.operationId ?? operationIdOf(route.summary),
    description: `${route.description ?? ""}\n\nRequires scope \`${scope}\`.`.trim(),
    security: [{ bearerAuth: [] }],
    middleware,
    // A route that takes no query parameters refuses any, as list routes refuse those they do not know.
    request: { ...route.request, query: route.request?.query ?? NoQuery, ...(idempotent && { headers: IdempotencyHeaders }) },
    responses,
  }) as unknown as Omit<R, "scope" | "idempotent" | "maxBodyBytes" | "errorCodes"> & { middleware: MiddlewareHandler<AppEnv>[] };
};

/** "List a campaign's deliveries" → "listCampaignDeliveries": stable names for generated clients. */
export const operationIdOf = (summary: string | undefined) => {
  if (!summary) return undefined;
  const words = summary
    .replace(/'s\b/g, "")
    .split(/[^A-Za-z0-9]+/)
    .filter((w) => w && !["a", "an", "the"].includes(w.toLowerCase()));
  return words.map((w, i) => (i === 0 ? w.toLowerCase() : w[0]?.toUpperCase() + w.slice(1).toLowerCase())).join("");
};
