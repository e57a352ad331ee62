import { ApiError } from "./api-error";

// A deployment that lacks something it needs answers 503 configuration_error naming what is missing
// and how to fix it (and /health lists the same), never an opaque 500.

type Requirement = { for: string; /** Needed only when this holds (always, without it). */ when?: (env: Env) => boolean };

/** The bindings API requests rely on, with what each is for and, for some, when it is needed. */
const requiredBindings = {
  DB: { for: "D1 database (all data)" },
  IDEMPOTENCY_KV: { for: "KV namespace (Idempotency-Key replays)" },
  SEND_QUEUE: { for: "Queue producer (campaign sends: starts and fan-out)" },
  DELIVERY_QUEUE: { for: "Queue producer (campaign sends: delivery chunks)" },
  WEBHOOK_QUEUE: { for: "Queue producer (webhook deliveries)" },
  RATE_LIMITER: { for: "rate-limiting binding (per-credential limit)" },
  PUBLIC_RATE_LIMITER: { for: "rate-limiting binding (per-IP limit of the unsubscribe pages and /health)" },
  RESEND_PACER: {
    for: "Durable Object namespace (ResendPacer: Resend's account-wide request rate)",
    when: (env) => Boolean(env.RESEND_API_KEY),
  },
} as const satisfies Partial<Record<keyof Env, Requirement>>;

/** Bindings only some routes need: without one, the rest of the API serves and /health warns. */
const optionalBindings = {
  ASSETS: { for: "static assets ([assets] in wrangler.toml: the /docs reference's script)" },
} as const satisfies Partial<Record<keyof Env, Requirement>>;

type RequiredBinding = keyof typeof requiredBindings;
type OptionalBinding = keyof typeof optionalBindings;
type BindingName = RequiredBinding | OptionalBinding;

const requirements: Record<RequiredBinding, Requirement> = requiredBindings;
const purposes: Record<BindingName, Requirement> = { ...requiredBindings, ...optionalBindings };

/** The bindings this deployment needs, given its configuration. */
export const neededBindings = (env: Env): RequiredBinding[] =>
  (Object.keys(requirements) as RequiredBinding[]).filter((name) => requirements[name].when?.(env) ?? true);

const absent = (env: Env, name: BindingName) => env[name] === undefined || env[name] === null;

export const missingBindings = (env: Env): RequiredBinding[] => neededBindings(env).filter((name) => absent(env, name));

export const missingOptionalBindings = (env: Env): OptionalBinding[] => (Object.keys(optionalBindings) as OptionalBinding[]).filter((name) => absent(env, name));

export const bindingPurpose = (name: BindingName) => purposes[name].for;

/** How to bring a database up to the code, deployed or local. */
export const MIGRATE_HINT =
  "apply the migrations (`wrangler d1 migrations apply DB --remote` for the deployed database; `npm run dev` applies them to the local one, or `wrangler d1 migrations apply DB --local`)";

export const ConfigurationError = {
  bindings: (names: BindingName[]) =>
    new ApiError(
      "configuration_error",
      `This deployment is missing ${names.map((n) => `the ${n} binding (${bindingPurpose(n)})`).join(", ")}; declare it in wrangler.toml and deploy again`,
    ),
  unmigrated: () => new ApiError("configuration_error", `The database has not been migrated: ${MIGRATE_HINT}, and retry`),
};

/**
 * What a driver error says is missing from the database (`no such column: description`) when the
 * schema is missing or behind the code, rather than a bug; undefined for any other error.
 */
export const missingSchemaObject = (thrown: unknown): string | undefined => {
  if (!(thrown instanceof Error)) return undefined;
  const text = `${thrown.message} ${thrown.cause instanceof Error ? thrown.cause.message : String(thrown.cause ?? "")}`;
  return /no such (?:table|column): [\w.]+/i.exec(text)?.[0];
};

/** A driver error that means the schema is missing or behind the code, as the answer to give. */
export const configurationProblemOf = (thrown: unknown): ApiError | undefined =>
  missingSchemaObject(thrown) ? ConfigurationError.unmigrated() : undefined;
