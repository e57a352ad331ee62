import type { CredentialRow } from "./credentials.repository";

// Per-location cache of credential lookups (the Cache API is local to a Cloudflare location).
// Revocation writes the revoked row over the entry where it happens (a tombstone, so the next lookup
// there is refused without D1); other locations see it within TTL_SECONDS.
const TTL_SECONDS = 60;
// A request that read the row just before the revocation committed puts it into the cache after its
// answer (waitUntil). Its put checks for a tombstone first, and the revocation writes its tombstone a
// second time this long after the first, so a put that raced past the check is overwritten too.
const TOMBSTONE_REWRITE_MS = 1_000;

const keyFor = (tokenHash: string) => new Request(`https://credential-cache.internal/${tokenHash}`);

const cache = (): Cache | undefined => (typeof caches === "undefined" ? undefined : caches.default);

const put = (row: CredentialRow) =>
  cache()?.put(
    keyFor(row.tokenHash),
    new Response(JSON.stringify(row), { headers: { "Cache-Control": `max-age=${TTL_SECONDS}` } }),
  );

export const cachedCredential = async (tokenHash: string): Promise<CredentialRow | undefined> => {
  const hit = await cache()?.match(keyFor(tokenHash));
  return hit ? ((await hit.json()) as CredentialRow) : undefined;
};

/** Caches a live credential, unless a revocation has already left its tombstone here. */
export const rememberCredential = async (row: CredentialRow): Promise<void> => {
  const current = await cachedCredential(row.tokenHash);
  if (current?.revokedAt != null) return;
  await put(row);
};

/** Caches the revoked row now, and again a moment later, after the answer (`waitUntil`). */
export const tombstoneCredential = async (row: CredentialRow, waitUntil: (later: Promise<unknown>) => void): Promise<void> => {
  await put(row);
  waitUntil(new Promise((resolve) => setTimeout(resolve, TOMBSTONE_REWRITE_MS)).then(() => put(row)));
};
