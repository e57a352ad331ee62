import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { readUnsubscribeToken, unsubscribeToken, unsubscribeUrl } from "../src/consent/unsubscribe-token";
import { newId } from "../src/lib/ids";
import { signerFor } from "../src/lib/signing";

describe("unsubscribe tokens", () => {
  const signer = signerFor(env);
  const target = { subscriberId: newId("subscriber"), campaignId: newId("campaign") };

  it("are compact, URL-safe and name the subscriber and the campaign", async () => {
    const token = await unsubscribeToken(signer, target);
    expect(token).toMatch(/^[A-Za-z0-9_-]{66}$/);
    expect(await readUnsubscribeToken(signer, token)).toEqual(target);
    expect(unsubscribeUrl("http://localhost:8787/", token)).toBe(`http://localhost:8787/u/${token}`);
  });

  it("keep their layout: links in mail already sent stay readable", async () => {
    // The payload of a fixed pair of ids, byte for byte as the first release encoded it.
    const fixed = { subscriberId: "sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T", campaignId: "cmp_01JD6Q40AAAAAAAAAAAAAAAAAA" };
    const token = await unsubscribeToken(signer, fixed);
    expect(token.slice(0, 44)).toBe("AQGTTXH83E9QslRULM9g4HoBk01yAUpSlKUpSlKUpSlK");
    expect(await readUnsubscribeToken(signer, token)).toEqual(fixed);
    // Every digit in every position survives the round trip, the extremes included.
    for (const ulid of ["00000000000000000000000000", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "0123456789ABCDEFGHJKMNPQRS", "7TVWXYZ0000000000000000000"]) {
      const ids = { subscriberId: `sub_${ulid}`, campaignId: `cmp_${ulid}` };
      const read = await readUnsubscribeToken(signer, await unsubscribeToken(signer, ids));
      expect(read).toEqual(ids);
    }
  });

  it("also carry ids of other shapes", async () => {
    const odd = { subscriberId: "sub_imported42", campaignId: "cmp_x" };
    expect(await readUnsubscribeToken(signer, await unsubscribeToken(signer, odd))).toEqual(odd);
  });

  it("cannot be altered or forged", async () => {
    const token = await unsubscribeToken(signer, target);
    const other = await unsubscribeToken(signer, { ...target, campaignId: newId("campaign") });
    // Another campaign's payload with this token's signature.
    expect(await readUnsubscribeToken(signer, `${other.slice(0, 44)}${token.slice(44)}`)).toBeNull();
    const flipped = `${token.slice(0, 10)}${token[10] === "A" ? "B" : "A"}${token.slice(11)}`;
    expect(await readUnsubscribeToken(signer, flipped)).toBeNull();
    for (const bad of ["", "x", token.slice(1), `${token}A`, "!".repeat(66)]) expect(await readUnsubscribeToken(signer, bad)).toBeNull();
  });

  it("are read in their one encoding: a last character changed only in bits no encoding uses is still altered", async () => {
    const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const token = await unsubscribeToken(signer, target);
    // 22 characters carry the 16-byte signature: the last one's low 4 bits are always 0.
    const last = ALPHABET.indexOf(token.at(-1) as string);
    expect(last % 16).toBe(0);
    for (let low = 1; low < 16; low++) {
      const altered = `${token.slice(0, -1)}${ALPHABET[last + low]}`;
      expect(await readUnsubscribeToken(signer, altered)).toBeNull();
    }
    // (The payload's 44 characters carry its 33 bytes exactly: no spare bits there.)
    expect(await readUnsubscribeToken(signer, token)).toEqual(target);
  });
});
