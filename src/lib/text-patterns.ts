/**
 * The text rules of src/lib/schemas.ts written as JSON Schema `pattern`s (ECMA-262, anchored here), so
 * /openapi.json accepts exactly the strings the service accepts. `minLength`/`maxLength` cannot say
 * it: they measure the text before trimming. Every pattern works with and without the `u` flag
 * (validators differ): a surrogate pair is matched as a pair, a lone surrogate never, and
 * quantifiers count characters (code points), as the service does.
 */

/** What String.prototype.trim removes, less the control characters that are rejected anyway. */
const WHITESPACE = "\\t\\n\\r \\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF";
const CONTROL = "\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F";
const PAIR = "[\\uD800-\\uDBFF][\\uDC00-\\uDFFF]";

const WS = `[${WHITESPACE}]`;
/** Any character a body string may hold. */
const CHAR = `(?:${PAIR}|[^${CONTROL}\\uD800-\\uDFFF])`;
/** A character that survives trimming at either end. */
const VISIBLE = `(?:${PAIR}|[^${CONTROL}${WHITESPACE}\\u0020\\uD800-\\uDFFF])`;

/** Non-blank text of at most `max` characters once trimmed (max ≥ 2). */
const trimmedCore = (max: number) => `${VISIBLE}(?:${CHAR}{0,${max - 2}}${VISIBLE})?`;

/** Required text: 1 to `max` characters after trimming. */
export const requiredTextPattern = (max: number) => `^${WS}*${trimmedCore(max)}${WS}*$`;

/** Optional text: blank (none), or at most `max` characters after trimming. */
export const optionalTextPattern = (max: number) => `^${WS}*(?:${trimmedCore(max)}${WS}*)?$`;

/** A character of one-line text: no line break (nor a Unicode line or paragraph separator). */
const LINE_CHAR = `(?:${PAIR}|[^${CONTROL}\\n\\r\\u2028\\u2029\\uD800-\\uDFFF])`;

/** One line of 1 to `max` characters once trimmed (max ≥ 2). */
const lineCore = (max: number) => `${VISIBLE}(?:${LINE_CHAR}{0,${max - 2}}${VISIBLE})?`;

/** Optional one-line text: blank (none), or at most `max` characters after trimming, with no line break inside. */
export const optionalLinePattern = (max: number) => `^${WS}*(?:${lineCore(max)}${WS}*)?$`;

/** Required one-line text: 1 to `max` characters after trimming, with no line break inside. */
export const requiredLinePattern = (max: number) => `^${WS}*${lineCore(max)}${WS}*$`;

/** Untrimmed text of any length (its limit stated elsewhere, e.g. in bytes). */
export const anyTextPattern = `^${CHAR}*$`;

/** Untrimmed text of `min` to `max` characters. */
export const rawTextPattern = (min: number, max: number) => `^${CHAR}{${min},${max}}$`;

// ---- Email (src/lib/email.ts) ----------------------------------------------------------------

const ATEXT = "[A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~]+";
const LOCAL = `(?:${ATEXT}(?:\\.${ATEXT})*|"(?:[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]|\\\\[\\x20-\\x7E])*")`;
const LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const IPV4 = `${OCTET}(?:\\.${OCTET}){3}`;
const H16 = "[0-9A-Fa-f]{1,4}";
const LS32 = `(?:${H16}:${H16}|${IPV4})`;
// RFC 3986's IPv6address, which is what the URL parser the service uses accepts.
const IPV6 = [
  `(?:${H16}:){6}${LS32}`,
  `::(?:${H16}:){5}${LS32}`,
  `(?:${H16})?::(?:${H16}:){4}${LS32}`,
  `(?:(?:${H16}:){0,1}${H16})?::(?:${H16}:){3}${LS32}`,
  `(?:(?:${H16}:){0,2}${H16})?::(?:${H16}:){2}${LS32}`,
  `(?:(?:${H16}:){0,3}${H16})?::${H16}:${LS32}`,
  `(?:(?:${H16}:){0,4}${H16})?::${LS32}`,
  `(?:(?:${H16}:){0,5}${H16})?::${H16}`,
  `(?:(?:${H16}:){0,6}${H16})?::`,
].join("|");
const DOMAIN = `(?:${LABEL}(?:\\.${LABEL})*|\\[${IPV4}\\]|\\[[Ii][Pp][Vv]6:(?:${IPV6})\\])`;
/** At most 254 characters in all and 64 before the last @ (lookaheads), then the address itself. */
const ADDRESS = `(?=[\\x20-\\x7E]{1,254}${WS}*$)(?=[\\x20-\\x7E]{1,64}@[^@]*$)${LOCAL}@${DOMAIN}`;

export const emailPattern = `^${WS}*${ADDRESS}${WS}*$`;
export const optionalEmailPattern = `^${WS}*(?:${ADDRESS}${WS}*)?$`;

// A webhook endpoint URL: https to a host name (its last label starts with a letter, so it is never
// read as a number; a final dot, the fully qualified form, allowed), a dotted-quad IPv4 address or a
// bracketed IPv6 address, or http to localhost / 127.0.0.1 (development); scheme and host in any case,
// as URLs are; an optional port up to 65535, path and query of URL characters; no user info, fragment
// or whitespace. Every string this matches is one the WHATWG URL parser accepts as is.
const TOP_LABEL = "[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
const PORT = "(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4}))?";
const URL_CHARS = "[A-Za-z0-9._~!$&'()*+,;=:@%/?-]";
/** `word` in any letter case, written out (patterns carry no flags). */
const anyCase = (word: string) => [...word].map((ch) => (/[a-z]/.test(ch) ? `[${ch.toUpperCase()}${ch}]` : ch)).join("");
export const webhookUrlPattern =
  `^(?:${anyCase("https")}://(?:(?:${LABEL}\\.)*${TOP_LABEL}\\.?|${IPV4}|\\[(?:${IPV6})\\])|${anyCase("http")}://(?:${anyCase("localhost")}|127\\.0\\.0\\.1))` +
  `${PORT}(?:[/?]${URL_CHARS}*)?$`;
