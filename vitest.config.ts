import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import { unstable_readConfig } from "wrangler";
// @ts-expect-error: a plain .mjs script, shared with wrangler's [build] command, without type declarations.
import { prepareDocsAssets } from "./scripts/docs-assets.mjs";

type QueueConsumer = { queue: string; max_batch_size?: number; max_retries?: number; dead_letter_queue?: string };

export default defineConfig(async () => {
  // The same folder drizzle-kit writes and wrangler applies.
  const migrations = await readD1Migrations("./migrations");
  // wrangler.toml's [assets] folder must exist before the worker starts (the test plugin does not run [build]).
  prepareDocsAssets();
  // The queues' consumers as wrangler.toml deploys them (batch sizes, retries, dead-letter queues),
  // but that no test waits for a batch to fill: every batch timeout 0.
  const queueConsumers = Object.fromEntries(
    unstable_readConfig({ config: "./wrangler.toml" }).queues.consumers.map((c: QueueConsumer) => [
      c.queue,
      { maxBatchSize: c.max_batch_size, maxRetries: c.max_retries, deadLetterQueue: c.dead_letter_queue, maxBatchTimeout: 0 },
    ]),
  );
  return {
    test: {
      // The one-line-per-request access log is noise in test output; errors still print.
      onConsoleLog: (log: string) => !log.startsWith('{"level":"info"'),
      projects: [
        {
          plugins: [
            cloudflareTest({
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                bindings: {
                  TEST_MIGRATIONS: migrations,
                  ADMIN_TOKEN: "test-admin-token-0123456789abcdef0123",
                },
                // A low per-credential limit, so the 429 path is reachable in a test.
                ratelimits: {
                  RATE_LIMITER: { namespace_id: "1001", simple: { limit: 300, period: 60 } },
                  PUBLIC_RATE_LIMITER: { namespace_id: "1002", simple: { limit: 40, period: 60 } },
                },
                queueConsumers,
              },
            }),
          ],
          test: {
            name: "workers",
            include: ["test/*.test.ts"],
            setupFiles: ["./test/setup.ts"],
            testTimeout: 30_000,
            hookTimeout: 30_000,
          },
        },
        {
          // Node-side checks against a locally started worker: the OpenAPI lint and the browser tests.
          test: {
            name: "node",
            environment: "node",
            include: ["test/node/**/*.test.ts"],
            globalSetup: ["./test/node/harness/global-setup.ts"],
            testTimeout: 60_000,
            hookTimeout: 60_000,
          },
        },
      ],
    },
  };
});
