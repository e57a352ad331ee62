import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import { createMiddleware } from "hono/factory";
import type { MiddlewareHandler } from "hono";
import { readErrorResponses, writeErrorResponses } from "../errors/openapi";
import { requireScope, workspaceAccess } from "../middleware/auth";
import { IdempotencyHeaders, idempotency } from "../middleware/idempotency";
import type { AppEnv, Scope } from "./types";

type ApiRouteConfig = Omit<RouteConfig, "middleware" | "security"> & {
  /** The scope a credential needs for this route. */
  scope: Scope;
  /** Accepts `Idempotency-Key` (every POST/PATCH that creates or changes something). */
  idempotent?: boolean;
};

/** Names the matched route template for the access log. */
export const routeName = (method: string, path: string) =>
  createMiddleware<AppEnv>(async (c, next) => {
    c.set("route", `${method.toUpperCase()} ${path}`);
    await next();
  });

/**
 * Every authenticated route is declared through here, so each one gets the same guard chain
 * (scope → workspace access → idempotency → validators → handler), the bearer security
 * requirement and the error responses in its OpenAPI description.
 */
export const apiRoute = <const R extends ApiRouteConfig>(config: R) => {
  const { scope, idempotent, ...route } = config;
  const middleware = [
    routeName(route.method, route.path),
    requireScope(scope),
    ...(route.path.includes("{workspace_id}") ? [workspaceAccess] : []),
    ...(idempotent ? [idempotency] : []),
  ];
  return createRoute({
    ...route,
    description: `${route.description ?? ""}\n\nRequires scope \`${scope}\`.`.trim(),
    security: [{ bearerAuth: [] }],
    middleware,
    request: idempotent ? { ...route.request, headers: IdempotencyHeaders } : route.request,
    responses: { ...(idempotent ? writeErrorResponses : readErrorResponses), ...route.responses },
  }) as unknown as Omit<R, "scope" | "idempotent"> & { middleware: MiddlewareHandler<AppEnv>[] };
};
