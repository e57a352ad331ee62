import { idPrefixes } from "../lib/ids";
import type { Signer } from "../lib/signing";
import { linkUrl, openToken, sealToken, utf8 } from "./signed-link";

// The token in every unsubscribe link: opaque, URL-safe, signed, naming the subscriber and the
// campaign. Layout: base64url of a payload, then the 16-byte signature over both ids (22 characters).
// The payload is [1][subscriber ULID, 16 bytes][campaign ULID, 16 bytes] (44 characters: 66 in all)
// for ids the service made; [2][the ids as text, space-separated] for any other (imported) shape.
// No expiry: a link in an old newsletter must keep working; the ids alone say what it may change.

const PURPOSE = "unsubscribe";
const VERSION = 1;
const TEXT_VERSION = 2;
const encoder = new TextEncoder();
const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

export type UnsubscribeTarget = { subscriberId: string; campaignId: string };

/** Crockford base32 digit values by character code (ids are validated against ULID first). */
const DIGIT = new Uint8Array(128);
for (let i = 0; i < CROCKFORD.length; i++) DIGIT[CROCKFORD.charCodeAt(i)] = i;

/**
 * 26 Crockford base32 characters (130 bits, the first two always 0: the first character carries 3)
 * into 16 bytes, five bits at a time; every token of a send packs two ids, so no BigInt here.
 */
const ulidBytes = (ulid: string, out: Uint8Array, offset: number) => {
  let acc = 0;
  let bits = -2;
  let at = offset;
  for (let i = 0; i < ulid.length; i++) {
    acc = ((acc << 5) | (DIGIT[ulid.charCodeAt(i)] ?? 0)) & 0x1fff;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out[at++] = (acc >> bits) & 0xff;
    }
  }
};

/** 16 bytes back into 26 characters: two zero bits in front, then five bits per character. */
const ulidOf = (bytes: Uint8Array, offset: number): string => {
  let acc = 0;
  let bits = 2;
  let out = "";
  for (let i = 0; i < 16; i++) {
    acc = ((acc << 8) | (bytes[offset + i] ?? 0)) & 0x1fff;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += CROCKFORD[(acc >> bits) & 31];
    }
  }
  return out;
};

const ulidPart = (id: string, prefix: string): string | null => {
  const rest = id.startsWith(prefix) ? id.slice(prefix.length) : "";
  return ULID.test(rest) ? rest : null;
};

const signedMessage = (target: UnsubscribeTarget) => `${target.subscriberId}:${target.campaignId}`;

const payloadOf = (target: UnsubscribeTarget): Uint8Array => {
  const subscriber = ulidPart(target.subscriberId, idPrefixes.subscriber);
  const campaign = ulidPart(target.campaignId, idPrefixes.campaign);
  if (subscriber === null || campaign === null) {
    const text = encoder.encode(`${target.subscriberId} ${target.campaignId}`);
    const payload = new Uint8Array(text.length + 1);
    payload[0] = TEXT_VERSION;
    payload.set(text, 1);
    return payload;
  }
  const payload = new Uint8Array(33);
  payload[0] = VERSION;
  ulidBytes(subscriber, payload, 1);
  ulidBytes(campaign, payload, 17);
  return payload;
};

const targetOf = (payload: Uint8Array): UnsubscribeTarget | null => {
  if (payload[0] === VERSION && payload.length === 33) {
    return { subscriberId: `${idPrefixes.subscriber}${ulidOf(payload, 1)}`, campaignId: `${idPrefixes.campaign}${ulidOf(payload, 17)}` };
  }
  if (payload[0] !== TEXT_VERSION) return null;
  try {
    const [subscriberId, campaignId, ...rest] = utf8.decode(payload.subarray(1)).split(" ");
    return subscriberId && campaignId && rest.length === 0 ? { subscriberId, campaignId } : null;
  } catch {
    return null;
  }
};

export const unsubscribeToken = (signer: Signer, target: UnsubscribeTarget): Promise<string> =>
  sealToken(signer, PURPOSE, payloadOf(target), signedMessage(target));

/** The subscriber and campaign a token names, or null when it is malformed, altered or forged. */
export const readUnsubscribeToken = async (signer: Signer, token: string): Promise<UnsubscribeTarget | null> => {
  const opened = openToken(token);
  const target = opened ? targetOf(opened.payload) : null;
  if (!opened || !target) return null;
  return (await signer.verify(PURPOSE, signedMessage(target), opened.signature)) ? target : null;
};

/** The link every campaign message carries, and that `unsubscribe_url` renders. */
export const unsubscribeUrl = (publicBaseUrl: string, token: string) => linkUrl(publicBaseUrl, "u", token);
