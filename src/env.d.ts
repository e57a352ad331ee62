// Secrets: set with `wrangler secret put` (and in .dev.vars locally); never in wrangler.toml.
interface Secrets {
  /** Operator API bearer token. When unset, the operator API answers 404. */
  ADMIN_TOKEN?: string;
  /** HMAC key that makes pagination cursors tamper-evident. */
  CURSOR_SECRET?: string;
  /** Resend API key; without it the `resend` integration is not configured. */ RESEND_API_KEY?: string;
}

interface Env extends Secrets {}

declare namespace Cloudflare {
  interface Env extends Secrets {}
}
