import type { Context } from "hono";
import type { AppEnv } from "../lib/types";
import { secondsLeftInWindow } from "./auth";

/**
 * The client's address as Cloudflare's edge sets it (`CF-Connecting-IP`, which a client cannot set
 * through the edge). Without it (a proxy in front that drops it, or local development) every client
 * shares one bucket, "unknown".
 */
const clientIp = (c: Context<AppEnv>): string => c.req.header("cf-connecting-ip") ?? "unknown";

/**
 * Spends one of the client IP's requests to the public routes of one kind (`PUBLIC_RATE_LIMITER`,
 * a budget per kind); the seconds to wait when none is left. A deployment without the binding is
 * reported by /health and limits nothing here, so /health itself still answers.
 */
export const publicLimitWait = async (c: Context<AppEnv>, kind: "u" | "health"): Promise<number | undefined> => {
  const limiter = c.env.PUBLIC_RATE_LIMITER as RateLimit | undefined;
  if (!limiter) return undefined;
  const { success } = await limiter.limit({ key: `${kind}:${clientIp(c)}` });
  return success ? undefined : secondsLeftInWindow(Number(c.env.PUBLIC_RATE_LIMIT_PERIOD) || 60, Date.now());
};
