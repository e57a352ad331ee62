import { base64UrlDecode, base64UrlEncode } from "../lib/crypto";
import { idPrefixes } from "../lib/ids";
import type { Signer } from "../lib/signing";

// The token in every unsubscribe link: opaque, URL-safe, signed, naming the subscriber and the
// campaign. Layout: base64url of [version 1][subscriber ULID, 16 bytes][campaign ULID, 16 bytes]
// (44 characters), then the 16-byte signature over both ids (22 characters): 66 characters in all.
// No expiry: a link in an old newsletter must keep working; the ids alone say what it may change.

const PURPOSE = "unsubscribe";
const VERSION = 1;
const PAYLOAD_CHARS = 44;
const SIGNATURE_CHARS = 22;
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

export type UnsubscribeTarget = { subscriberId: string; campaignId: string };

/** 26 Crockford base32 characters (128 bits, the first character carrying 3) into 16 bytes. */
const ulidBytes = (ulid: string, out: Uint8Array, offset: number) => {
  let value = 0n;
  for (const ch of ulid) value = (value << 5n) | BigInt(CROCKFORD.indexOf(ch));
  for (let i = 15; i >= 0; i--) {
    out[offset + i] = Number(value & 0xffn);
    value >>= 8n;
  }
};

const ulidOf = (bytes: Uint8Array, offset: number): string => {
  let value = 0n;
  for (let i = 0; i < 16; i++) value = (value << 8n) | BigInt(bytes[offset + i] ?? 0);
  let out = "";
  for (let i = 0; i < 26; i++) {
    out = CROCKFORD[Number(value & 31n)] + out;
    value >>= 5n;
  }
  return out;
};

const ulidPart = (id: string, prefix: string): string | null => {
  const rest = id.startsWith(prefix) ? id.slice(prefix.length) : "";
  return ULID.test(rest) ? rest : null;
};

const signedMessage = (target: UnsubscribeTarget) => `${target.subscriberId}:${target.campaignId}`;

export const unsubscribeToken = async (signer: Signer, target: UnsubscribeTarget): Promise<string> => {
  const subscriber = ulidPart(target.subscriberId, idPrefixes.subscriber);
  const campaign = ulidPart(target.campaignId, idPrefixes.campaign);
  if (subscriber === null || campaign === null) throw new Error("unsubscribe tokens name a subscriber and a campaign by their ids");
  const payload = new Uint8Array(33);
  payload[0] = VERSION;
  ulidBytes(subscriber, payload, 1);
  ulidBytes(campaign, payload, 17);
  return `${base64UrlEncode(payload)}${await signer.sign(PURPOSE, signedMessage(target))}`;
};

/** The subscriber and campaign a token names, or null when it is malformed, altered or forged. */
export const readUnsubscribeToken = async (signer: Signer, token: string): Promise<UnsubscribeTarget | null> => {
  if (token.length !== PAYLOAD_CHARS + SIGNATURE_CHARS) return null;
  const payload = base64UrlDecode(token.slice(0, PAYLOAD_CHARS));
  if (!payload || payload.length !== 33 || payload[0] !== VERSION) return null;
  const target = {
    subscriberId: `${idPrefixes.subscriber}${ulidOf(payload, 1)}`,
    campaignId: `${idPrefixes.campaign}${ulidOf(payload, 17)}`,
  };
  return (await signer.verify(PURPOSE, signedMessage(target), token.slice(PAYLOAD_CHARS))) ? target : null;
};

/** The link every campaign message carries, and that `unsubscribe_url` renders. */
export const unsubscribeUrl = (publicBaseUrl: string, token: string) => `${publicBaseUrl.replace(/\/+$/, "")}/u/${token}`;
