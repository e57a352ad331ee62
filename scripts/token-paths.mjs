// The path of an unsubscribe or confirmation link is its token (a subscriber's consent): `npm run
// dev` shows wrangler's output with such paths as `/u/{token}`, `/u/{token}/resubscribe` and
// `/c/{token}`, as the service's own log does, in whatever shape the link came (any letter case,
// `u` or `c` percent-escaped, slashes doubled or escaped), and any token-shaped path segment as
// `{token}`. A token ends where the path does in wrangler's lines (whitespace) and where a JSON
// string does in the service's (a quote), so nothing after it is lost.
const TOKEN_PATHS = /(?<!\/)\/+(u|c|%75|%63|%55|%43)(?:\/|%2f)+[^\s"]+?(\/resubscribe)?(?=[\s"]|$)/gi;
/** A run after a slash long enough to be a token (66 characters; the service's ids are at most 31). */
const TOKEN_SHAPED = /(?<=\/)[A-Za-z0-9_-]{40,}/g;

/** `text` with every link token in it replaced by `{token}`. */
export const maskTokenPaths = (text) =>
  text
    .replace(TOKEN_PATHS, (_, kind, tail = "") => `/${decodeURIComponent(kind).toLowerCase()}/{token}${tail}`)
    .replace(TOKEN_SHAPED, "{token}");
