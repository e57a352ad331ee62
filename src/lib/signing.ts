import { base64UrlDecode, base64UrlEncode } from "./crypto";

// Stand-in with the API of the service signer (one key for everything the service signs, each use
// under its own purpose): HMAC-SHA256 truncated to 16 bytes, keyed by CURSOR_SECRET.

const encoder = new TextEncoder();
const MAC_BYTES = 16;

export type Signer = {
  /** base64url HMAC-SHA256 (first 16 bytes) of `message`, under the service key, for `purpose`. */
  sign(purpose: string, message: string): Promise<string>;
  /** Constant-time check of a signature made by `sign` for the same purpose and message. */
  verify(purpose: string, message: string, signature: string): Promise<boolean>;
};

const keys = new Map<string, Promise<CryptoKey>>();
const keyFor = (secret: string) => {
  let key = keys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    keys.set(secret, key);
  }
  return key;
};

const mac = async (secret: string, purpose: string, message: string) =>
  new Uint8Array(await crypto.subtle.sign("HMAC", await keyFor(secret), encoder.encode(`${purpose}\n${message}`)), 0, MAC_BYTES);

export const signerFor = (env: Pick<Env, "CURSOR_SECRET">): Signer => {
  const secret = () => {
    if (!env.CURSOR_SECRET) throw new Error("CURSOR_SECRET is not configured");
    return env.CURSOR_SECRET;
  };
  return {
    async sign(purpose, message) {
      return base64UrlEncode(await mac(secret(), purpose, message));
    },
    async verify(purpose, message, signature) {
      const given = base64UrlDecode(signature);
      if (!given || given.length !== MAC_BYTES) return false;
      const expected = await mac(secret(), purpose, message);
      let diff = 0;
      for (let i = 0; i < MAC_BYTES; i++) diff |= (given[i] ?? 0) ^ (expected[i] ?? 0);
      return diff === 0;
    },
  };
};
