import { publicOrigin } from "../lib/public-origin";
// Where webhook endpoints may point. The static rules (https, or http to localhost in development; no
// user info) are the schema's pattern (webhookUrlPattern in src/lib/text-patterns.ts). Workers cannot
// resolve DNS, so the live-mode rule is a check of literal addresses: a public name that resolves to a
// private address is not caught here.

export const URL_MAX_LENGTH = 2048;

const URL_RULE =
  "must be an https URL to a host name, an IPv4 address or a bracketed IPv6 address (http only for localhost and 127.0.0.1, in local development), without user info, fragment or spaces";

/**
 * What is wrong with a URL the schema's pattern refused, the first rule it breaks named where one can
 * be told apart (the pattern decides; this only words the answer), else every rule at once.
 */
export const urlShapeProblem = (value: unknown): string => {
  if (typeof value !== "string") return URL_RULE;
  if (/\s/.test(value)) return "must not contain spaces or other whitespace (percent-encode them: %20)";
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(value)?.[1]?.toLowerCase();
  if (scheme === undefined || !value.slice(scheme.length + 1).startsWith("//")) return "must start with https:// (an absolute URL)";
  if (scheme === "http") return "must use https (http only for localhost and 127.0.0.1, in local development)";
  if (scheme !== "https") return `must use https, not ${scheme}:`;
  if (value.includes("#")) return "must not hold a fragment (#…): it is never sent to the server";
  const authority = value.slice("https://".length).split(/[/?]/, 1)[0] ?? "";
  if (authority.includes("@")) return "must not hold user info (user:password@): put a secret in the path or query, or verify our signature";
  const port = /:(\d+)$/.exec(authority.replace(/^\[[^\]]*\]/, ""))?.[1];
  if (port !== undefined && Number(port) > 65535) return `has port ${port}, past 65535`;
  return URL_RULE;
};

/**
 * Hosts that name this machine or a private network: what a live credential, or any credential on
 * a deployed service, may not point an endpoint at. Undefined for a public host.
 */
export const nonPublicUrlProblem = (value: string): string | undefined => {
  // A fully qualified name's final dot names the same host (`localhost.` is localhost).
  const url = new URL(value);
  // Port 0 reaches nothing anywhere; refused as the addresses below are.
  if (url.port === "0") return "must not use port 0";
  const host = url.hostname.replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost")) return "must not point to localhost";
  const v4 = parseIpv4(host);
  if (v4 && isNonPublicIpv4(v4)) return `must not point to a non-public address (private, loopback, link-local, shared, documentation or multicast: ${host})`;
  if (host.startsWith("[")) {
    const v6 = parseIpv6(host.slice(1, -1));
    if (!v6 || isNonPublicIpv6(v6)) return `must not point to a non-public address (private, loopback, link-local, shared, documentation or multicast: ${host})`;
  }
  return undefined;
};

/**
 * This machine (localhost, `*.localhost`, 127.0.0.0/8, `::1`, and IPv4 loopback inside IPv6): where
 * a receiver under development listens. Any port but 0.
 */
export const isLoopbackUrl = (value: string): boolean => {
  const url = new URL(value);
  if (url.port === "0") return false;
  const host = url.hostname.replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost")) return true;
  const v4 = parseIpv4(host);
  if (v4) return v4[0] === 127;
  if (!host.startsWith("[")) return false;
  const v6 = parseIpv6(host.slice(1, -1));
  if (!v6) return false;
  const [g0, g1, g2, g3, g4, g5, g6 = 0, g7 = 0] = v6;
  if (g0 || g1 || g2 || g3 || g4) return false;
  return (g5 === 0 && g6 === 0 && g7 === 1) || (g5 === 0xffff && g6 >> 8 === 127);
};

/**
 * A local development deployment: its PUBLIC_BASE_URL (the origin it is reached at) is itself local
 * or private, as under `wrangler dev`. Only there may endpoints point at local addresses (a live
 * credential's at this machine only); a deployed service delivers every workspace's events to them.
 * A PUBLIC_BASE_URL that is no origin counts as deployed (the stricter rule).
 */
export const isDevelopmentDeployment = (env: Pick<Env, "PUBLIC_BASE_URL">): boolean => {
  const found = publicOrigin(env);
  return "origin" in found && nonPublicUrlProblem(found.origin) !== undefined;
};

// The URL parser has already normalised IPv4 literals (0x7f.1, 2130706433 → 127.0.0.1).
const parseIpv4 = (host: string): number[] | undefined => {
  const parts = host.split(".");
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p))) return undefined;
  const bytes = parts.map(Number);
  return bytes.every((b) => b <= 255) ? bytes : undefined;
};

const isNonPublicIpv4 = ([a = 0, b = 0, c = 0]: number[]) =>
  a === 0 || // "this" network
  a === 10 || // private
  a === 127 || // loopback
  (a === 100 && b >= 64 && b <= 127) || // carrier-grade NAT
  (a === 169 && b === 254) || // link-local (cloud metadata lives here)
  (a === 172 && b >= 16 && b <= 31) || // private
  (a === 192 && b === 168) || // private
  (a === 192 && b === 0 && (c === 0 || c === 2)) || // IETF protocol assignments, documentation (TEST-NET-1)
  (a === 198 && b === 51 && c === 100) || // documentation (TEST-NET-2)
  (a === 203 && b === 0 && c === 113) || // documentation (TEST-NET-3)
  (a === 198 && (b === 18 || b === 19)) || // benchmarking
  (a === 192 && b === 88 && c === 99) || // 6to4 relay anycast (deprecated)
  a >= 224; // multicast, reserved, broadcast

/** Eight 16-bit groups, or undefined. */
const parseIpv6 = (text: string): number[] | undefined => {
  let head = text;
  let tail: number[] = [];
  // An embedded IPv4 tail (the URL parser rewrites it to hex, but be safe).
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(head);
  if (v4?.[1]) {
    const bytes = parseIpv4(v4[1]);
    if (!bytes) return undefined;
    tail = [((bytes[0] ?? 0) << 8) | (bytes[1] ?? 0), ((bytes[2] ?? 0) << 8) | (bytes[3] ?? 0)];
    head = head.slice(0, -v4[1].length).replace(/:$/, "") || "";
    if (head.endsWith(":")) head += ":";
  }
  const halves = head.split("::");
  if (halves.length > 2) return undefined;
  const groups = (part: string | undefined) => (part ? part.split(":").map((g) => parseInt(g, 16)) : []);
  const left = groups(halves[0]);
  const right = [...groups(halves[1]), ...tail];
  const missing = 8 - left.length - right.length;
  if (halves.length === 1 ? missing !== 0 : missing < 0) return undefined;
  const all = [...left, ...new Array<number>(Math.max(0, missing)).fill(0), ...right];
  return all.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? all : undefined;
};

const bytesOf = (high: number, low: number) => [high >> 8, high & 0xff, low >> 8, low & 0xff];

/**
 * Not public: the IPv6 ranges that are private, local or special, and every form that carries an IPv4
 * address inside (mapped, compatible, translated, NAT64, 6to4), judged by that address.
 */
const isNonPublicIpv6 = (g: number[]) => {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const embedded = bytesOf(g6, g7);
  if (g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0) {
    if (g4 === 0 && g5 === 0) return true; // ::, ::1 and IPv4-compatible ::a.b.c.d (deprecated; never public)
    if (g4 === 0 && g5 === 0xffff) return isNonPublicIpv4(embedded); // IPv4-mapped ::ffff:a.b.c.d
    if (g4 === 0xffff && g5 === 0) return isNonPublicIpv4(embedded); // IPv4-translated ::ffff:0:a.b.c.d
  }
  if (g0 === 0x64 && g1 === 0xff9b) return g2 !== 0 || g3 !== 0 || g4 !== 0 || g5 !== 0 || isNonPublicIpv4(embedded); // NAT64 64:ff9b::/96 (and the local-use /48)
  if (g0 === 0x2002) return isNonPublicIpv4(bytesOf(g1, g2)); // 6to4 2002:a.b.c.d::/48
  if (g0 < 0x100) return true; // the rest of ::/8, reserved by the IETF: never routed
  return (
    (g0 === 0x100 && g1 === 0 && g2 === 0 && g3 === 0) || // discard-only 100::/64
    (g0 === 0x2001 && g1 < 0x200) || // IETF protocol assignments 2001::/23: Teredo (an IPv4 inside), benchmarking, ORCHID, …
    (g0 === 0x2001 && g1 === 0xdb8) || // documentation 2001:db8::/32
    (g0 === 0x3fff && g1 < 0x1000) || // documentation 3fff::/20
    (g0 & 0xfe00) === 0xfc00 || // unique local fc00::/7
    (g0 & 0xffc0) === 0xfe80 || // link-local fe80::/10
    (g0 & 0xffc0) === 0xfec0 || // site-local fec0::/10 (deprecated)
    (g0 & 0xff00) === 0xff00 // multicast
  );
};
