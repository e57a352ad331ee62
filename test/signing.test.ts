import { env } from "cloudflare:workers";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { base64UrlEncode } from "../src/lib/crypto";
import { signerFor } from "../src/lib/signing";

// The service's signatures (cursors, unsubscribe links) are HMAC-SHA256 of "purpose\nmessage" under
// its key, cut to 16 bytes, base64url: the layout every link already mailed carries, checked here
// against a reference computed in the test.

const encoder = new TextEncoder();

const reference = async (secret: string, purpose: string, message: string) => {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const full = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(`${purpose}\n${message}`)));
  return base64UrlEncode(full.subarray(0, 16));
};

describe("signatures", () => {
  it("are WebCrypto's HMAC-SHA256, for any key length and message", async () => {
    await fc.assert(
      fc.asyncProperty(
        // Keys shorter and longer than SHA-256's 64-byte block (a longer one is hashed first).
        fc.string({ minLength: 1, maxLength: 150, unit: "binary" }),
        fc.constantFrom("unsubscribe", "cursor"),
        fc.string({ maxLength: 300, unit: "binary" }),
        async (secret, purpose, message) => {
          const signer = signerFor({ DB: env.DB, CURSOR_SECRET: secret });
          const signature = await signer.sign(purpose, message);
          expect(signature).toBe(await reference(secret, purpose, message));
          expect(await signer.verify(purpose, message, signature)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("are checked whole: another purpose, message, key or any changed byte does not verify", async () => {
    const signer = signerFor({ DB: env.DB, CURSOR_SECRET: "one-key" });
    const signature = await signer.sign("unsubscribe", "sub_1:cmp_1");
    expect(await signer.verify("cursor", "sub_1:cmp_1", signature)).toBe(false);
    expect(await signer.verify("unsubscribe", "sub_1:cmp_2", signature)).toBe(false);
    expect(await signerFor({ DB: env.DB, CURSOR_SECRET: "another-key" }).verify("unsubscribe", "sub_1:cmp_1", signature)).toBe(false);
    for (let i = 0; i < signature.length; i++) {
      const changed = `${signature.slice(0, i)}${signature[i] === "A" ? "B" : "A"}${signature.slice(i + 1)}`;
      expect(await signer.verify("unsubscribe", "sub_1:cmp_1", changed)).toBe(false);
    }
    // The same signer twice in a row: a signature leaves the key's state as it was.
    expect(await signer.sign("unsubscribe", "sub_1:cmp_1")).toBe(signature);
  });
});

describe("the signing key", () => {
  // A request never waits on a key read another request started: that request's I/O ends with it
  // (a client that goes away), and the runtime cancels as hung whoever waits on what only it could settle.
  it("is read by each request that needs it before the instance has it, never shared while loading", async () => {
    await signerFor({ DB: env.DB }).sign("cursor", "make sure the key exists");
    let reads = 0;
    const stalled = new Proxy(env.DB, {
      get(target, property) {
        if (property !== "prepare") return Reflect.get(target, property, target);
        return (sql: string) => {
          const statement = target.prepare(sql);
          if (!sql.includes("service_keys")) return statement;
          return new Proxy(statement, {
            get(inner, name) {
              if (name !== "bind") return Reflect.get(inner, name, inner);
              return (...values: unknown[]) => {
                const bound = inner.bind(...values);
                // The first read never answers (its request was cancelled); later ones do.
                const first = reads++ === 0 ? () => new Promise(() => {}) : bound.first.bind(bound);
                return new Proxy(bound, { get: (b, n) => (n === "first" ? first : Reflect.get(b, n, b)) });
              };
            },
          });
        };
      },
    }) as D1Database;
    const signer = signerFor({ DB: stalled });
    void signer.sign("cursor", "the request whose read never answers");
    const timeout = new Promise<string>((resolve) => setTimeout(() => resolve("waited on the other request's read"), 2_000));
    const second = await Promise.race([signer.sign("cursor", "another request"), timeout]);
    expect(second).toBe(await signerFor({ DB: env.DB }).sign("cursor", "another request"));
    expect(reads).toBe(2);
    // Once read, the key is kept: no more reads.
    await signer.sign("cursor", "a third");
    expect(reads).toBe(2);
  });
});
