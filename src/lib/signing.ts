import { configurationProblemOf } from "../errors/configuration";
import { base64UrlDecode, base64UrlEncode } from "./crypto";

// One signing key for everything the service signs (pagination cursors, links it mails), kept in D1
// (`service_keys`, made by migrations/0003) so that no deployment needs a secret for it. CURSOR_SECRET,
// when set, replaces it for signing: set it to keep links and cursors valid across databases; what
// the service's own key (or CURSOR_SECRET_PREVIOUS) signed before still verifies. Each use signs
// under its own purpose, so a signature made for one can never pass as another.

const encoder = new TextEncoder();
const MAC_BYTES = 16;
const KEY_NAME = "signing";

export type Signer = {
  /** base64url HMAC-SHA256 (first 16 bytes) of `message`, under the service key, for `purpose`. */
  sign(purpose: string, message: string): Promise<string>;
  /** Constant-time check of a signature made by `sign` for the same purpose and message. */
  verify(purpose: string, message: string, signature: string): Promise<boolean>;
};

// The key never changes for a database, so an isolate keeps it once read, per binding (or per
// override). Only the key is kept, never a load under way: a request waiting on a read another
// request started would be cancelled with it (the runtime ends a request's I/O with the request, and
// cancels as hung a request that waits on what only another can settle). Requests that need the key
// before any has it each read it (the first moments of an isolate: one D1 read each).
const keysByBinding = new WeakMap<D1Database, CryptoKey>();
const keysBySecret = new Map<string, CryptoKey>();

const importKey = (secret: string) =>
  crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);

/**
 * The stored key; one is made when a database lacks it (restored without its data, say). Concurrent
 * first uses race on the same row: the insert keeps the first, and every caller reads that one back.
 */
const loadSecret = async (d1: D1Database): Promise<string> => {
  const read = d1.prepare("SELECT secret FROM service_keys WHERE name = ?").bind(KEY_NAME);
  try {
    const found = await read.first<{ secret: string }>();
    if (found) return found.secret;
    const fresh = [...crypto.getRandomValues(new Uint8Array(32))].map((b) => b.toString(16).padStart(2, "0")).join("");
    const [, stored] = await d1.batch<{ secret: string }>([
      d1
        .prepare("INSERT INTO service_keys (name, secret, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING")
        .bind(KEY_NAME, fresh, Date.now()),
      read,
    ]);
    const secret = stored?.results[0]?.secret;
    if (!secret) throw new Error("the signing key could not be stored");
    return secret;
  } catch (err) {
    throw configurationProblemOf(err) ?? err;
  }
};

type KeyEnv = Pick<Env, "DB" | "CURSOR_SECRET" | "CURSOR_SECRET_PREVIOUS">;

const keyFor = async (env: Pick<Env, "DB" | "CURSOR_SECRET">): Promise<CryptoKey> => {
  const override = env.CURSOR_SECRET;
  const kept = override ? keysBySecret.get(override) : keysByBinding.get(env.DB);
  if (kept) return kept;
  // A failed load (database not migrated yet) throws and keeps nothing: the next request tries again.
  const key = await importKey(override ?? (await loadSecret(env.DB)));
  if (override) keysBySecret.set(override, key);
  else keysByBinding.set(env.DB, key);
  return key;
};

const mac = async (key: CryptoKey, purpose: string, message: string) =>
  new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(`${purpose}\n${message}`)), 0, MAC_BYTES);

const matches = async (key: CryptoKey, purpose: string, message: string, given: Uint8Array) => {
  const expected = await mac(key, purpose, message);
  let diff = 0;
  for (let i = 0; i < MAC_BYTES; i++) diff |= (given[i] ?? 0) ^ (expected[i] ?? 0);
  return diff === 0;
};

/**
 * The keys a signature may have been made with, newest first: the one that signs now, then
 * CURSOR_SECRET_PREVIOUS when set (a rotation, or a return to the service's own key), then, with
 * CURSOR_SECRET set, the service's own key (adopting the override): no link already mailed stops
 * working when the key that signs changes.
 */
const verifyingKeys = (env: KeyEnv): (() => Promise<CryptoKey>)[] => {
  const previous = env.CURSOR_SECRET_PREVIOUS;
  return [
    () => keyFor(env),
    ...(previous ? [() => keyFor({ DB: env.DB, CURSOR_SECRET: previous })] : []),
    ...(env.CURSOR_SECRET ? [() => keyFor({ DB: env.DB, CURSOR_SECRET: undefined })] : []),
  ];
};

/** The service's signer. The key is read (once per isolate) only when something is signed or checked. */
export const signerFor = (env: KeyEnv): Signer => ({
  async sign(purpose, message) {
    return base64UrlEncode(await mac(await keyFor(env), purpose, message));
  },
  async verify(purpose, message, signature) {
    const given = base64UrlDecode(signature);
    if (!given || given.length !== MAC_BYTES) return false;
    for (const key of verifyingKeys(env)) if (await matches(await key(), purpose, message, given)) return true;
    return false;
  },
});
