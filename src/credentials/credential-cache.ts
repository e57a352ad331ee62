import type { CredentialRow } from "./credentials.repository";

// Per-location cache of credential lookups (the Cache API is local to a Cloudflare location).
// Revocation deletes the entry where it happens; other locations see it within TTL_SECONDS.
const TTL_SECONDS = 60;
const keyFor = (tokenHash: string) => new Request(`https://credential-cache.internal/${tokenHash}`);

const cache = (): Cache | undefined => (typeof caches === "undefined" ? undefined : caches.default);

export const cachedCredential = async (tokenHash: string): Promise<CredentialRow | undefined> => {
  const hit = await cache()?.match(keyFor(tokenHash));
  return hit ? ((await hit.json()) as CredentialRow) : undefined;
};

export const rememberCredential = async (row: CredentialRow): Promise<void> => {
  await cache()?.put(
    keyFor(row.tokenHash),
    new Response(JSON.stringify(row), { headers: { "Cache-Control": `max-age=${TTL_SECONDS}` } }),
  );
};

export const forgetCredential = async (tokenHash: string): Promise<void> => {
  await cache()?.delete(keyFor(tokenHash));
};
