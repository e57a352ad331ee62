import { LIQUID } from "./liquid-syntax";
import { converge, type Masking, type Range, rangeAt, readMarkup, type ScanState, type Skip, statesAt, UNKNOWN } from "./markup-reader";

// A campaign html template's source with its Liquid masked (markup-reader.ts reads the markup
// around it): which Liquid prints and which is silent, what a `-` trims, and where the first Liquid
// branch begins that would make a browser read the markup after it otherwise.

// Liquid's blocks: those whose branches or body may print or not, the tags between branches, and the
// tags that cut a loop's body short.
const OPENERS: ReadonlySet<string> = new Set(["if", "unless", "case", "for", "tablerow", "capture"]);
const SEPARATORS: ReadonlySet<string> = new Set(["elsif", "else", "when"]);
const CLOSERS: ReadonlySet<string> = new Set(["endif", "endunless", "endcase", "endfor", "endtablerow", "endcapture"]);
const CUTS: ReadonlySet<string> = new Set(["break", "continue"]);
const LOOPS: ReadonlySet<string> = new Set(["for", "tablerow"]);
/**
 * Tags that print (what they print is a value, escaped for its place); the others print nothing. A
 * `{% liquid %}` tag is read as printing nothing (it mostly assigns); the values its `echo` prints are
 * escaped for where it stands, so printing one there instead changes nothing a value could use.
 */
const PRINTING: ReadonlySet<string> = new Set(["echo", "cycle", "increment", "decrement"]);

const tagName = (source: string, piece: Range) => /^\{%-?\s*(\w+)/.exec(source.slice(piece.begin, piece.begin + 40))?.[1];

/**
 * What the tag starting at `at` does to whether the text after it prints: opens a block (whose body
 * may print or not), starts another branch (what follows in the block does not print with what came
 * before), cuts a loop's body short (`break`, `continue`: what prints next is past the loop, or its
 * body's start), ends a block (a loop: whose body begins again), or nothing.
 */
export const blockRole = (source: string, at: number): "open" | "branch" | "cut" | "close" | "closeLoop" | undefined => {
  const name = tagName(source, { begin: at, end: at });
  if (name === undefined) return undefined;
  if (OPENERS.has(name)) return "open";
  if (SEPARATORS.has(name)) return "branch";
  // (A `{% liquid %}` tag's own lines may cut the loop too.)
  if (CUTS.has(name) || (name === "liquid" && /\b(?:break|continue)\b/.test(source.slice(at, source.indexOf("%}", at) + 2)))) return "cut";
  if (name === "endfor" || name === "endtablerow") return "closeLoop";
  return CLOSERS.has(name) ? "close" : undefined;
};

/**
 * Where the first branch (or loop body, or capture) begins that does not leave the markup as it
 * found it: its start and its end (or a break in it) are read in different states. Infinity: none.
 */
const firstUnevenBranch = (source: string, m: Omit<Masking, "unsettled">): number => {
  type Block = { name: string; begin: number; at: number };
  const blocks: Block[] = [];
  const checks: { block: Block; to: number; after?: number }[] = [];
  // `tablerow` writes `<tr …><td …>` markup of its own, and a capture's html prints as made: only
  // where markup may begin (in text), so a capture's values were placed as where it prints.
  const markupOnly: number[] = [];
  for (const piece of m.pieces) {
    const name = tagName(source, piece);
    if (!name) continue;
    if (name === "tablerow" || name === "endtablerow" || name === "capture" || name === "endcapture") markupOnly.push(piece.begin);
    if (OPENERS.has(name)) {
      blocks.push({ name, begin: piece.begin, at: piece.end });
      continue;
    }
    const cut = CUTS.has(name);
    if (!cut && !SEPARATORS.has(name) && !CLOSERS.has(name)) continue;
    const block = cut ? blocks.findLast((b) => LOOPS.has(b.name)) : blocks.at(-1);
    // (An unbalanced block is a syntax error liquidjs reports.)
    if (!block) continue;
    const check: { block: Block; to: number; after?: number } = { block, to: piece.begin };
    checks.push(check);
    if (CLOSERS.has(name)) {
      blocks.pop();
      // A branch's end and the block's start are read on from the block's end.
      for (const c of checks) if (c.block === block) c.after = piece.end;
    }
  }
  if (checks.length === 0) return Number.POSITIVE_INFINITY;
  const positions = [...new Set([...checks.flatMap((c) => [c.block.at, c.to]), ...markupOnly])].sort((a, b) => a - b);
  const states = new Map(statesAt(m, positions).map((state, i) => [positions[i] as number, state]));
  let first = Number.POSITIVE_INFINITY;
  for (const at of markupOnly) if (states.get(at) !== "data") first = Math.min(first, at);
  for (const { block, to, after } of checks) {
    const from = states.get(block.at) as string;
    const end = states.get(to) as string;
    if (from === end) continue;
    // A branch (not a loop's body, which runs again, nor a capture) that ends in another state of
    // the same tag is fine when what follows the block reads alike from both.
    const [fromTag, fromState] = from.split(":");
    const [endTag, endState] = end.split(":");
    const branch = !LOOPS.has(block.name) && block.name !== "capture";
    if (branch && after !== undefined && fromTag === endTag && fromTag?.startsWith("tag@") && converge(m.masked, after, fromState as ScanState, endState as ScanState, m.skip)) continue;
    first = Math.min(first, block.begin);
  }
  return first;
};

let masking: Masking | undefined;
// A raw block's delimiters (its text renders as written, Liquid-looking text included; liquidjs ends
// it at the first `{% endraw %}` in the text), a comment block whole, and every other tag and output.
const RAW_OR_COMMENT = String.raw`(\{%-?\s*raw\b[^%]*?-?%\})([\s\S]*?)(\{%-?\s*endraw\b[^%]*?-?%\})|(\{%-?\s*comment\b[^%]*?-?%\})([\s\S]*?)\{%-?\s*endcomment\b[^%]*?-?%\}`;
const MASKED = new RegExp(`${RAW_OR_COMMENT}|${LIQUID.source}`, "g");

/** What liquidjs trims for a `-` (its own blank characters: not U+FEFF, which JavaScript's \s has; U+180E, which it has not). */
const LIQUID_BLANK = /^[\t\n\v\f\r \u00a0\u1680\u180e\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]$/;

/** Whether a Liquid tag or output, as the search found it, ends inside a string (liquidjs reads on past its `}}` or `%}`). */
const endsInString = (piece: string): boolean => {
  let quote: string | undefined;
  for (let i = 2; i < piece.length - 2; i++) {
    const ch = piece[i];
    if (quote) {
      if (ch === quote) quote = undefined;
    } else if (ch === '"' || ch === "'") quote = ch;
  }
  return quote !== undefined;
};

/** The source read (kept for the last source: a template's outputs are placed in turn). */
export const maskedSource = (source: string): Masking => {
  if (masking?.source !== source) {
    const pieces: Range[] = [];
    const silent: Range[] = [];
    /** Raw and comment blocks as the search found them. */
    const blocks: Range[] = [];
    let unsettledComment = Number.POSITIVE_INFINITY;
    const mask = (piece: string, at: number, quiet: boolean) => {
      const range = { begin: at, end: at + piece.length };
      pieces.push(range);
      if (quiet) silent.push(range);
      return UNKNOWN.repeat(piece.length);
    };
    const masked = source.replace(
      MASKED,
      (piece: string, rawOpen: string | undefined, rawText: string | undefined, _rawClose: string | undefined, commentOpen: string | undefined, commentText: string | undefined, at: number) => {
        if (rawOpen !== undefined && rawText !== undefined) {
          blocks.push({ begin: at, end: at + piece.length });
          return mask(rawOpen, at, true) + rawText + mask(piece.slice(rawOpen.length + rawText.length), at + rawOpen.length + rawText.length, true);
        }
        if (commentOpen !== undefined) blocks.push({ begin: at, end: at + piece.length });
        // liquidjs reads a comment's body as Liquid: an `{% endcomment %}` inside an output or a tag
        // (`{{ "{% endcomment %}" }}`), or after a `{% raw %}` in it, ends it later than this search
        // does; and it reads a tag or output on past a `}}` or `%}` inside a string.
        const misread =
          commentOpen !== undefined
            ? /\{\{|\{%/.test((commentText ?? "").replace(LIQUID, "")) || /\{%-?\s*raw\b/.test(commentText ?? "")
            : endsInString(piece);
        if (misread) unsettledComment = Math.min(unsettledComment, at);
        const name = piece.startsWith("{%") ? /^\{%-?\s*(#|\w+)/.exec(piece)?.[1] : undefined;
        return mask(piece, at, commentOpen !== undefined || (name !== undefined && !PRINTING.has(name)));
      },
    );
    // Whitespace a `-` trims (`{%- … -%}`, `{{- … -}}`) is not there when rendered: silent too.
    const chars = masked.split("");
    for (const piece of pieces) {
      const text = source.slice(piece.begin, piece.end);
      if (/^\{[{%]-/.test(text)) {
        let j = piece.begin;
        while (j > 0 && LIQUID_BLANK.test(source[j - 1] as string) && chars[j - 1] !== UNKNOWN) j--;
        if (j < piece.begin) {
          for (let k = j; k < piece.begin; k++) chars[k] = UNKNOWN;
          silent.push({ begin: j, end: piece.begin });
        }
      }
      if (/-[}%]\}$/.test(text)) {
        let j = piece.end;
        while (j < source.length && LIQUID_BLANK.test(source[j] as string) && chars[j] !== UNKNOWN) j++;
        if (j > piece.end) {
          for (let k = piece.end; k < j; k++) chars[k] = UNKNOWN;
          silent.push({ begin: piece.end, end: j });
        }
      }
    }
    const trimmed = chars.join("");
    // A comment or raw tag the search did not take for one (a `%` in its arguments, say): liquidjs may.
    for (const m of source.matchAll(/\{%-?\s*(?:end)?(?:comment|raw)\b/g)) {
      if (!blocks.some((range) => m.index >= range.begin && m.index < range.end)) unsettledComment = Math.min(unsettledComment, m.index);
    }
    // Silent ranges merged, so a run of them is skipped at once.
    silent.sort((a, b) => a.begin - b.begin);
    const runs: Range[] = [];
    for (const range of silent) {
      const last = runs.at(-1);
      if (last && range.begin <= last.end) last.end = Math.max(last.end, range.end);
      else runs.push({ ...range });
    }
    const skip: Skip = (i) => rangeAt(runs, i)?.end;
    const read = { source, masked: trimmed, pieces, skip, ...readMarkup(trimmed, skip) };
    masking = { ...read, unsettled: Math.min(read.unsettled, unsettledComment, firstUnevenBranch(source, read)) };
  }
  return masking;
};
