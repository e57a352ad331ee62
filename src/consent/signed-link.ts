import { base64UrlDecode, base64UrlEncode } from "../lib/crypto";
import type { Signer } from "../lib/signing";

// What the tokens of the links the service mails share (unsubscribe-token.ts, confirm-token.ts): a
// base64url payload, then the signer's 16-byte signature (22 characters) under the link's own
// purpose, and the link itself, `{PUBLIC_BASE_URL}/{path}/{token}`.

const SIGNATURE_CHARS = 22;
const MAX_TOKEN_CHARS = 400;

/** Strict UTF-8, for payloads that carry text: a token altered into invalid UTF-8 is no token. */
export const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

export const sealToken = async (signer: Signer, purpose: string, payload: Uint8Array, signed: string): Promise<string> =>
  `${base64UrlEncode(payload)}${await signer.sign(purpose, signed)}`;

/** A token's payload and signature, or null when it cannot be one (a bad length or encoding, an empty payload). */
export const openToken = (token: string): { payload: Uint8Array; signature: string } | null => {
  if (token.length <= SIGNATURE_CHARS || token.length > MAX_TOKEN_CHARS) return null;
  const payload = base64UrlDecode(token.slice(0, -SIGNATURE_CHARS));
  return payload && payload.length > 0 ? { payload, signature: token.slice(-SIGNATURE_CHARS) } : null;
};

export const linkUrl = (publicBaseUrl: string, path: "u" | "c", token: string) => `${publicBaseUrl.replace(/\/+$/, "")}/${path}/${token}`;
