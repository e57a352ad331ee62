import { monotonicFactory } from "ulidx";

export const idPrefixes = {
  workspace: "ws_",
  subscriber: "sub_",
  campaign: "cmp_",
  operation: "op_",
  newsletter: "nl_",
  segment: "seg_",
  delivery: "dlv_",
  credential: "cred_",
  request: "req_",
} as const;

export type IdKind = keyof typeof idPrefixes;

// Monotonic within a millisecond, so ids created by one isolate sort in creation order.
const nextUlid = monotonicFactory();

export const newId = (kind: IdKind, now: number = Date.now()): string => `${idPrefixes[kind]}${nextUlid(now)}`;
