import { sha256Hex } from "../lib/crypto";
import { emailKey } from "../lib/email";
import type { Signer } from "../lib/signing";
import { linkUrl, openToken, sealToken, utf8 } from "./signed-link";

// The token in a confirmation (double opt-in) link: opaque, URL-safe, signed, naming the subscriber,
// the newsletter the mail came from, and a digest of the address it was sent to, so that a link
// mailed to an old address confirms nothing once the subscriber's address has changed. Layout:
// base64url of "{subscriber id} {newsletter id} {digest}", then the signature (signed-link.ts).
// No expiry: it can only move a `pending` subscriber at that same address to `active`.

const PURPOSE = "confirm";
const DIGEST_PURPOSE = "confirm-address";
/** A keyed digest is a signature (signing.ts: 16 bytes, base64url). */
const DIGEST_CHARS = 22;
/** Links made before the digest was keyed carry the first 8 bytes of the address's SHA-256, in hex. */
const UNKEYED_DIGEST_CHARS = 16;

export type ConfirmTarget = { subscriberId: string; newsletterId: string; addressDigest: string };

/**
 * The address's digest a link carries: its signature under the service key, case aside (the service
 * compares addresses so), so that whoever holds a link cannot test guesses of the address against
 * it; checked as any signature, so a rotated key keeps it valid as it keeps the link's.
 */
const addressDigest = (signer: Signer, email: string): Promise<string> => signer.sign(DIGEST_PURPOSE, emailKey(email));

/** The link was made for this address (by either digest: links mailed before it was keyed still confirm). */
export const madeForAddress = async (signer: Signer, target: ConfirmTarget, email: string): Promise<boolean> =>
  target.addressDigest.length === UNKEYED_DIGEST_CHARS
    ? target.addressDigest === (await sha256Hex(emailKey(email))).slice(0, UNKEYED_DIGEST_CHARS)
    : signer.verify(DIGEST_PURPOSE, emailKey(email), target.addressDigest);

const signedMessage = (target: ConfirmTarget) => `${target.subscriberId}:${target.newsletterId}:${target.addressDigest}`;

export const confirmToken = async (signer: Signer, subscriber: { id: string; email: string }, newsletterId: string): Promise<string> => {
  const target = { subscriberId: subscriber.id, newsletterId, addressDigest: await addressDigest(signer, subscriber.email) };
  const payload = new TextEncoder().encode(`${target.subscriberId} ${target.newsletterId} ${target.addressDigest}`);
  return sealToken(signer, PURPOSE, payload, signedMessage(target));
};

/** What a token names, or null when it is malformed, altered or forged. */
export const readConfirmToken = async (signer: Signer, token: string): Promise<ConfirmTarget | null> => {
  const opened = openToken(token);
  if (!opened) return null;
  let parts: string[];
  try {
    parts = utf8.decode(opened.payload).split(" ");
  } catch {
    return null;
  }
  const [subscriberId, newsletterId, digest] = parts;
  if (parts.length !== 3 || !subscriberId || !newsletterId || (digest?.length !== DIGEST_CHARS && digest?.length !== UNKEYED_DIGEST_CHARS)) return null;
  const target = { subscriberId, newsletterId, addressDigest: digest };
  return (await signer.verify(PURPOSE, signedMessage(target), opened.signature)) ? target : null;
};

/** The link a confirmation mail carries. */
export const confirmUrl = (publicBaseUrl: string, token: string) => linkUrl(publicBaseUrl, "c", token);
