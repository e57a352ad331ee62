import { describe, expect, it } from "vitest";
import { unstable_readConfig } from "wrangler";

// The workerd tests run with their own, smaller limits (vitest.config.ts); what a deployment gets is
// wrangler.toml's, read here as wrangler reads it.
const config = unstable_readConfig({ config: new URL("../../wrangler.toml", import.meta.url).pathname });

describe("wrangler.toml", () => {
  it("limits each credential to 1,000 requests a minute and each client IP to 600 on the public routes, with the periods Retry-After counts in", () => {
    const limits = Object.fromEntries((config.ratelimits as { name: string; simple: unknown }[]).map((r) => [r.name, r.simple]));
    expect(limits).toEqual({ RATE_LIMITER: { limit: 1000, period: 60 }, PUBLIC_RATE_LIMITER: { limit: 600, period: 60 } });
    expect(config.vars).toMatchObject({ RATE_LIMIT_PERIOD: "60", PUBLIC_RATE_LIMIT_PERIOD: "60" });
  });
});
