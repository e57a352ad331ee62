/**
 * zod's entry point without its locales. zod's `z` namespace re-exports the translations of its error
 * messages into some forty languages, and @hono/zod-openapi hands that namespace around whole, so
 * every translation lands in the bundle (about a quarter of it). This service writes its own messages
 * (src/errors/zod-messages.ts) and uses none of them. wrangler.toml aliases "zod" to this module for
 * the deployable bundle; the English defaults zod registers for itself are untouched.
 */
import * as z from "./external";

export * from "./external";
export { z, z as default };
