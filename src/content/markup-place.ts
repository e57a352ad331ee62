import { LIQUID } from "./liquid-syntax";

// Where each value a campaign's html prints lands in its markup: text, an attribute value (quoted or
// not, a URL whose scheme the template has not fixed yet, before or after its colon), CSS (a style
// attribute or element), or a place no escaping makes safe (an event handler, a script, a tag's name,
// an attribute whose name Liquid writes, an iframe's srcdoc, an SVG animation, a tag that changes
// how the whole document is read, too deep into a tag). Read from the template's source once, when
// it is parsed, with Liquid's own markup masked; html-guard.ts gives each place its escaping.

const URL_ATTRIBUTE = /[\s"'/\u0000](href|src|srcset|action|formaction|background|poster|cite|xlink:href|data)\s*=\s*(?:"([^"]*)|'([^']*)|([^\s"'=<>`]*))$/i;
/** What browsers skip in a URL before reading its scheme (controls and spaces, anywhere in it). */
export const SKIPPED = /[\u0000-\u0020\u007f]+/g;
/** Stands for Liquid's own markup in a masked source: text that is not known until rendering. */
const UNKNOWN = "\u0000";

/**
 * The source with each Liquid tag and output replaced by as many UNKNOWN characters (positions
 * unchanged), and where each piece begins; computed once per source (a template's outputs in turn).
 */
type Range = { begin: number; end: number };
/** Where a tag opened at some `<` ends: its `>` (-1: none), and whether Liquid stands before it. */
type TagEnd = { end: number; liquid: boolean };
type Masking = {
  source: string;
  masked: string;
  pieces: Range[];
  /** The content of each script and style element (a browser reads it as text to its end tag). */
  scripts: Range[];
  styles: Range[];
  /** Every `<` of the masked source that opens a tag, in order. */
  opens: number[];
  /** The end of each tag opened at a `<` of `opens`. */
  tagEnds: Map<number, TagEnd>;
};
let masking: Masking | undefined;
const MASKED = new RegExp(
  String.raw`(\{%-?\s*raw\s*-?%\})([\s\S]*?)(\{%-?\s*endraw\s*-?%\})|\{%-?\s*comment\s*-?%\}[\s\S]*?\{%-?\s*endcomment\s*-?%\}|${LIQUID.source}`,
  "g",
);
/**
 * Elements whose content a browser reads as text up to their end tag (no tag opens inside): script
 * and style. (A value in either is refused or kept to CSS, so one read as markup inside SVG, where
 * they are not text, is safe too; the other text elements are read as markup, which escapes more.)
 */
const TEXT_ELEMENTS: ReadonlySet<string> = new Set(["script", "style"]);
/** A tag's name as written after its `<` (Liquid masked in it ends it). */
const TAG_NAME = /^<\/?([a-z][^\s/>\u0000]*)/i;
export const tagNameAt = (text: string, open: number): string => TAG_NAME.exec(text.slice(open, open + 64))?.[1]?.toLowerCase() ?? "";

/**
 * Reads the masked source once, as a browser's tokenizer does: where each tag opens and ends (a `<`
 * inside a quoted attribute value, a comment or a text element's content opens nothing), and the
 * content of script and style elements.
 */
const readMarkup = (masked: string) => {
  const opens: number[] = [];
  const tagEnds = new Map<number, TagEnd>();
  const scripts: Range[] = [];
  const styles: Range[] = [];
  const lower = masked.toLowerCase();
  let i = 0;
  while (i < masked.length) {
    const lt = masked.indexOf("<", i);
    if (lt === -1) break;
    if (masked.startsWith("<!--", lt)) {
      // A comment: to `-->` or `--!>` (`<!-->` and `<!--->` close at once), or the end.
      const rest = /^<!--(?:-?>|[\s\S]*?--!?>)/.exec(masked.slice(lt));
      i = rest ? lt + rest[0].length : masked.length;
      continue;
    }
    // A `<` opens a tag only before a letter, `/`, `!` or `?` (`a < b` is text), or before Liquid
    // that may print a tag's name.
    if (!/^[a-z/!?\u0000]/i.test(masked[lt + 1] ?? "")) {
      i = lt + 1;
      continue;
    }
    opens.push(lt);
    // `<!…>` and `<?…>` end at their first `>`; a tag reads its quoted values.
    const bogus = masked[lt + 1] === "!" || masked[lt + 1] === "?";
    const found = bogus ? { end: masked.indexOf(">", lt), liquid: masked.slice(lt, masked.indexOf(">", lt)).includes(UNKNOWN) } : scanTag(masked, lt + 1, masked.length);
    tagEnds.set(lt, { end: found.end, liquid: found.liquid });
    if (found.end === -1) break;
    i = found.end + 1;
    const name = masked[lt + 1] === "/" ? "" : tagNameAt(masked, lt);
    if (TEXT_ELEMENTS.has(name)) {
      const close = lower.indexOf(`</${name}`, i);
      const content = { begin: i, end: close === -1 ? masked.length : close };
      if (name === "script") scripts.push(content);
      if (name === "style") styles.push(content);
      i = content.end;
    }
  }
  return { opens, tagEnds, scripts, styles };
};

const maskedSource = (source: string): Masking => {
  if (masking?.source !== source) {
    const pieces: Range[] = [];
    const mask = (piece: string, at: number) => {
      pieces.push({ begin: at, end: at + piece.length });
      return UNKNOWN.repeat(piece.length);
    };
    // A comment block whole (what it holds never renders); a raw block's delimiters only (what it
    // holds renders as written, Liquid-looking text included); every other tag and output.
    const masked = source.replace(MASKED, (piece: string, rawOpen: string | undefined, rawText: string | undefined, _rawClose: string | undefined, at: number) => {
      if (rawOpen === undefined || rawText === undefined) return mask(piece, at);
      return mask(rawOpen, at) + rawText + mask(piece.slice(rawOpen.length + rawText.length), at + rawOpen.length + rawText.length);
    });
    masking = { source, masked, pieces, ...readMarkup(masked) };
  }
  return masking;
};

/** A colon next, as a browser reads attribute text: after skipped characters, written or as a character reference. */
const COLON_NEXT = /^(?:[\u0000-\u0020\u007f]|&(?:#0*(?:9|10|13|32);?|#x0*(?:9|a|d|20);?|Tab;|NewLine;))*(?::|&#0*58;?|&#x0*3a;?|&colon;)/i;

/** The masked piece at `at` (pieces are in source order): an output's own, or the `{% liquid %}` tag holding an `echo`. */
const pieceAt = (pieces: Range[], at: number) => {
  let low = 0;
  let high = pieces.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const piece = pieces[mid] as Range;
    if (at < piece.begin) high = mid - 1;
    else if (at >= piece.end) low = mid + 1;
    else return piece;
  }
  return undefined;
};

type ScanState = "name" | "afterEquals" | "unquoted" | '"' | "'";

/**
 * Reads tag markup from `from` (just after its `<`) to `to` as a browser reads it: a quote opens a
 * value only right after `=`, and a `>` outside a quoted value ends the tag. The `>` that ended it
 * (-1: none before `to`), the state at `to` otherwise, and whether Liquid (masked) stood before.
 */
const scanTag = (text: string, from: number, to: number): { end: number; state: ScanState; liquid: boolean } => {
  let state: ScanState = "name";
  let liquid = false;
  for (let i = from; i < to; i++) {
    const ch = text[i] as string;
    if (ch === UNKNOWN) liquid = true;
    if (state === '"' || state === "'") {
      if (ch === state) state = "name";
    } else if (ch === ">") return { end: i, state, liquid };
    else if (state === "afterEquals") {
      if (ch === '"' || ch === "'") state = ch;
      else if (!/\s/.test(ch)) state = "unquoted";
    } else if (state === "unquoted") {
      if (/\s/.test(ch)) state = "name";
    } else if (ch === "=") state = "afterEquals";
  }
  return { end: -1, state, liquid };
};

/** The last `<` before `at` (-1: none), by binary search. */
const lastOpenBefore = (opens: number[], at: number): number => {
  let low = 0;
  let high = opens.length - 1;
  let found = -1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const open = opens[mid] as number;
    if (open < at) {
      found = open;
      low = mid + 1;
    } else high = mid - 1;
  }
  return found;
};

/**
 * How far into a tag (from its `<`) a value may be printed: the markup before it is read for each
 * value, so this bounds the work per value (no real tag is longer; a longer one holding a value is
 * refused when the template is saved).
 */
export const TAG_WINDOW = 8 * 1024;

/**
 * Where what a template prints at `begin` of `source` lands: in text (null); inside a tag, with
 * `url` saying whether it is in a URL attribute whose scheme the template's own text has not fixed
 * (`open`, or `beforeColon`: right before the template's own colon), `unquoted` whether its value
 * has no quotes to stay inside and `css` whether it is CSS (also in a style element); or a place no
 * escaping makes safe: an event handler's value (`handler`), a script (`script`), a tag's name
 * (`tagName`), an attribute whose name Liquid writes (`liquidName`), an iframe's `srcdoc` (`markup`),
 * an SVG animation (`animation`), a `<base>`, `<link>`, `<script>` or `<meta http-equiv>` tag
 * (`document`), too far into a tag (`far`).
 */
export type Place =
  | { url: "open" | "beforeColon" | null; unquoted: boolean; alone?: boolean; css?: boolean }
  | "handler"
  | "liquidName"
  | "script"
  | "tagName"
  | "markup"
  | "animation"
  | "document"
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

/** The attribute whose value the markup ends in: its name (Liquid masked) and the value so far. */
const ATTRIBUTE_VALUE = /([^\s"'=<>`/]+)\s*=\s*(?:"[^"]*|'[^']*|[^\s"'=<>`]*)$/;
export const outputPlace = (source: string, begin: number): Place => {
  const masking = maskedSource(source);
  const { masked, pieces, scripts, styles } = masking;
  // What prints at `begin` stands where its piece stands (an `echo` inside `{% liquid %}`: that tag).
  const piece = pieceAt(pieces, begin);
  const at = piece?.begin ?? begin;
  if (scripts.some((script) => at >= script.begin && at < script.end)) return "script";
  if (styles.some((style) => at >= style.begin && at < style.end)) return { url: null, unquoted: false, css: true };
  const open = lastOpenBefore(masking.opens, at);
  if (open === -1) return null;
  // The tag ended before the value, with no Liquid inside it that could hide its `>`: text.
  const tagEnd = masking.tagEnds.get(open) as TagEnd;
  if (tagEnd.end !== -1 && tagEnd.end < at && !tagEnd.liquid) return null;
  if (at - open > TAG_WINDOW) {
    // Still inside a tag, too far from its `<` to read; or past a `>` after Liquid (most likely
    // text): kept inside any attribute it might be in.
    return tagEnd.end === -1 || tagEnd.end >= at ? "far" : { url: null, unquoted: true };
  }
  // Inside the tag (with Liquid inside it, a `>` may be one that never renders, an untaken branch:
  // then the tag is read on).
  const tag = masked.slice(open, at);
  // The tag's own name (`<{{ v }}>`, `<s{{ v }}>`): a value could make it a script or a plaintext.
  if (/^<\/?[^\s"'=<>`/]*$/.test(tag)) return "tagName";
  // The attribute whose value this is: an event handler's (`onclick=`, after any Liquid glued before
  // it), or one whose name Liquid writes (`o{% if a %}n{% endif %}click=`, `{{ v }}click=`).
  const named = ATTRIBUTE_VALUE.exec(tag);
  const name = named?.[1] ?? "";
  const ownName = name.slice(name.lastIndexOf(UNKNOWN) + 1).toLowerCase();
  if (/^on[a-z]+$/.test(ownName)) return "handler";
  const scanned = scanTag(tag, 1, tag.length);
  const quoting = scanned.end !== -1 ? "text" : scanned.state === '"' || scanned.state === "'" ? "quoted" : "unquoted";
  if (quoting !== "text" && named && name.includes(UNKNOWN) && liquidWritesName(source, open + named.index, name)) return "liquidName";
  if (quoting !== "text") {
    // An attribute whose value is html, SVG that sets its target's attributes (`href` included), and
    // tags that rebase, load or redirect the whole document.
    if (ownName === "srcdoc") return "markup";
    const element = tagNameAt(masked, open);
    if (ANIMATION_ELEMENTS.has(element)) return "animation";
    if (DOCUMENT_ELEMENTS.has(element)) return "document";
    if (element === "meta" && /\shttp-equiv\s*=/i.test(masked.slice(open, tagEnd.end === -1 ? masked.length : tagEnd.end))) return "document";
  }
  const unquoted = quoting === "unquoted";
  // The whole of an unquoted value (`alt={{ v }} src=…`): empty, it would make the next attribute its value.
  const end = piece?.end ?? begin;
  const alone = unquoted && scanned.state === "afterEquals" && /^(?:[\s>/]|$)/.test(masked.slice(end, end + 1));
  if (quoting !== "text" && named && ownName === "style") return { url: null, unquoted, alone, css: true };
  const m = URL_ATTRIBUTE.exec(tag);
  if (!m) return quoting === "text" ? null : { url: null, unquoted, alone };
  const value = m[2] ?? m[3] ?? m[4] ?? "";
  // A srcset is a list of URLs: each candidate after a comma starts one of its own.
  const sofar = m[1]?.toLowerCase() === "srcset" ? value.slice(value.lastIndexOf(",") + 1) : value;
  // The template's own text before any Liquid or entity in the value: only that can fix the scheme.
  const cut = sofar.search(/[\u0000&]/);
  const known = cut === -1 ? sofar : sofar.slice(0, cut);
  if (/[:/?#]/.test(known.replace(SKIPPED, ""))) return { url: null, unquoted, alone };
  // The template's own colon right after the value makes the value the scheme's name.
  return { url: COLON_NEXT.test(masked.slice(end, end + 64).replace(/\u0000+/, "")) ? "beforeColon" : "open", unquoted, alone };
};
