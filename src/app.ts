import { z } from "@hono/zod-openapi";
import { HTTPException } from "hono/http-exception";
import { getPathNoStrict } from "hono/utils/url";
import { adminRouter, operatorAuth } from "./admin/admin.handlers";
import { campaignsRouter } from "./campaigns/campaigns.handlers";
import { ReplayInstead } from "./db/commit";
import { consentRouter } from "./consent/consent.handlers";
import { ApiError, noRoute } from "./errors/api-error";
import { requestIdHeader } from "./errors/openapi";
import { renderError } from "./errors/render";
import { healthHandler, healthRoute } from "./health/health";
import { API_TITLE, docsRouter } from "./docs/docs.handlers";
import { createRouter } from "./lib/create-app";
import { routeName } from "./lib/route";
import { authenticate, rateLimit } from "./middleware/auth";
import { requestContext } from "./middleware/request-context";
import { newslettersRouter } from "./newsletters/newsletters.handlers";
import { operationsRouter } from "./operations/operations.handlers";
import { segmentsRouter } from "./segments/segments.handlers";
import { subscribersRouter } from "./subscribers/subscribers.handlers";
import { workspacesRouter } from "./workspaces/workspaces.handlers";
import { describeWebhooks } from "./events/webhooks.openapi";
import { resendWebhookRouter } from "./feedback/resend.webhook";
import { eventsRouter } from "./events/events.handlers";
import { webhookEndpointsRouter } from "./webhooks/endpoints.handlers";

/** `/v1/...` and `/...` are the same endpoint: the version segment is dropped before routing. */
const withoutVersion = (request: Request) => {
  const path = getPathNoStrict(request);
  if (path === "/v1") return "/";
  return path.startsWith("/v1/") ? path.slice(3) : path;
};

/** Every operation's tag, declared once with what it groups (linters want each used tag defined). */
const tags = [
  { name: "Workspaces", description: "The workspaces a credential may access." },
  { name: "Subscribers", description: "A workspace's subscribers, their consent status and tags." },
  { name: "Newsletters", description: "Senders: the from and reply-to addresses campaigns go out with." },
  { name: "Segments", description: "Tag filters that narrow a campaign's audience." },
  { name: "Campaigns", description: "Campaigns and their sends." },
  { name: "Operations", description: "Asynchronous sends and their deliveries." },
  { name: "Webhooks", description: "Endpoints that receive the workspace's events, signed (Standard Webhooks), and their delivery attempts." },
  { name: "Events", description: "The event log: every change an endpoint can be told about, newest first." },
  { name: "Operator", description: "The operator API: workspaces and credentials, guarded by ADMIN_TOKEN." },
  { name: "Utility", description: "Liveness, this document and its reference; no credential needed." },
];

const resourceRouters = [
  workspacesRouter,
  subscribersRouter,
  newslettersRouter,
  segmentsRouter,
  campaignsRouter,
  operationsRouter,
  webhookEndpointsRouter,
  eventsRouter,
];

export const createApp = () => {
  const app = createRouter();
  // Filled in once every route is registered (below); the middleware that reads it runs only on requests.
  let fixedPaths: (path: string, method: string) => string | undefined = () => undefined;
  // The router's options are not exposed through createRouter; set the path extractor here.
  (app as unknown as { getPath: typeof withoutVersion }).getPath = withoutVersion;

  app.use("*", requestContext);

  app.openapi(healthRoute, healthHandler);

  // The unsubscribe and confirmation links and their pages: public, HTML, rate-limited per client IP (src/consent/).
  app.route("/", consentRouter);

  // Resend's delivery feedback: public, verified by its Svix signature (src/feedback/).
  app.route("/", resendWebhookRouter);

  app.use("/admin/*", operatorAuth);
  app.route("/", adminRouter);

  // "/workspaces/*" also matches "/workspaces" itself. Each route's own chain (src/lib/route.ts)
  // goes on with scope, workspace access and the body gate.
  app.use("/workspaces/*", authenticate, rateLimit, async (c, next) => {
    const methods = fixedPaths(c.req.path, c.req.method);
    return methods ? renderError(c, notAllowed(c.req.method, c.req.url, methods)) : next();
  });
  for (const router of resourceRouters) app.route("/", router);

  app.openAPIRegistry.registerComponent("securitySchemes", "bearerAuth", {
    type: "http",
    scheme: "bearer",
    description: "A server credential: `svc_test_…` (delivers through the sandbox) or `svc_live_…`.",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
    type: "http",
    scheme: "bearer",
    description: "The operator token (ADMIN_TOKEN secret).",
  });
  describeWebhooks(app);
  // doc31 serves the document but does not describe itself in it.
  app.openAPIRegistry.registerPath({
    method: "get",
    path: "/openapi.json",
    tags: ["Utility"],
    summary: "This OpenAPI document",
    description: "The machine-readable contract of this service (OpenAPI 3.1), as the routes themselves validate: generate a client from it, or read it at /docs.",
    operationId: "openapi",
    security: [],
    responses: {
      200: { description: "The OpenAPI 3.1 document", headers: requestIdHeader, content: { "application/json": { schema: z.looseObject({}) } } },
    },
  });
  app.get("/openapi.json", routeName("get", "/openapi.json"));
  app.doc31("/openapi.json", (c) => {
    const origin = new URL(c.req.url).origin;
    return {
      openapi: "3.1.0",
      info: {
        title: API_TITLE,
        version: "1.0.0",
        description:
          "Subscribers, campaigns and asynchronous sends. Every path is served under `/v1` (canonical) and without it. Errors share one envelope; see the `Error` schema.",
        contact: { name: "The operators of this service", url: `${origin}/docs` },
        license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" },
      },
      // Relative to the document (OpenAPI 3.1 allows it): never a Host header a client or proxy forged,
      // and right on every port and origin the service is reached at.
      servers: [{ url: "/v1" }],
      tags,
    };
  });
  app.route("/", docsRouter);

  const table = routeTable(app.routes);
  const allowed = allowedMethods(table);
  fixedPaths = shadowedFixedPaths(table);
  // Rendered here rather than thrown: Hono's not-found hook runs outside the middleware chain's error handling.
  app.notFound((c) => {
    const methods = configured(c.req.path, c.env) ? allowed(c.req.path) : undefined;
    const error = methods ? notAllowed(c.req.method, c.req.url, methods) : noRoute(c.req.method, new URL(c.req.url).pathname);
    return renderError(c, error);
  });
  // A request answered by an earlier one's Idempotency-Key record (src/db/commit.ts) is not an error.
  app.onError((err, c) => (err instanceof ReplayInstead ? err.response : renderError(c, fromFrameworkError(err))));
  return app;
};

/** Framework-level exceptions (body gate, JSON parse) mapped onto the closed code list. */
const fromFrameworkError = (err: unknown): unknown => {
  if (!(err instanceof HTTPException)) return err;
  switch (err.status) {
    case 400:
      return new ApiError("invalid_json", "Request body is not valid JSON");
    case 413:
      return new ApiError("payload_too_large", "Request body is too large");
    case 415:
      return new ApiError("unsupported_media_type", "Request body must be JSON, sent with Content-Type: application/json");
    default:
      return err;
  }
};

/**
 * Routes that exist only when configured: without ADMIN_TOKEN the operator API, without
 * RESEND_WEBHOOK_SECRET Resend's feedback route, are unknown paths for every method (a 405 listing
 * their methods would tell that they exist).
 */
const configured = (path: string, env: Partial<Env>): boolean => {
  if (path === "/admin" || path.startsWith("/admin/")) return Boolean(env.ADMIN_TOKEN);
  if (path === "/webhooks/resend") return Boolean(env.RESEND_WEBHOOK_SECRET);
  return true;
};

const notAllowed = (method: string, url: string, allow: string) =>
  new ApiError("method_not_allowed", `${method} is not allowed on ${new URL(url).pathname}; it takes ${allow}`, { headers: { Allow: allow } });

type RouteTable = Map<string, { pattern: RegExp; methods: Set<string> }>;

/** Each route template (`/subscribers/:subscriber_id`), with a pattern for the paths it serves and its methods. */
const routeTable = (routes: { method: string; path: string }[]): RouteTable => {
  const table: RouteTable = new Map();
  for (const { method, path } of routes) {
    if (method === "ALL" || path.includes("*")) continue;
    let entry = table.get(path);
    if (!entry) {
      entry = { pattern: new RegExp(`^${path.replace(/:[A-Za-z_]+/g, "[^/]+")}$`), methods: new Set() };
      table.set(path, entry);
    }
    entry.methods.add(method);
    if (method === "GET") entry.methods.add("HEAD");
  }
  return table;
};

/** For 405: which methods the route table has for a path that matched no route with this method. */
const allowedMethods = (table: RouteTable) => (path: string): string | undefined => {
  const methods = new Set<string>();
  for (const entry of table.values()) if (entry.pattern.test(path)) for (const m of entry.methods) methods.add(m);
  return methods.size > 0 ? [...methods].join(", ") : undefined;
};

/**
 * A fixed path that a templated route also matches (`/subscribers/batch` and `/subscribers/:subscriber_id`)
 * is, as OpenAPI matches paths, the fixed one's alone: a method it lacks is a 405 listing its own methods,
 * not the templated route called with "batch" for an id. Answers the Allow list for such a request.
 */
const shadowedFixedPaths = (table: RouteTable) => {
  const templates = [...table.entries()];
  const shadowed = templates.filter(
    ([path, entry]) => templates.some(([other, { pattern }]) => other !== path && pattern.test(path) && !entry.pattern.test(other)),
  );
  return (path: string, method: string): string | undefined => {
    for (const [, entry] of shadowed) if (entry.pattern.test(path) && !entry.methods.has(method)) return [...entry.methods].join(", ");
    return undefined;
  };
};
