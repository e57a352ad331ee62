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
const DIGEST_CHARS = 16;

export type ConfirmTarget = { subscriberId: string; newsletterId: string; addressDigest: string };

/** The first 8 bytes of the address's SHA-256, case aside (the service compares addresses so). */
export const addressDigest = async (email: string): Promise<string> => (await sha256Hex(emailKey(email))).slice(0, DIGEST_CHARS);

const signedMessage = (target: ConfirmTarget) => `${target.subscriberId}:${target.newsletterId}:${target.addressDigest}`;

export const confirmToken = async (signer: Signer, subscriber: { id: string; email: string }, newsletterId: string): Promise<string> => {
  const target = { subscriberId: subscriber.id, newsletterId, addressDigest: await addressDigest(subscriber.email) };
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
  if (parts.length !== 3 || !subscriberId || !newsletterId || digest?.length !== DIGEST_CHARS) return null;
  const target = { subscriberId, newsletterId, addressDigest: digest };
  return (await signer.verify(PURPOSE, signedMessage(target), opened.signature)) ? target : null;
};

/** The link a confirmation mail carries. */
export const confirmUrl = (publicBaseUrl: string, token: string) => linkUrl(publicBaseUrl, "c", token);
