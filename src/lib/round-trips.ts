import { AsyncLocalStorage } from "node:async_hooks";

// Every call a request makes to D1 and KV is counted and timed here, and reported on its response as
// `Server-Timing: db;dur=3.2;desc="1 call", kv;dur=0.8;desc="1 call"`: the round-trip budget of each
// route is visible to users, and the tests assert it from the header. The bindings are wrapped once
// per isolate; the counts belong to the request whose async context makes the call.

type Tally = { calls: number; ms: number };
type RoundTrips = { db: Tally; kv: Tally };

const current = new AsyncLocalStorage<RoundTrips>();

export const newRoundTrips = (): RoundTrips => ({ db: { calls: 0, ms: 0 }, kv: { calls: 0, ms: 0 } });

/** Runs `fn` with its D1 and KV calls counted into `trips`. */
export const countRoundTrips = <T>(trips: RoundTrips, fn: () => Promise<T>): Promise<T> => current.run(trips, fn);

const timed = async <T>(kind: keyof RoundTrips, call: () => Promise<T>): Promise<T> => {
  const tally = current.getStore()?.[kind];
  if (!tally) return call();
  const started = performance.now();
  tally.calls += 1;
  try {
    return await call();
  } finally {
    tally.ms += performance.now() - started;
  }
};

export const serverTiming = (trips: RoundTrips) =>
  (["db", "kv"] as const)
    .map((kind) => {
      const { calls, ms } = trips[kind];
      return `${kind};dur=${ms.toFixed(1)};desc="${calls} call${calls === 1 ? "" : "s"}"`;
    })
    .join(", ");

// ---- D1 ----

const statements = new WeakMap<object, D1PreparedStatement>();

/** A prepared statement whose executions count as round trips; `bind` keeps the wrapper. */
const countedStatement = (inner: D1PreparedStatement): D1PreparedStatement => {
  const outer = {
    bind: (...values: unknown[]) => countedStatement(inner.bind(...values)),
    first: (column?: string) => timed("db", () => (column === undefined ? inner.first() : inner.first(column))),
    run: () => timed("db", () => inner.run()),
    all: () => timed("db", () => inner.all()),
    raw: (options?: { columnNames?: boolean }) => timed("db", () => inner.raw(options as { columnNames: true })),
  } as unknown as D1PreparedStatement;
  statements.set(outer, inner);
  return outer;
};

/** D1's batch takes only its own statement objects: unwrap ours. */
const unwrap = (statement: D1PreparedStatement) => statements.get(statement) ?? statement;

const wrappedD1 = new WeakMap<D1Database, D1Database>();

export const countedD1 = (d1: D1Database): D1Database => {
  let wrapped = wrappedD1.get(d1);
  if (!wrapped) {
    wrapped = {
      prepare: (query: string) => countedStatement(d1.prepare(query)),
      batch: (list: D1PreparedStatement[]) => timed("db", () => d1.batch(list.map(unwrap))),
      exec: (query: string) => timed("db", () => d1.exec(query)),
      dump: () => timed("db", () => d1.dump()),
      withSession: (constraint?: string) => d1.withSession(constraint),
    } as unknown as D1Database;
    wrappedD1.set(d1, wrapped);
  }
  return wrapped;
};

// ---- KV ----

const wrappedKv = new WeakMap<KVNamespace, KVNamespace>();

export const countedKv = (kv: KVNamespace): KVNamespace => {
  let wrapped = wrappedKv.get(kv);
  if (!wrapped) {
    wrapped = {
      get: (...args: Parameters<KVNamespace["get"]>) => timed("kv", () => (kv.get as (...a: unknown[]) => Promise<unknown>)(...args)),
      getWithMetadata: (...args: Parameters<KVNamespace["getWithMetadata"]>) =>
        timed("kv", () => (kv.getWithMetadata as (...a: unknown[]) => Promise<unknown>)(...args)),
      put: (...args: Parameters<KVNamespace["put"]>) => timed("kv", () => kv.put(...args)),
      delete: (key: string) => timed("kv", () => kv.delete(key)),
      list: (options?: KVNamespaceListOptions) => timed("kv", () => kv.list(options)),
    } as unknown as KVNamespace;
    wrappedKv.set(kv, wrapped);
  }
  return wrapped;
};
