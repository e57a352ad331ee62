// BENCH_D1_LATENCY_MS: every D1 call of the worker takes that much longer, as a call to a D1 primary
// across the network does once deployed (locally the database answers in microseconds, in the same
// process as the worker). With it, a run shows what overlaps D1's round trips and what adds to them.

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const EXECUTING = new Set(["all", "first", "run", "raw"]);

/** `db` with `ms` added to each call that reaches the database (a statement's execution, a batch). */
export const withLatency = (db: D1Database, ms: number): D1Database => {
  const real = new WeakMap<object, D1PreparedStatement>();
  const statement = (inner: D1PreparedStatement): D1PreparedStatement => {
    const outer = new Proxy(inner, {
      get(target, prop) {
        if (prop === "bind") return (...values: unknown[]) => statement(target.bind(...values));
        const value = Reflect.get(target, prop, target);
        if (typeof prop === "string" && EXECUTING.has(prop) && typeof value === "function") {
          return async (...args: unknown[]) => {
            await delay(ms);
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    real.set(outer, inner);
    return outer;
  };
  return new Proxy(db, {
    get(target, prop) {
      if (prop === "prepare") return (query: string) => statement(target.prepare(query));
      if (prop === "batch") {
        return async (statements: D1PreparedStatement[]) => {
          await delay(ms);
          return target.batch(statements.map((s) => real.get(s) ?? s));
        };
      }
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
};

// One slowed handle per binding, so what the worker caches per D1 binding (the counted D1, drizzle,
// the signing key) is cached across requests as it is without the latency.
const slowed = new WeakMap<D1Database, D1Database>();

/** The env the worker sees: D1 slowed down when BENCH_D1_LATENCY_MS is set, else unchanged. */
export const benchEnv = (env: Env): Env => {
  const ms = Number((env as Env & { BENCH_D1_LATENCY_MS?: string }).BENCH_D1_LATENCY_MS ?? 0);
  if (!(ms > 0)) return env;
  let db = slowed.get(env.DB);
  if (!db) {
    db = withLatency(env.DB, ms);
    slowed.set(env.DB, db);
  }
  return { ...env, DB: db };
};
