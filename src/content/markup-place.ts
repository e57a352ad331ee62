import { blockRole, maskedSource } from "./liquid-mask";
import { lastBefore, type Masking, rangeAt, scanTag, type TagEnd, UNKNOWN } from "./markup-reader";

// Where each value a campaign's html prints lands in its markup: text, an attribute value (quoted or
// not, a URL whose scheme the template has not fixed yet, before or after its colon), CSS (a style
// attribute or element), or a place no escaping makes safe (an event handler, a script, a tag's name,
// an attribute whose name Liquid writes, an iframe's srcdoc, an SVG animation, a tag that changes
// how the whole document is read, too deep into a tag, after markup no one reading settles). From
// the markup as markup-reader.ts reads it; html-guard.ts gives each place its escaping.

const URL_ATTRIBUTE = /[\t\n\f\r "'/\u0000](href|src|srcset|action|formaction|background|poster|cite|xlink:href|data)[\t\n\f\r ]*=[\t\n\f\r ]*(?:"([^"]*)|'([^']*)|([^\t\n\f\r "'=<>`]*))$/i;
/** What browsers skip in a URL before reading its scheme (controls and spaces, anywhere in it). */
export const SKIPPED = /[\u0000-\u0020\u007f]+/g;

/** A colon written as a character reference. */
const COLON_REFERENCE = /^(?:&#0*58;?|&#x0*3a;?|&colon;)/i;
/** Any other character reference: it may stand for a letter (`&#115;`), or a character a browser skips (`&Tab;`). */
const REFERENCE = /^&(?:#x[0-9a-f]{1,8}|#[0-9]{1,10}|[a-z][a-z0-9]{0,31});?/i;
/** What can be more of a URL's scheme, or is skipped in it: letters, digits, `+ . -`, controls, spaces, masked Liquid. */
const SCHEME_OR_SKIPPED = /[a-z0-9+.\-\u0000-\u0020\u007f]/i;

/**
 * Whether the template's text from `at` on may be more of a URL's scheme up to a colon (as a browser
 * reads attribute text: character references decoded, tabs and newlines dropped, Liquid possibly
 * printing more): a value printed just before it is then part of the scheme's name (`{{ v }}:`, and
 * `{{ v }}script:` too, which `java` would make `javascript:`). Read along every way the Liquid may
 * print: a block opened after the value may print any branch or none, so text that ends a scheme
 * (`/`, `?`, `=`…) in a branch ends only the rest of that branch; another branch of the value's own
 * block never prints after it (skipped); text after the blocks close always does. A loop around the
 * value inside the attribute prints its body's start after it again, and a `break` or `continue`
 * after the value jumps past text: both read as a scheme's name. The
 * attribute's closing quote ends the reading (a branch holding it is refused as unsettled); text not
 * read to its end within TAG_WINDOW (or before markup read differently) is read as a scheme's name.
 */
const schemeGoesOn = (source: string, masking: Masking, at: number, quote: string | null): boolean => {
  const { masked, pieces } = masking;
  // Past where readers would read the markup differently (a tag misread in a string, say), nothing is known.
  const end = Math.min(masked.length, at + TAG_WINDOW, masking.unsettled);
  // Blocks opened since the value; the branch being skipped (and blocks opened inside it).
  let depth = 0;
  let skip: { nested: number; wholeBlock: boolean } | null = null;
  for (let i = at; i < end; ) {
    const ch = masked[i] as string;
    if (ch === UNKNOWN && source.startsWith("{%", i) && rangeAt(pieces, i)?.begin === i) {
      const role = blockRole(source, i);
      // What prints after a cut is past its loop, or the loop's start again: read as a scheme's name.
      if (role === "cut") return true;
      if (role === "open") {
        if (skip) skip.nested++;
        else depth++;
      } else if (role === "close" || role === "closeLoop") {
        if (skip && skip.nested > 0) skip.nested--;
        else if (depth > 0) {
          depth--;
          skip = null;
        } else if (role === "closeLoop") return true;
        else skip = null;
      } else if (role === "branch" && !(skip && skip.nested > 0)) {
        if (depth === 0) skip = { nested: 0, wholeBlock: true };
        else if (skip && !skip.wholeBlock) skip = null;
      }
    }
    if (skip) {
      i++;
      continue;
    }
    if (ch === ":") return true;
    if (ch === quote) return false;
    const unquotedEnd = quote === null && (ch === ">" || /[\t\n\f\r ]/.test(ch));
    if (SCHEME_OR_SKIPPED.test(ch) && !unquotedEnd) {
      i++;
      continue;
    }
    if (ch === "&") {
      const rest = masked.slice(i, i + 48);
      if (COLON_REFERENCE.test(rest)) return true;
      const reference = REFERENCE.exec(rest);
      if (reference) {
        i += reference[0].length;
        continue;
      }
    }
    // Text that ends the scheme (or, unquoted, the attribute): where it always prints, the reading
    // ends; in a block opened after the value, the rest of its branch is read past.
    if (depth === 0) return false;
    skip = { nested: 0, wholeBlock: false };
    i++;
  }
  return end < masked.length;
};

/**
 * How far into a tag (from its `<`) a value may be printed: the markup before it is read for each
 * value, so this bounds the work per value (no real tag is longer; a longer one holding a value is
 * refused when the template is saved).
 */
export const TAG_WINDOW = 8 * 1024;

/**
 * Where what a template prints at `begin` of `source` lands: in text (null); in a comment or a text
 * element's text (`strict`: captured html escaped too, as its markup would end them);
 * inside a tag, with
 * `url` saying whether it is in a URL attribute whose scheme the template's own text has not fixed
 * (`open`, or `beforeColon`: right before the template's own colon), `unquoted` whether its value
 * has no quotes to stay inside (`name`: it stands where an attribute's name does) and `css` whether it is CSS (an attribute's, or a style element's text); or a place no
 * escaping makes safe: an event handler's value (`handler`), a script (`script`), a tag's name
 * (`tagName`), an attribute whose name Liquid writes (`liquidName`), an iframe's `srcdoc` (`markup`),
 * an SVG animation (`animation`), a `<base>`, `<link>`, `<script>` or `<meta http-equiv>` tag
 * (`document`), after markup that reads otherwise to some reader (`unsettled`: markup-reader.ts), too
 * far into a tag (`far`).
 */
export type Place =
  | { url: "open" | "beforeColon" | null; unquoted: boolean; alone?: boolean; name?: true; css?: "attribute" | "element"; strict?: true; srcset?: true }
  | "handler"
  | "liquidName"
  | "script"
  | "tagName"
  | "markup"
  | "animation"
  | "document"
  | "unsettled"
  | "far"
  | null;

/** SVG elements that set another attribute of their target (`attributeName="href" to="javascript:…"`). */
const ANIMATION_ELEMENTS: ReadonlySet<string> = new Set(["animate", "set", "animatemotion", "animatetransform", "animatecolor", "discard"]);
/** Elements whose attributes change how the whole document is read or what it loads and runs. */
const DOCUMENT_ELEMENTS: ReadonlySet<string> = new Set(["base", "link", "script"]);

/** Tags that print nothing themselves (a branch, a loop, an assignment): `{% endif %}href=` names `href`. */
const SILENT_TAGS = /^(?:\{%-?\s*(?!(?:echo|cycle|increment|decrement|liquid)\b)\w+[\s\S]*?-?%\})+$/;

/**
 * Whether Liquid writes part of the attribute name `name` (masked) found at `at` of `source`: Liquid
 * inside it, or before it, unless what stands before it is only tags that print nothing.
 */
const liquidWritesName = (source: string, at: number, name: string): boolean => {
  const literal = name.search(/[^\u0000]/);
  if (literal === -1 || name.slice(literal).includes(UNKNOWN)) return true;
  return !SILENT_TAGS.test(source.slice(at, at + literal));
};

/**
 * The rest of an attribute's name (Liquid masked) and its `=`. Space followed by Liquid may be a
 * branch's, which need not render (`{{ v }}{% if a %} {% endif %}="…"`): the name may go on after it.
 * (Each run of space must be followed by Liquid: one way only to read a run of masked Liquid, so no
 * backtracking blows up on a long one.)
 */
const NAME_THEN_EQUALS = /^[^\t\n\f\r "'=<>`/]*(?:[\t\n\f\r ]+\u0000[^\t\n\f\r "'=<>`/]*)*[\t\n\f\r ]*=/;

/** The attribute whose value the markup ends in: its name (Liquid masked) and the value so far. */
const ATTRIBUTE_VALUE = /([^\t\n\f\r "'=<>`/]+)[\t\n\f\r ]*=[\t\n\f\r ]*(?:"[^"]*|'[^']*|[^\t\n\f\r "'=<>`]*)$/;
export const outputPlace = (source: string, begin: number): Place => {
  const masking = maskedSource(source);
  const { masked, pieces } = masking;
  // What prints at `begin` stands where its piece stands (an `echo` inside `{% liquid %}`: that tag).
  const piece = rangeAt(pieces, begin);
  const at = piece?.begin ?? begin;
  if (at >= masking.unsettled) return "unsettled";
  if (rangeAt(masking.scripts, at)) return "script";
  if (rangeAt(masking.styles, at)) return { url: null, unquoted: false, css: "element" };
  const inComment = { url: null, unquoted: false, strict: true } as const;
  const comment = rangeAt(masking.comments, at);
  if (comment && at > comment.begin) return inComment;
  if (rangeAt(masking.texts, at, true)) return inComment;
  const open = lastBefore(masking.opens, at);
  if (open === -1) return null;
  // The tag ended before the value, with no Liquid inside it that could hide its `>`: text.
  const tagEnd = masking.tagEnds.get(open) as TagEnd;
  if (tagEnd.end !== -1 && tagEnd.end < at && !tagEnd.liquid) return null;
  // Inside a bogus comment (`<!x …>`): text that never shows, as long as the value cannot end it (escaped all through).
  if (tagEnd.bogus) return inComment;
  if (at - open > TAG_WINDOW) {
    // Still inside a tag, too far from its `<` to read; or past a `>` after Liquid (most likely
    // text): kept inside any attribute it might be in.
    return tagEnd.end === -1 || tagEnd.end >= at ? "far" : { url: null, unquoted: true };
  }
  // Inside the tag (with Liquid inside it, a `>` may be one that never renders, an untaken branch:
  // then the tag is read on).
  const tag = masked.slice(open, at);
  // The tag's own name (`<{{ v }}>`, `<s{{ v }}>`): a value could make it a script or a plaintext.
  if (/^<\/?[^\t\n\f\r "'=<>`/]*$/.test(tag)) return "tagName";
  // The attribute whose value this is: an event handler's (`onclick=`, after any Liquid glued before
  // it), or one whose name Liquid writes (`o{% if a %}n{% endif %}click=`, `{{ v }}click=`).
  const named = ATTRIBUTE_VALUE.exec(tag);
  const name = named?.[1] ?? "";
  const ownName = name.slice(name.lastIndexOf(UNKNOWN) + 1).toLowerCase();
  if (/^on[a-z]+$/.test(ownName)) return "handler";
  const scanned = scanTag(tag, 1, tag.length, "tagName", (i) => {
    const end = masking.skip(open + i);
    return end === undefined ? undefined : end - open;
  });
  const quoting = scanned.end !== -1 ? "text" : scanned.state === '"' || scanned.state === "'" ? "quoted" : "unquoted";
  if (quoting !== "text" && named && name.includes(UNKNOWN) && liquidWritesName(source, open + named.index, name)) return "liquidName";
  // A value where an attribute's name stands, the template's own `=` after that name
  // (`<a {{ v }}="…">`, `<p data-{{ v }}=…>`): the value names an attribute the template gives a value.
  const atName = scanned.state === "beforeName" || scanned.state === "inName" || scanned.state === "afterName";
  if (quoting === "unquoted" && atName && NAME_THEN_EQUALS.test(masked.slice(at, at + TAG_WINDOW))) return "liquidName";
  if (quoting !== "text") {
    // An attribute whose value is html, SVG that sets its target's attributes (`href` included), and
    // tags that rebase, load or redirect the whole document.
    if (ownName === "srcdoc") return "markup";
    const element = tagEnd.name;
    if (ANIMATION_ELEMENTS.has(element)) return "animation";
    if (DOCUMENT_ELEMENTS.has(element)) return "document";
    // (Any mention: `"http-equiv=`, `/http-equiv=` and a name Liquid writes are attributes too.)
    if (element === "meta" && /http-equiv/i.test(masked.slice(open, tagEnd.end === -1 ? masked.length : tagEnd.end))) return "document";
  }
  if (quoting === "unquoted" && atName) return { url: null, unquoted: true, name: true };
  const unquoted = quoting === "unquoted";
  // The whole of an unquoted value (`alt={{ v }} src=…`): empty, it would make the next attribute its value.
  const end = piece?.end ?? begin;
  // (Whatever follows: Liquid that prints nothing, or another value that prints nothing, leaves it so.)
  const alone = unquoted && scanned.state === "afterEquals";
  if (quoting !== "text" && named && ownName === "style") return { url: null, unquoted, alone, css: "attribute" };
  const m = URL_ATTRIBUTE.exec(tag);
  if (!m) return quoting === "text" ? null : { url: null, unquoted, alone };
  const value = m[2] ?? m[3] ?? m[4] ?? "";
  // A srcset is a list of URLs: each candidate after a comma starts one of its own, the value's own commas included.
  const srcset = m[1]?.toLowerCase() === "srcset";
  const list = srcset ? ({ srcset: true } as const) : {};
  const sofar = srcset ? value.slice(value.lastIndexOf(",") + 1) : value;
  // The template's own text before any Liquid or entity in the value: only that can fix the scheme.
  const cut = sofar.search(/[\u0000&]/);
  const known = cut === -1 ? sofar : sofar.slice(0, cut);
  if (/[:/?#]/.test(known.replace(SKIPPED, ""))) return { url: null, unquoted, alone, ...list };
  // The template's own colon after the value (past any more of a scheme) makes the value part of the scheme's name.
  return { url: schemeGoesOn(source, masking, end, quoting === "quoted" ? scanned.state : null) ? "beforeColon" : "open", unquoted, alone, ...list };
};
