import { createTestHarness } from "wrangler";

export const ADMIN_TOKEN = "node-test-admin-token";

export type LocalWorker = { origin: string; close: () => Promise<void> };

/**
 * The worker as `wrangler dev` runs it (wrangler.toml: bindings, static assets, the /v1 alias), on a
 * free localhost port, with fresh in-memory storage and the migrations applied.
 */
export const startLocalWorker = async (): Promise<LocalWorker> => {
  const server = createTestHarness({
    root: new URL("../../..", import.meta.url).pathname,
    workers: [{ configPath: "./wrangler.toml", secrets: { ADMIN_TOKEN } }],
  });
  const { url } = await server.listen();
  await server.getWorker().applyD1Migrations("DB");
  return { origin: url.origin, close: () => server.close() };
};
