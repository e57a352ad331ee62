import type { CredentialRow } from "./credentials.repository";

// Cache of credential lookups, so an authenticated request costs no D1 call of its own. Where the
// Cache API works (a custom domain), it is per Cloudflare location: revocation writes the revoked
// row over the entry where it happens (a tombstone, so the next lookup there is refused without D1);
// other locations see it within TTL_SECONDS. On a `*.workers.dev` address the Cache API does nothing
// (Cloudflare's documentation), so there the cache is the worker instance's own memory, with the same
// TTL: the revoking instance refuses at once, the others within TTL_SECONDS.
const TTL_SECONDS = 60;
// A request that read the row just before the revocation committed puts it into the cache after its
// answer (waitUntil). Its put checks for a tombstone first, and the revocation writes its tombstone a
// second time this long after the first, so a put that raced past the check is overwritten too.
const TOMBSTONE_REWRITE_MS = 1_000;
/** The most credentials an instance keeps in memory (the oldest entry goes first). */
const MEMORY_ENTRIES = 1_000;

export type CredentialCache = {
  get(tokenHash: string): Promise<CredentialRow | undefined>;
  /** Caches a live credential, unless a revocation has already left its tombstone there. */
  remember(row: CredentialRow): Promise<void>;
};

const keyFor = (tokenHash: string) => new Request(`https://credential-cache.internal/${tokenHash}`);

const locationGet = async (tokenHash: string): Promise<CredentialRow | undefined> => {
  if (typeof caches === "undefined") return undefined;
  const hit = await caches.default.match(keyFor(tokenHash));
  return hit ? ((await hit.json()) as CredentialRow) : undefined;
};

const locationPut = async (row: CredentialRow): Promise<void> => {
  if (typeof caches === "undefined") return;
  await caches.default.put(keyFor(row.tokenHash), new Response(JSON.stringify(row), { headers: { "Cache-Control": `max-age=${TTL_SECONDS}` } }));
};

const locationCache: CredentialCache = {
  get: locationGet,
  remember: async (row) => {
    if ((await locationGet(row.tokenHash))?.revokedAt != null) return;
    await locationPut(row);
  },
};

const remembered = new Map<string, { row: CredentialRow; until: number }>();

const instanceGet = (tokenHash: string): CredentialRow | undefined => {
  const entry = remembered.get(tokenHash);
  if (entry && entry.until > Date.now()) return entry.row;
  if (entry) remembered.delete(tokenHash);
  return undefined;
};

const instancePut = (row: CredentialRow): void => {
  remembered.delete(row.tokenHash);
  if (remembered.size >= MEMORY_ENTRIES) remembered.delete(remembered.keys().next().value as string);
  remembered.set(row.tokenHash, { row, until: Date.now() + TTL_SECONDS * 1000 });
};

// Look and put with nothing awaited between them: no tombstone can land in between.
const instanceCache: CredentialCache = {
  get: async (tokenHash) => instanceGet(tokenHash),
  remember: async (row) => {
    if (instanceGet(row.tokenHash)?.revokedAt != null) return;
    instancePut(row);
  },
};

/** The cache that works at the address a request came to: the instance's memory on `*.workers.dev`, else the location's Cache API. */
export const credentialCacheFor = (requestUrl: string): CredentialCache =>
  new URL(requestUrl).hostname.endsWith(".workers.dev") ? instanceCache : locationCache;

/**
 * Caches the revoked row in both caches now (a deployment may be reached at both addresses), and in
 * the location's again a moment later, after the answer (`waitUntil`). The instance's memory needs no
 * second write: its look and put (`remember`) have nothing awaited between them.
 */
export const tombstoneCredential = async (row: CredentialRow, waitUntil: (later: Promise<unknown>) => void): Promise<void> => {
  instancePut(row);
  await locationPut(row);
  waitUntil(new Promise((resolve) => setTimeout(resolve, TOMBSTONE_REWRITE_MS)).then(() => locationPut(row)));
};
