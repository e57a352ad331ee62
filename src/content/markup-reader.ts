import { LIQUID } from "./liquid-syntax";

// Reads a campaign html template's markup as a browser's tokenizer reads it, once per source, with
// Liquid's own markup masked: where each tag opens and ends, the content of script and style
// elements, and what no single reading can settle (markup-place.ts then says where each value lands).
//
// A template is read with every Liquid branch taken at once. That is how a browser reads it only if
// each branch (and each loop's body, up to any break) leaves the markup as it found it: a branch that
// opens a tag, a quote or a comment only when taken would make a browser read what follows otherwise.
// Nor does a browser read tags inside a title, a textarea, a noscript (with scripting on) and the
// like, where a mail client may. Values printed after either are refused (`unsettled`).

/** Stands for Liquid's own markup in a masked source: text that is not known until rendering. */
export const UNKNOWN = "\u0000";

export type Range = { begin: number; end: number };
/** Where a tag opened at some `<` ends: its `>` (-1: none), whether Liquid stands before it, whether it is a bogus comment (`<!x>`, `<?x>`, `</3>`: no attributes). */
export type TagEnd = { end: number; liquid: boolean; bogus: boolean };

/** HTML's own whitespace: U+00A0 and the other Unicode spaces are text to a browser. */
export const isHtmlSpace = (ch: string) => ch === " " || ch === "\t" || ch === "\n" || ch === "\f" || ch === "\r";

export type ScanState = "name" | "afterEquals" | "unquoted" | '"' | "'";

/**
 * Reads tag markup from `from` (just after its `<`) to `to` as a browser reads it: a quote opens a
 * value only right after `=`, and a `>` outside a quoted value ends the tag. The `>` that ended it
 * (-1: none before `to`), the state at `to` otherwise, and whether Liquid (masked) stood before.
 */
export const scanTag = (
  text: string,
  from: number,
  to: number,
  start: ScanState = "name",
): { end: number; state: ScanState; liquid: boolean } => {
  let state = start;
  let liquid = false;
  for (let i = from; i < to; i++) {
    const ch = text[i] as string;
    if (ch === UNKNOWN) liquid = true;
    if (state === '"' || state === "'") {
      if (ch === state) state = "name";
    } else if (ch === ">") return { end: i, state, liquid };
    else if (state === "afterEquals") {
      if (ch === '"' || ch === "'") state = ch;
      else if (!isHtmlSpace(ch)) state = "unquoted";
    } else if (state === "unquoted") {
      if (isHtmlSpace(ch)) state = "name";
    } else if (ch === "=") state = "afterEquals";
  }
  return { end: -1, state, liquid };
};

/**
 * Elements whose content a browser reads as text up to their end tag. Script and style content is
 * told apart (a value there is refused or kept to CSS); in the others a value is text. Any of them
 * holding what would be a tag before its end tag is read otherwise by some reader (a mail client
 * without scripting reads noscript as markup; inside SVG none of them is text): `unsettled`.
 */
const TEXT_ELEMENTS: ReadonlySet<string> = new Set(["script", "style", "title", "textarea", "noscript", "xmp", "iframe", "noembed", "noframes", "plaintext"]);
/** A tag's name as written after its `<` (Liquid masked in it ends it). */
const TAG_NAME = /^<\/?([a-z][^\t\n\f\r />\u0000]*)/i;
export const tagNameAt = (text: string, open: number): string => TAG_NAME.exec(text.slice(open, open + 64))?.[1]?.toLowerCase() ?? "";
/** What a browser would take for a tag, a comment or a bogus comment: `<` before a letter, `/`, `!`, `?`, or Liquid. */
const TAG_LIKE = /<[a-z/!?\u0000]/gi;

export type Masking = {
  source: string;
  masked: string;
  /** Every Liquid tag and output, in source order. */
  pieces: Range[];
  /** Every `<` of the masked source that opens a tag (or a bogus comment), in order, with its end. */
  opens: number[];
  tagEnds: Map<number, TagEnd>;
  comments: Range[];
  scripts: Range[];
  styles: Range[];
  /** From here on, no value may be printed: the markup before it reads otherwise to some reader. */
  unsettled: number;
};

/** Reads the masked source once, as a browser's tokenizer does. */
const readMarkup = (masked: string) => {
  const opens: number[] = [];
  const tagEnds = new Map<number, TagEnd>();
  const comments: Range[] = [];
  const scripts: Range[] = [];
  const styles: Range[] = [];
  let unsettled = Number.POSITIVE_INFINITY;
  const lower = masked.toLowerCase();
  let i = 0;
  while (i < masked.length) {
    const lt = masked.indexOf("<", i);
    if (lt === -1) break;
    if (masked.startsWith("<!--", lt)) {
      // A comment: to `-->` or `--!>` (`<!-->` and `<!--->` close at once), or the end.
      const rest = /^<!--(?:-?>|[\s\S]*?--!?>)/.exec(masked.slice(lt));
      i = rest ? lt + rest[0].length : masked.length;
      comments.push({ begin: lt, end: i });
      continue;
    }
    const next = masked[lt + 1] ?? "";
    if (!/^[a-z/!?\u0000]$/i.test(next)) {
      i = lt + 1;
      continue;
    }
    opens.push(lt);
    // `<!…>`, `<?…>` and `</` before anything but a letter are bogus comments, to their first `>`
    // (`</>` is nothing at all); a tag reads its quoted values.
    const bogus = next === "!" || next === "?" || (next === "/" && !/^[a-z\u0000]$/i.test(masked[lt + 2] ?? ""));
    let found: { end: number; liquid: boolean };
    if (bogus) {
      const end = masked.indexOf(">", lt + 1);
      found = { end, liquid: masked.slice(lt, end === -1 ? masked.length : end).includes(UNKNOWN) };
    } else found = scanTag(masked, lt + 1, masked.length);
    tagEnds.set(lt, { ...found, bogus });
    if (found.end === -1) break;
    i = found.end + 1;
    const name = bogus || next === "/" ? "" : tagNameAt(masked, lt);
    if (!TEXT_ELEMENTS.has(name)) continue;
    // Text to its end tag: the first thing that looks like a tag must be that end tag. (An HTML
    // comment holding nothing tag-like, as old templates wrap their CSS in, reads alike either way.)
    TAG_LIKE.lastIndex = i;
    let first = TAG_LIKE.exec(masked)?.index ?? -1;
    while (first !== -1 && masked.startsWith("<!--", first)) {
      const close = masked.indexOf("-->", first + 4);
      TAG_LIKE.lastIndex = first + 4;
      const inside = TAG_LIKE.exec(masked)?.index ?? -1;
      if (close === -1 || (inside !== -1 && inside < close)) break;
      TAG_LIKE.lastIndex = close + 3;
      first = TAG_LIKE.exec(masked)?.index ?? -1;
    }
    const closes = first !== -1 && name !== "plaintext" && new RegExp(`^</${name}[\\t\\n\\f\\r />]`).test(lower.slice(first, first + name.length + 3));
    if (first !== -1 && !closes) unsettled = Math.min(unsettled, first);
    const content = { begin: i, end: first === -1 ? masked.length : first };
    if (name === "script") scripts.push(content);
    if (name === "style") styles.push(content);
    i = content.end;
  }
  return { opens, tagEnds, comments, scripts, styles, unsettled };
};

/** The last of sorted `points` before `at` (-1: none), by binary search. */
export const lastBefore = (points: number[], at: number): number => {
  let low = 0;
  let high = points.length - 1;
  let found = -1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const point = points[mid] as number;
    if (point < at) {
      found = point;
      low = mid + 1;
    } else high = mid - 1;
  }
  return found;
};

/** The range of sorted, disjoint `ranges` holding `at`, by binary search. */
export const rangeAt = (ranges: Range[], at: number): Range | undefined => {
  let low = 0;
  let high = ranges.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const range = ranges[mid] as Range;
    if (at < range.begin) high = mid - 1;
    else if (at >= range.end) low = mid + 1;
    else return range;
  }
  return undefined;
};

/**
 * The tokenizer's state before the character at each of `positions` (ascending), as a key: two
 * positions with the same key are read alike from there on. Each tag is scanned once, however many
 * positions fall inside it.
 */
const statesAt = (m: Pick<Masking, "masked" | "opens" | "tagEnds" | "comments" | "scripts" | "styles">, positions: number[]): string[] => {
  let scanned = { open: -1, at: 0, state: "name" as ScanState };
  return positions.map((at) => {
    const comment = rangeAt(m.comments, at);
    if (comment && at > comment.begin) return `comment@${comment.begin}`;
    const raw = rangeAt(m.scripts, at) ?? rangeAt(m.styles, at);
    if (raw) return `text@${raw.begin}`;
    const open = lastBefore(m.opens, at);
    const end = open === -1 ? undefined : (m.tagEnds.get(open) as TagEnd);
    if (!end || (end.end !== -1 && end.end < at)) return "data";
    if (end.bogus) return `bogus@${open}`;
    if (scanned.open !== open || scanned.at > at) scanned = { open, at: open + 1, state: "name" };
    scanned = { open, at, state: scanTag(m.masked, scanned.at, at, scanned.state).state };
    return `tag@${open}:${scanned.state}`;
  });
};

// Liquid's blocks: those whose branches or body may print or not, the tags between branches, and the
// tags that cut a loop's body short.
const OPENERS: ReadonlySet<string> = new Set(["if", "unless", "case", "for", "tablerow", "capture"]);
const SEPARATORS: ReadonlySet<string> = new Set(["elsif", "else", "when"]);
const CLOSERS: ReadonlySet<string> = new Set(["endif", "endunless", "endcase", "endfor", "endtablerow", "endcapture"]);
const CUTS: ReadonlySet<string> = new Set(["break", "continue"]);
const LOOPS: ReadonlySet<string> = new Set(["for", "tablerow"]);

/**
 * Where the first branch (or loop body, or capture) begins that does not leave the markup as it
 * found it: its start and its end (or a break in it) are read in different states. Infinity: none.
 */
const firstUnevenBranch = (source: string, m: Omit<Masking, "unsettled">): number => {
  const blocks: { name: string; begin: number; at: number }[] = [];
  const checks: { begin: number; from: number; to: number }[] = [];
  for (const piece of m.pieces) {
    const name = /^\{%-?\s*(\w+)/.exec(source.slice(piece.begin, piece.begin + 40))?.[1];
    if (!name) continue;
    if (OPENERS.has(name)) {
      blocks.push({ name, begin: piece.begin, at: piece.end });
      continue;
    }
    const cut = CUTS.has(name);
    if (!cut && !SEPARATORS.has(name) && !CLOSERS.has(name)) continue;
    const block = cut ? blocks.findLast((b) => LOOPS.has(b.name)) : blocks.at(-1);
    // (An unbalanced block is a syntax error liquidjs reports.)
    if (!block) continue;
    checks.push({ begin: block.begin, from: block.at, to: piece.begin });
    if (CLOSERS.has(name)) blocks.pop();
  }
  if (checks.length === 0) return Number.POSITIVE_INFINITY;
  const positions = [...new Set(checks.flatMap((c) => [c.from, c.to]))].sort((a, b) => a - b);
  const states = new Map(statesAt(m, positions).map((state, i) => [positions[i] as number, state]));
  let first = Number.POSITIVE_INFINITY;
  for (const check of checks) if (states.get(check.from) !== states.get(check.to)) first = Math.min(first, check.begin);
  return first;
};

let masking: Masking | undefined;
const MASKED = new RegExp(
  String.raw`(\{%-?\s*raw\s*-?%\})([\s\S]*?)(\{%-?\s*endraw\s*-?%\})|\{%-?\s*comment\s*-?%\}[\s\S]*?\{%-?\s*endcomment\s*-?%\}|${LIQUID.source}`,
  "g",
);

/** The source read (kept for the last source: a template's outputs are placed in turn). */
export const maskedSource = (source: string): Masking => {
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
    const read = { source, masked, pieces, ...readMarkup(masked) };
    masking = { ...read, unsettled: Math.min(read.unsettled, firstUnevenBranch(source, read)) };
  }
  return masking;
};
