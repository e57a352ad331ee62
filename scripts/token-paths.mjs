// The path of an unsubscribe or confirmation link is its token (a subscriber's consent): `npm run
// dev` shows wrangler's output with such paths as `/u/{token}`, `/u/{token}/resubscribe` and
// `/c/{token}`, as the service's own log does. A token ends where the path does in wrangler's lines
// (whitespace) and where a JSON string does in the service's (a quote), so nothing after it is lost.
const TOKEN_PATHS = /\/(u|c|%75|%63)\/[^\s"]+?(\/resubscribe)?(?=[\s"]|$)/gi;

/** `text` with every link token in it replaced by `{token}`. */
export const maskTokenPaths = (text) =>
  text.replace(TOKEN_PATHS, (_, kind, tail = "") => `/${decodeURIComponent(kind).toLowerCase()}/{token}${tail}`);
