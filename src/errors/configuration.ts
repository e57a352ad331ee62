import { ApiError } from "./api-error";

// A deployment that lacks something it needs answers 503 configuration_error naming what is missing
// and how to fix it (and /health lists the same), never an opaque 500.

/** The bindings every API request relies on, with what each is for. */
export const requiredBindings = {
  DB: "D1 database (all data)",
  IDEMPOTENCY_KV: "KV namespace (Idempotency-Key replays)",
  SEND_QUEUE: "Queue producer (campaign sends)",
  WEBHOOK_QUEUE: "Queue producer (webhook deliveries)",
  RATE_LIMITER: "rate-limiting binding (per-credential limit)",
  PUBLIC_RATE_LIMITER: "rate-limiting binding (per-IP limit of the unsubscribe pages)",
  // Needed only once the resend integration is configured (RESEND_API_KEY set).
  RESEND_PACER: "Durable Object namespace (ResendPacer: Resend's account-wide request rate)",
} as const satisfies Partial<Record<keyof Env, string>>;

export type BindingName = keyof typeof requiredBindings;

const neededBy = (env: Env, name: BindingName) => name !== "RESEND_PACER" || Boolean(env.RESEND_API_KEY);

export const missingBindings = (env: Env): BindingName[] =>
  (Object.keys(requiredBindings) as BindingName[]).filter((name) => neededBy(env, name) && (env[name] === undefined || env[name] === null));

export const ConfigurationError = {
  bindings: (names: BindingName[]) =>
    new ApiError(
      "configuration_error",
      `This deployment is missing ${names.map((n) => `the ${n} binding (${requiredBindings[n]})`).join(", ")}; declare it in wrangler.toml and deploy again`,
    ),
  unmigrated: () =>
    new ApiError(
      "configuration_error",
      "The database has not been migrated: apply the migrations (wrangler d1 migrations apply DB --remote) and retry",
    ),
};

const UNMIGRATED = /no such (table|column)/i;

/** A driver error that means the schema is missing or behind the code, rather than a bug. */
export const configurationProblemOf = (thrown: unknown): ApiError | undefined => {
  if (!(thrown instanceof Error)) return undefined;
  const text = `${thrown.message} ${thrown.cause instanceof Error ? thrown.cause.message : ""}`;
  return UNMIGRATED.test(text) ? ConfigurationError.unmigrated() : undefined;
};
