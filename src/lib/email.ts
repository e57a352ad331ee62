/**
 * Email addresses: the RFC 5322 addr-spec (§3.4.1) without its obsolete forms and without comments or
 * folding whitespace, narrowed by what RFC 5321 (SMTP) can actually deliver:
 *
 *   addr-spec  = local-part "@" domain
 *   local-part = dot-atom / quoted-string
 *   domain     = dot-atom / domain-literal
 *
 * - ASCII only. RFC 5322 is ASCII; internationalised addresses (RFC 6531) need SMTPUTF8 end to end,
 *   which this service does not promise, so `ü@example.com` and `a@exämple.com` are both rejected.
 * - At most 64 octets before the `@` and 254 in all (RFC 5321 §4.5.3.1 and its 256-octet path
 *   limit less the angle brackets).
 * - A dot-atom domain must also be a hostname (RFC 1035 / RFC 5321 §4.1.2): labels of 1 to 63
 *   letters, digits and hyphens, neither starting nor ending with a hyphen. RFC 5322 alone would
 *   accept `a@-example.com` or `a@ex_ample.com`, but mail cannot be routed to such a domain. A single
 *   label (`a@localhost`) is a valid addr-spec and is accepted.
 * - A domain-literal must be an RFC 5321 §4.1.3 address literal: `[192.168.0.1]` or
 *   `[IPv6:2001:db8::1]`; other bracketed text names no host.
 * - A quoted local part uses RFC 5321's quoted-string (printable ASCII and space, `\` escaping any of
 *   them): `"john doe"@example.com`. A tab, allowed by RFC 5322 as whitespace, cannot travel in SMTP.
 */

// RFC 5322 §3.2.3 atext.
const ATEXT = "[A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~]+";
const DOT_ATOM = new RegExp(`^${ATEXT}(?:\\.${ATEXT})*$`);
// RFC 5321 §4.1.2 quoted-string: qtextSMTP is %d32-33 / %d35-91 / %d93-126, quoted-pairSMTP is "\" %d32-126.
const QUOTED_STRING = /^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"$/;
const HOSTNAME_LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;
const IPV4 = /^(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const NON_ASCII = /[^\x00-\x7f]/;

export const EMAIL_MAX_LENGTH = 254;
const EMAIL_LOCAL_MAX_LENGTH = 64;

// The WHATWG URL parser validates IPv6 text exactly (all RFC 4291 forms, embedded IPv4 included).
const isIpv6 = (text: string) => {
  if (!/^[0-9A-Fa-f:.]+$/.test(text)) return false;
  try {
    new URL(`http://[${text}]/`);
    return true;
  } catch {
    return false;
  }
};

const isDomain = (domain: string) => {
  if (domain.startsWith("[")) {
    if (!domain.endsWith("]")) return false;
    const literal = domain.slice(1, -1);
    if (IPV4.test(literal)) return true;
    // The tag is an RFC 5321 Ldh-str, compared case-insensitively.
    return /^ipv6:/i.test(literal) && isIpv6(literal.slice(5));
  }
  return DOT_ATOM.test(domain) && domain.split(".").every((label) => HOSTNAME_LABEL.test(label));
};

/**
 * Why `address` (already trimmed) is not an email address this service accepts, as the end of a
 * sentence whose subject is the field ("email must …"); undefined when it is one.
 */
export const emailAddressProblem = (address: string): string | undefined => {
  if (NON_ASCII.test(address)) return "must contain ASCII characters only";
  if (address.length > EMAIL_MAX_LENGTH) return `must be at most ${EMAIL_MAX_LENGTH} characters`;
  // A quoted local part may itself contain "@", so the domain starts after the last one.
  const at = address.lastIndexOf("@");
  if (at < 1) return "must be a valid email address";
  const local = address.slice(0, at);
  if (local.length > EMAIL_LOCAL_MAX_LENGTH) return `must have at most ${EMAIL_LOCAL_MAX_LENGTH} characters before the @`;
  if (!DOT_ATOM.test(local) && !QUOTED_STRING.test(local)) return "must be a valid email address";
  if (!isDomain(address.slice(at + 1))) return "must be a valid email address";
  return undefined;
};

/**
 * An address's identity within a workspace: the address as written, case-insensitively (the address
 * itself keeps its case). Other spellings of one mailbox (a quoted local part that needs no quotes,
 * an IPv6 literal written out in full) are other addresses: keys are stored, and a key's rule that
 * changed would leave the rows saved under the old one unfindable.
 */
export const emailKey = (email: string) => asciiLowerCase(email);

/**
 * Addresses are ASCII, so only ASCII letters fold: a lookup for `Kate@…` spelled with the Kelvin sign
 * (U+212A, which toLowerCase() makes `k`) matches nobody, as the address it names could not be stored.
 */
const asciiLowerCase = (text: string) => text.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
