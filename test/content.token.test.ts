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
});
