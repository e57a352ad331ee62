import { applyD1Migrations, reset } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeEach } from "vitest";

// The service's signing key, one for the whole file: the migrations make a fresh one for every
// test's database, while an isolate reads it once per binding (src/lib/signing.ts), and the binding
// lives as long as the file. A deployment keeps one key for its database; so does a test file.
const signingKey = [...crypto.getRandomValues(new Uint8Array(32))].map((b) => b.toString(16).padStart(2, "0")).join("");

// Storage is isolated per file, not per test: every test starts from an empty, migrated database.
beforeEach(async () => {
  await reset();
  await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
  await env.DB.prepare("UPDATE service_keys SET secret = ? WHERE name = 'signing'").bind(signingKey).run();
});
