import { ApiError } from "../errors/api-error";
import { base64UrlDecode, base64UrlEncode } from "./crypto";

// A cursor is the keyset position (the last id of a page), bound by an HMAC to the list it came
// from (e.g. the subscribers of one workspace). Altered, forged or foreign cursors are rejected.

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const MAC_BYTES = 16;
const keys = new Map<string, Promise<CryptoKey>>();

const hmacKey = (secret: string): Promise<CryptoKey> => {
  let key = keys.get(secret);
  if (!key) {
    key = crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
      "sign",
    ]);
    keys.set(secret, key);
  }
  return key;
};

const mac = async (secret: string, scope: string, payload: string): Promise<Uint8Array> => {
  const signature = await crypto.subtle.sign("HMAC", await hmacKey(secret), encoder.encode(`v1|${scope}|${payload}`));
  return new Uint8Array(signature, 0, MAC_BYTES);
};

export type CursorCodec = {
  encode: (scope: string, position: string) => Promise<string>;
  /** Returns the position, or throws 400 invalid_cursor. */
  decode: (scope: string, cursor: string) => Promise<string>;
};

export const cursorCodec = (secret: string): CursorCodec => ({
  async encode(scope, position) {
    const payload = base64UrlEncode(encoder.encode(position));
    return `${payload}.${base64UrlEncode(await mac(secret, scope, payload))}`;
  },
  async decode(scope, cursor) {
    const invalid = new ApiError("invalid_cursor", "after is not a cursor issued for this list", { param: "after" });
    const [payload, signature, ...rest] = cursor.split(".");
    if (!payload || !signature || rest.length > 0) throw invalid;
    const given = base64UrlDecode(signature);
    const position = base64UrlDecode(payload);
    if (!given || !position || given.length !== MAC_BYTES) throw invalid;
    const expected = await mac(secret, scope, payload);
    let diff = 0;
    for (let i = 0; i < MAC_BYTES; i++) diff |= (given[i] ?? 0) ^ (expected[i] ?? 0);
    if (diff !== 0) throw invalid;
    return decoder.decode(position);
  },
});
