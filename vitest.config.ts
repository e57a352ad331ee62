import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig(async () => {
  // The same folder drizzle-kit writes and wrangler applies.
  const migrations = await readD1Migrations("./migrations");
  return {
    plugins: [
      cloudflareTest({
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          bindings: {
            TEST_MIGRATIONS: migrations,
            ADMIN_TOKEN: "test-admin-token",
          },
          // A low per-credential limit, so the 429 path is reachable in a test.
          ratelimits: { RATE_LIMITER: { namespace_id: "1001", simple: { limit: 300, period: 60 } } },
          queueConsumers: {
            "newsletter-send": { maxBatchTimeout: 0, maxRetries: 10, deadLetterQueue: "newsletter-send-dlq" },
            "newsletter-send-dlq": { maxBatchTimeout: 0 },
            "newsletter-webhooks": { maxBatchTimeout: 0, maxRetries: 5, deadLetterQueue: "newsletter-webhooks-dlq" },
            "newsletter-webhooks-dlq": { maxBatchTimeout: 0 },
          },
        },
      }),
    ],
    test: {
      setupFiles: ["./test/setup.ts"],
      testTimeout: 30_000,
      // The one-line-per-request access log is noise in test output; errors still print.
      onConsoleLog: (log: string) => !log.startsWith('{"level":"info"'),
      hookTimeout: 30_000,
    },
  };
});
