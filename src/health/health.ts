import { createRoute, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import { bindingPurpose, missingBindings, missingOptionalBindings, missingSchemaObject, neededBindings } from "../errors/configuration";
import { ApiError } from "../errors/api-error";
import { rateLimited, requestIdHeader } from "../errors/openapi";
import { publicLimitWait } from "../middleware/client-ip";
import { routeName } from "../lib/route";
import type { AppEnv } from "../lib/types";
import { schemaProbeQueries } from "../lib/schema-probe";
import { MIGRATE_HINT } from "../errors/configuration";
import { logError } from "../lib/log";
import { publicOrigin } from "../lib/public-origin";
import { resendConfigFindings, resendRate } from "../sending/integrations/resend-config";
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
    checks: z
      .object({ bindings: Check, database: Check, links: Check, resend: Check, secrets: Check })
      .openapi({
        description: [
          "Each check (one `HealthCheck` schema, so a generated client types them alike):",
          "`bindings`: every binding this configuration needs is declared (`failed` names those missing); a `warning` for a missing ASSETS, which only /docs needs (its script then answers 503).",
          "`database`: a migrated database: every table and column the code uses is there (a deploy without its migrations fails it).",
          "`links`: the origin of the links put in mail (PUBLIC_BASE_URL): `failed` when it is not an http(s) origin (a path, query or fragment; previews, test sends and sends then answer 503); a `warning` while a real integration is configured and it is not a public https origin (mailbox providers offer one-click unsubscribe only for https, and recipients could not reach a local one).",
          "`resend`: the Resend integration's configuration: `failed` for a RESEND_BASE_URL that is not an http(s) URL or a malformed RESEND_WEBHOOK_SECRET; a `warning` for an unset RESEND_WEBHOOK_SECRET (no bounce or complaint is ever received) or one whose key is under 16 bytes or a RESEND_MAX_RPS that is not a positive number or is above 100.",
          "`secrets`: a `warning` for a CURSOR_SECRET, CURSOR_SECRET_PREVIOUS or ADMIN_TOKEN shorter than 32 characters (guessable).",
        ].join("\n\n"),
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
  middleware: [routeName("get", "/health")] as const,
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
    429: rateLimited,
    503: {
      description: "A check failed: each failed check says what to fix",
      headers: requestIdHeader,
      content: { "application/json": { schema: HealthSchema } },
    },
  },
});

type Health = z.infer<typeof HealthSchema>;
type Check = Health["checks"]["database"];

const databaseCheck = async (c: Context<AppEnv>): Promise<Check> => {
  const d1 = c.var.db.$client;
  try {
    // One round trip: the signing key's row, then the probe.
    const [keys] = await d1.batch<{ n: number }>([d1.prepare("SELECT count(*) AS n FROM service_keys WHERE name = 'signing'"), ...schemaProbeQueries().map((query) => d1.prepare(query))]);
    const signing = keys?.results[0]?.n;
    return {
      status: "ok",
      message: signing ? "migrated; the signing key is present" : "migrated; the signing key will be created on first use",
    };
  } catch (err) {
    const missing = missingSchemaObject(err);
    if (missing) return { status: "failed", message: `the database is behind the code (${missing}): ${MIGRATE_HINT}` };
    // The cause goes to the log, not to an unauthenticated page.
    logError("health_database_failed", { request_id: c.var.requestId }, err);
    return { status: "failed", message: "the database could not be queried (the cause is in the log, event health_database_failed)" };
  }
};

/** Whether mail can carry links to PUBLIC_BASE_URL: an origin, and a public https one once real mail is sent. */
const linksCheck = (c: Context<AppEnv>): Check => {
  const found = publicOrigin(c.env);
  if ("problem" in found) return { status: "failed", message: `${found.problem}; until then previews, test sends and sends answer 503 configuration_error` };
  const { origin } = found;
  // Public: https, and not a name or address a webhook endpoint could not have in live mode either.
  const problem = !origin.startsWith("https:") || nonPublicUrlProblem(origin) ? `${origin} is not a public https origin` : undefined;
  if (!problem) return { status: "ok", message: `links in mail point at ${origin}` };
  if (!c.env.RESEND_API_KEY) {
    return { status: "ok", message: `links in mail point at ${origin} (only the sandbox sends: set PUBLIC_BASE_URL to the deployed https origin before sending real mail)` };
  }
  return {
    status: "warning",
    message: `PUBLIC_BASE_URL: ${problem}, yet real mail is sent: recipients cannot reach its unsubscribe links and mailbox providers offer one-click unsubscribe only for https; set it to the deployed https origin`,
  };
};

/** Secrets short enough to guess: CURSOR_SECRET signs unsubscribe links, ADMIN_TOKEN opens the operator API (no rate limit). */
const SECRET_MIN_LENGTH = 32;
const WHY_SECRET = {
  CURSOR_SECRET: "it signs cursors and unsubscribe links, and anyone holding one can test keys against it",
  CURSOR_SECRET_PREVIOUS: "what it signed still verifies, and anyone holding a cursor or link it signed can test keys against it",
  ADMIN_TOKEN: "it opens the operator API, which has no rate limit",
} as const;
const secretsCheck = (env: Env): Check => {
  const short = (["CURSOR_SECRET", "CURSOR_SECRET_PREVIOUS", "ADMIN_TOKEN"] as const).filter((name) => {
    const value = env[name];
    return value !== undefined && value !== "" && value.length < SECRET_MIN_LENGTH;
  });
  if (short.length === 0) return { status: "ok", message: "no secret is shorter than 32 characters" };
  return {
    status: "warning",
    message: `${short.join(", ")} ${short.length === 1 ? "is" : "are"} shorter than ${SECRET_MIN_LENGTH} characters and can be guessed (${short.map((name) => WHY_SECRET[name]).join("; ")}); set ${short.length === 1 ? "it" : "each"} to 32 random bytes, e.g. \`openssl rand -hex 32\``,
  };
};

/** The Resend integration's configuration, when it is configured: the worst of its findings, each said. */
const resendCheck = (env: Env): Check => {
  if (!env.RESEND_API_KEY) return { status: "ok", message: "not configured (RESEND_API_KEY is unset): live sends need an integration" };
  const findings = resendConfigFindings(env);
  if (findings.length === 0) return { status: "ok", message: `configured: at most ${resendRate(env).rps} requests a second, feedback verified` };
  return {
    status: findings.some((f) => f.status === "failed") ? "failed" : "warning",
    message: findings.map((f) => f.message).join("; "),
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
  const optional = missingOptionalBindings(c.env);
  const named = (names: Parameters<typeof bindingPurpose>[0][]) => names.map((m) => `${m} (${bindingPurpose(m)})`).join(", ");
  const bindings: Health["checks"]["bindings"] =
    missing.length > 0
      ? { status: "failed", message: `missing: ${named([...missing, ...optional])}; declare them in wrangler.toml` }
      : optional.length > 0
        ? { status: "warning", message: `missing: ${named(optional)}; the routes that need it answer 503 until it is declared in wrangler.toml` }
        : { status: "ok", message: `present: ${neededBindings(c.env).join(", ")}` };
  const database: Check = missing.includes("DB") ? { status: "failed", message: "no DB binding" } : await databaseCheck(c);
  const checks = { bindings, database, links: linksCheck(c), resend: resendCheck(c.env), secrets: secretsCheck(c.env) };
  const ok = Object.values(checks).every((check) => check.status !== "failed");
  const body: Health = {
    status: ok ? "ok" : "unavailable",
    checks,
    configuration: {
      operator_api: c.env.ADMIN_TOKEN ? "enabled" : "disabled",
      signing_key: c.env.CURSOR_SECRET ? "CURSOR_SECRET" : "service",
      integrations: {
        sandbox: "configured",
        resend: c.env.RESEND_API_KEY ? "configured" : "not_configured",
      },
    },
  };
  return ok ? c.json(body, 200) : c.json(body, 503);
};
