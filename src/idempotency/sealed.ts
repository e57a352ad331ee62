const encoder = new TextEncoder();
const decoder = new TextDecoder();
const IV_BYTES = 12;

/**
 * Encrypts the stored answers of a scope whose answers carry secrets: the operator's (a new
 * credential's token is in its create's answer, and nowhere else is it kept in the clear). AES-GCM
 * under a key derived (HKDF) from a secret the database does not hold, so a copy of D1 or KV reveals
 * no token; a replay opens its answer again.
 */
export type Sealer = {
  seal(text: string): Promise<string>;
  open(sealed: string): Promise<string>;
};

export const sealerFrom = async (secret: string, scope: string): Promise<Sealer> => {
  const material = await crypto.subtle.importKey("raw", encoder.encode(secret), "HKDF", false, ["deriveKey"]);
  const key = await crypto.subtle.deriveKey(
    { name: "HKDF", hash: "SHA-256", salt: encoder.encode("newsletter idempotency record"), info: encoder.encode(scope) },
    material,
    { name: "AES-GCM", length: 256 },
    false,
    ["encrypt", "decrypt"],
  );
  return {
    seal: async (text) => {
      const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
      const ciphertext = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, encoder.encode(text)));
      const out = new Uint8Array(IV_BYTES + ciphertext.length);
      out.set(iv);
      out.set(ciphertext, IV_BYTES);
      return out.toBase64();
    },
    open: async (sealed) => {
      const bytes = Uint8Array.fromBase64(sealed);
      const iv = bytes.subarray(0, IV_BYTES);
      return decoder.decode(await crypto.subtle.decrypt({ name: "AES-GCM", iv }, key, bytes.subarray(IV_BYTES)));
    },
  };
};
