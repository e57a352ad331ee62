import { encodeTime, monotonicFactory } from "ulidx";

export const idPrefixes = {
  workspace: "ws_",
  subscriber: "sub_",
  campaign: "cmp_",
  operation: "op_",
  newsletter: "nl_",
  segment: "seg_",
  delivery: "dlv_",
  credential: "cred_",
  event: "evt_",
  webhook_endpoint: "we_",
  webhook_attempt: "wa_",
  request: "req_",
  /** A test send's message: not a delivery, so never `dlv_` (nothing is recorded for it). */
  test_message: "tmsg_",
} as const;

export type IdKind = keyof typeof idPrefixes;

/** What an id of `kind` the service made looks like: its prefix and 1 to 64 letters and digits (for its own queue messages). */
export const idPattern = (kind: IdKind): RegExp => new RegExp(`^${idPrefixes[kind]}[0-9A-Za-z]{1,64}$`);

/**
 * What a client may name as an id of `kind` (a path or query parameter): anything with its prefix, the
 * specification's pattern (ids are opaque). A wrong prefix is a 400; `sub_does_not_exist` names no
 * subscriber, a 404 like any id that is not found.
 */
export const prefixPattern = (kind: IdKind): RegExp => new RegExp(`^${idPrefixes[kind]}`);

// ulidx's default generator asks the CSPRNG for one byte per character (16 calls per id, every
// request makes at least one id); drawing the same bytes 256 at a time keeps them cryptographic.
const pool = new Uint8Array(256);
let drawn = pool.length;
const pooledRandom = (): number => {
  if (drawn === pool.length) {
    crypto.getRandomValues(pool);
    drawn = 0;
  }
  // In [0, 1), as Math.random: each of the 32 characters is drawn from exactly 8 byte values.
  return (pool[drawn++] as number) / 256;
};

// Monotonic within a millisecond, so ids created by one isolate sort in creation order.
const nextUlid = monotonicFactory(pooledRandom);

export const newId = (kind: IdKind, now: number = Date.now()): string => `${idPrefixes[kind]}${nextUlid(now)}`;

/** Below every id of `kind` made at `time` or later (ULIDs sort by their time): a range bound on a primary key. */
export const idFloor = (kind: IdKind, time: number): string => `${idPrefixes[kind]}${encodeTime(time, 10)}`;
