import { createTestHarness } from "wrangler";

export const ADMIN_TOKEN = "node-test-admin-token";

export type LocalWorker = { origin: string; close: () => Promise<void> };

/**
 * The worker as `wrangler dev` runs it (wrangler.toml: bindings, static assets, the /v1 alias), on a
 * free localhost port, with fresh in-memory storage and the migrations applied; `vars` are set beside
 * ADMIN_TOKEN (the Resend stand-in's address, say).
 */
export const startLocalWorker = async (vars: Record<string, string> = {}): Promise<LocalWorker> => {
  const server = createTestHarness({
    root: new URL("../../..", import.meta.url).pathname,
    workers: [{ configPath: "./wrangler.toml", secrets: { ADMIN_TOKEN, ...vars } }],
  });
  const { url } = await server.listen();
  await server.getWorker().applyD1Migrations("DB");
  return { origin: url.origin, close: () => server.close() };
};
