// Secrets: set with `wrangler secret put` (and in .dev.vars locally); never in wrangler.toml.
interface Secrets {
  /** Operator API bearer token. When unset, the operator API answers 404. */
  ADMIN_TOKEN?: string;
  /** Optional: replaces the service's own signing key (cursors, unsubscribe links) for signing. */
  CURSOR_SECRET?: string;
  /** Optional: the CURSOR_SECRET before a rotation; what it signed still verifies. */
  CURSOR_SECRET_PREVIOUS?: string;
  /** Resend API key; without it the `resend` integration is not configured. */
  RESEND_API_KEY?: string;
  /** `whsec_…` secret Resend signs its webhooks with; without it POST /webhooks/resend answers 404. */
  RESEND_WEBHOOK_SECRET?: string;
}

interface Env extends Secrets {}

// The one Node.js module the worker uses (with the nodejs_compat flag), declared to the extent used.
declare module "node:async_hooks" {
  export class AsyncLocalStorage<T> {
    run<R>(store: T, fn: () => R): R;
    getStore(): T | undefined;
  }
}

declare namespace Cloudflare {
  interface Env extends Secrets {}
}
