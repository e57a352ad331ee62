import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { bindingPurpose, missingBindings, neededBindings } from "../errors/configuration";
import { ApiError } from "../errors/api-error";
import { errorResponse, requestIdHeader } from "../errors/openapi";
import { publicLimitWait } from "../middleware/client-ip";
import type { AppEnv } from "../lib/types";
import { publicBaseUrl } from "../sending/compose";
import { resolveIntegration } from "../sending/integrations";
import { nonPublicUrlProblem } from "../webhooks/url-rules";

// /health says whether this deployment can serve the API, and if not, what to fix: the bindings it
// needs, a migrated database holding the signing key, and which optional parts are configured.

const Check = z
  .object({
    status: z.enum(["ok", "warning", "failed"]).openapi({
      description: "`failed` makes the deployment `unavailable`; `warning` is something to fix that does not stop the API.",
    }),
    message: z.string().openapi({ description: "What was found, and for a check that is not `ok` what to do." }),
  })
  .openapi("HealthCheck");

const HealthSchema = z
  .object({
    status: z.enum(["ok", "unavailable"]).openapi({ description: "`unavailable` when any check failed (HTTP 503)." }),
    checks: z.object({
      bindings: Check,
      database: Check,
      links: Check.openapi({
        description:
          "The origin of the links put in mail (PUBLIC_BASE_URL): a `warning` while a real integration is configured and it is not a public https origin (mailbox providers offer one-click unsubscribe only for https, and recipients could not reach a local one).",
      }),
    }),
    configuration: z.object({
      operator_api: z.enum(["enabled", "disabled"]).openapi({ description: "`disabled` while ADMIN_TOKEN is unset." }),
      signing_key: z.enum(["service", "CURSOR_SECRET"]).openapi({
        description: "Which key signs cursors and links: the service's own (kept in D1) or the CURSOR_SECRET override.",
      }),
      integrations: z.record(z.string(), z.enum(["configured", "not_configured"])),
    }),
  })
  .openapi("Health");

export const healthRoute = createRoute({
  method: "get",
  path: "/health",
  tags: ["Utility"],
  summary: "Health and configuration check",
  operationId: "health",
  security: [],
  description:
    "Whether this deployment can serve the API: its bindings, a migrated database with the service's signing key, and which optional parts (operator API, integrations) are configured. Needs no credential; reveals no secret.",
  responses: {
    200: {
      description: "Every check passed",
      headers: requestIdHeader,
      content: { "application/json": { schema: HealthSchema } },
    },
    429: errorResponse(["rate_limited"], {
      "Retry-After": { description: "Seconds to wait before retrying.", schema: { type: "integer" } },
    }),
    503: {
      description: "A check failed: each failed check says what to fix",
      headers: requestIdHeader,
      content: { "application/json": { schema: HealthSchema } },
    },
  },
});

type Health = z.infer<typeof HealthSchema>;

const databaseCheck = async (c: Context<AppEnv>): Promise<Health["checks"]["database"]> => {
  try {
    const row = await c.var.db.$client
      .prepare("SELECT count(*) AS n FROM service_keys WHERE name = 'signing'")
      .first<{ n: number }>();
    return {
      status: "ok",
      message: row?.n ? "migrated; the signing key is present" : "migrated; the signing key will be created on first use",
    };
  } catch (err) {
    const text = err instanceof Error ? `${err.message} ${String(err.cause ?? "")}` : String(err);
    return {
      status: "failed",
      message: /no such table/i.test(text)
        ? "the database has not been migrated: run `wrangler d1 migrations apply DB --remote`"
        : "the database could not be queried",
    };
  }
};

/** Whether mail can carry links to PUBLIC_BASE_URL: a public https origin, once real mail is sent. */
const linksCheck = (c: Context<AppEnv>): Health["checks"]["links"] => {
  const origin = publicBaseUrl(c.env);
  let url: URL | undefined;
  try {
    url = new URL(origin);
  } catch {
    url = undefined;
  }
  // Public: https, and not a name or address a webhook endpoint could not have in live mode either.
  const problem = !url
    ? `${origin} is not a URL`
    : url.protocol !== "https:" || nonPublicUrlProblem(origin)
      ? `${origin} is not a public https origin`
      : undefined;
  if (!problem) return { status: "ok", message: `links in mail point at ${origin}` };
  if (!resolveIntegration("resend", c.env)) {
    return { status: "ok", message: `links in mail point at ${origin} (only the sandbox sends: set PUBLIC_BASE_URL to the deployed https origin before sending real mail)` };
  }
  return {
    status: "warning",
    message: `PUBLIC_BASE_URL: ${problem}, yet real mail is sent: recipients cannot reach its unsubscribe links and mailbox providers offer one-click unsubscribe only for https; set it to the deployed https origin`,
  };
};

export const healthHandler = async (c: Context<AppEnv>) => {
  // Public and reading D1: limited per client IP, with a budget no monitor comes near.
  const wait = await publicLimitWait(c, "health");
  if (wait !== undefined) {
    throw new ApiError("rate_limited", `Too many /health requests from this address; retry after ${wait} seconds`, {
      headers: { "Retry-After": String(wait) },
    });
  }
  const missing = missingBindings(c.env);
  const bindings: Health["checks"]["bindings"] =
    missing.length === 0
      ? { status: "ok", message: `present: ${neededBindings(c.env).join(", ")}` }
      : { status: "failed", message: `missing: ${missing.map((m) => `${m} (${bindingPurpose(m)})`).join(", ")}; declare them in wrangler.toml` };
  const database: Health["checks"]["database"] = missing.includes("DB")
    ? { status: "failed", message: "no DB binding" }
    : await databaseCheck(c);
  const ok = bindings.status === "ok" && database.status === "ok";
  const body: Health = {
    status: ok ? "ok" : "unavailable",
    checks: { bindings, database, links: linksCheck(c) },
    configuration: {
      operator_api: c.env.ADMIN_TOKEN ? "enabled" : "disabled",
      signing_key: c.env.CURSOR_SECRET ? "CURSOR_SECRET" : "service",
      integrations: {
        sandbox: "configured",
        resend: resolveIntegration("resend", c.env) ? "configured" : "not_configured",
      },
    },
  };
  return ok ? c.json(body, 200) : c.json(body, 503);
};
