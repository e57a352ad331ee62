// Reads a campaign html template's markup as a browser's tokenizer reads it, once per source, with
// Liquid's own markup masked (liquid-mask.ts): where each tag opens and ends, its element's name, comments, the text
// of script, style and the other text elements, and what no single reading can settle
// (markup-place.ts then says where each value lands).
//
// Liquid that prints nothing (a branch's tags, an assignment, a comment block, whitespace a `-`
// trims) is skipped as a browser never sees it. The template is read with every Liquid branch taken
// at once. That is how a browser reads it only if each branch (and each loop body, up to any break,
// and each capture) leaves the markup as it found it: a branch that opens a tag, a quote or a comment
// only when taken would make a browser read what follows otherwise. Nor do readers agree on what a
// noscript holds (text with scripting, markup without), or on text elements inside SVG or MathML.
// Values printed after any of these are refused (`unsettled`).

/** Stands for Liquid's own markup in a masked source: text that is not known until rendering. */
export const UNKNOWN = "\u0000";

export type Range = { begin: number; end: number };
/** Where a tag opened at some `<` ends: its `>` (-1: none), whether Liquid stands before it, whether it is a bogus comment (`<!x>`, `<?x>`, `</3>`: no attributes). */
export type TagEnd = { end: number; liquid: boolean; bogus: boolean; name: string };

/** HTML's own whitespace: U+00A0 and the other Unicode spaces are text to a browser. */
const isHtmlSpace = (ch: string) => ch === " " || ch === "\t" || ch === "\n" || ch === "\f" || ch === "\r";

/** Where the silent Liquid that covers position `i` ends (undefined: `i` is not silent). */
export type Skip = (i: number) => number | undefined;

/**
 * A browser's states inside a tag: its name, before, in and after an attribute's name (a quoted
 * value's end counts as before the next name), right after `=`, in an unquoted or a quoted value.
 */
export type ScanState = "tagName" | "beforeName" | "inName" | "afterName" | "afterEquals" | "unquoted" | '"' | "'";

/** One character of a tag, as a browser reads it: the next state, or `end` at the tag's `>`. */
const step = (state: ScanState, ch: string): ScanState | "end" => {
  if (state === '"' || state === "'") return ch === state ? "beforeName" : state;
  if (ch === ">") return "end";
  const space = isHtmlSpace(ch);
  switch (state) {
    case "tagName":
      return space || ch === "/" ? "beforeName" : state;
    case "beforeName":
      // (`=` here starts a name, as a browser reads it.)
      return space || ch === "/" ? state : "inName";
    case "inName":
    case "afterName":
      return ch === "=" ? "afterEquals" : ch === "/" ? "beforeName" : space ? "afterName" : "inName";
    case "afterEquals":
      return ch === '"' || ch === "'" ? ch : space ? state : "unquoted";
    case "unquoted":
      return space ? "beforeName" : state;
  }
};

/**
 * Reads tag markup from `from` (just after its `<`, or `start` being the state there) to `to` as a
 * browser reads it, silent Liquid skipped. The `>` that ended it (-1: none before `to`), the state at
 * `to` otherwise, and whether Liquid (masked) stood before.
 */
export const scanTag = (
  text: string,
  from: number,
  to: number,
  start: ScanState = "tagName",
  skip?: Skip,
): { end: number; state: ScanState; liquid: boolean } => {
  let state = start;
  let liquid = false;
  for (let i = from; i < to; i++) {
    const ch = text[i] as string;
    if (ch === UNKNOWN) {
      liquid = true;
      const end = skip?.(i);
      if (end !== undefined) {
        i = Math.min(end, to) - 1;
        continue;
      }
    }
    const next = step(state, ch);
    if (next === "end") return { end: i, state, liquid };
    state = next;
  }
  return { end: -1, state, liquid };
};

/**
 * Whether a tag read on from `at` in two states comes to the same state (or to its end) before any
 * value is printed: what follows is then read alike either way (`<td {% if a %}nowrap{% endif %}>`).
 */
export const converge = (text: string, at: number, a: ScanState, b: ScanState, skip: Skip): boolean => {
  let x = a;
  let y = b;
  for (let i = at; i < text.length && i < at + 1024; i++) {
    if (x === y) return true;
    const ch = text[i] as string;
    if (ch === UNKNOWN) {
      const end = skip(i);
      if (end === undefined) return false;
      i = end - 1;
      continue;
    }
    const nx = step(x, ch);
    const ny = step(y, ch);
    // The tag ends in both readings at once, or in one only (what follows is then read otherwise).
    if (nx === "end" || ny === "end") return nx === ny;
    x = nx;
    y = ny;
  }
  return x === y;
};

/** Elements whose content a browser reads as text up to their end tag (in HTML; inside SVG or MathML, none). */
const TEXT_ELEMENTS: ReadonlySet<string> = new Set(["script", "style", "title", "textarea", "noscript", "xmp", "iframe", "noembed", "noframes", "plaintext"]);
/** What a browser would take for a tag, a comment or a bogus comment: `<` before a letter, `/`, `!`, `?`, or Liquid. */
const TAG_LIKE = /<[a-z/!?\u0000]/gi;

export type Masking = {
  source: string;
  masked: string;
  /** Every Liquid tag and output, in source order. */
  pieces: Range[];
  /** Silent Liquid, by range: what a reader skips. */
  skip: Skip;
  /** Every `<` of the masked source that opens a tag (or a bogus comment), in order, with its end. */
  opens: number[];
  tagEnds: Map<number, TagEnd>;
  comments: Range[];
  /** The text of every text element; of script and style elements apart. */
  texts: Range[];
  scripts: Range[];
  styles: Range[];
  /** From here on, no value may be printed: the markup before it reads otherwise to some reader. */
  unsettled: number;
};

/** The index of the first character at or after `i` that is not silent Liquid. */
const past = (masked: string, i: number, skip: Skip): number => {
  let j = i;
  for (let end = masked[j] === UNKNOWN ? skip(j) : undefined; end !== undefined; end = masked[j] === UNKNOWN ? skip(j) : undefined) j = end;
  return j;
};

/** Reads the masked source once, as a browser's tokenizer does. */
export const readMarkup = (masked: string, skip: Skip) => {
  const opens: number[] = [];
  const tagEnds = new Map<number, TagEnd>();
  const comments: Range[] = [];
  const texts: Range[] = [];
  const scripts: Range[] = [];
  const styles: Range[] = [];
  let unsettled = Number.POSITIVE_INFINITY;
  const unsettle = (at: number) => {
    unsettled = Math.min(unsettled, at);
  };
  const lower = masked.toLowerCase();
  let foreign = false;
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
    const at = past(masked, lt + 1, skip);
    const next = masked[at] ?? "";
    const isName = (ch: string) => /^[a-z\u0000]$/i.test(ch);
    if (!isName(next) && next !== "/" && next !== "!" && next !== "?") {
      i = lt + 1;
      continue;
    }
    opens.push(lt);
    const closing = next === "/";
    const nameAt = closing ? past(masked, at + 1, skip) : at;
    // `<!…>`, `<?…>` and `</` before anything but a letter are bogus comments, to their first `>`
    // (`</>` is nothing at all); a tag reads its quoted values.
    const bogus = next === "!" || next === "?" || (closing && !isName(masked[nameAt] ?? ""));
    if (bogus) {
      const end = masked.indexOf(">", lt + 1);
      // CDATA ends at `]]>` inside SVG and MathML, at the first `>` elsewhere: both, or unsettled.
      if (masked.startsWith("<![CDATA[", lt) && (end === -1 || masked.indexOf("]]>", lt) !== end - 2)) unsettle(lt);
      tagEnds.set(lt, { end, liquid: masked.slice(lt, end === -1 ? masked.length : end).includes(UNKNOWN), bogus, name: "" });
      if (end === -1) break;
      i = end + 1;
      continue;
    }
    // The element's name; Liquid that splits it (`<t{% if a %}{% endif %}extarea>`, a name a branch
    // chooses) leaves which element it is to the rendering.
    let name = "";
    let gap = false;
    for (let j = nameAt; j < masked.length; j++) {
      const ch = masked[j] as string;
      if (ch === UNKNOWN) {
        gap = true;
        j = (skip(j) ?? j + 1) - 1;
        continue;
      }
      if (isHtmlSpace(ch) || ch === "/" || ch === ">") break;
      if (gap) unsettle(lt);
      name += ch.toLowerCase();
    }
    const found = scanTag(masked, lt + 1, masked.length, "tagName", skip);
    tagEnds.set(lt, { ...found, bogus: false, name });
    if (found.end === -1) break;
    i = found.end + 1;
    if (closing) continue;
    // Where SVG or MathML ends is left to the browser (breakouts, integration points, branches): from
    // the first one on, text elements are read by the strict rule.
    if (name === "svg" || name === "math") foreign = true;
    if (!TEXT_ELEMENTS.has(name)) continue;
    let end: number;
    if (!foreign && name !== "noscript") {
      // HTML text: to its end tag (plaintext: to the end), whatever it holds; but an end tag Liquid
      // writes may end it where the search does not.
      const close = new RegExp(`</${name}[\\t\\n\\f\\r />]`, "g");
      close.lastIndex = i;
      end = name === "plaintext" ? masked.length : (close.exec(lower)?.index ?? masked.length);
      // (A script holding `<!--` has escaped states of its own, where `</script>` may not end it.)
      if (/<\u0000|<\/[a-z]*\u0000/i.test(masked.slice(i, end)) || (name === "script" && masked.slice(i, end).includes("<!--"))) unsettle(i);
    } else {
      // A noscript (text with scripting, markup without), or text in SVG or MathML (markup there):
      // the first thing that looks like a tag must be its end tag. (An HTML comment holding nothing
      // tag-like, as old templates wrap their CSS in, reads alike either way.)
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
      const closes = first !== -1 && new RegExp(`^</${name}[\\t\\n\\f\\r />]`).test(lower.slice(first, first + name.length + 3));
      if (first !== -1 && !closes) unsettle(first);
      end = first === -1 ? masked.length : first;
    }
    const content = { begin: i, end };
    texts.push(content);
    if (name === "script") scripts.push(content);
    if (name === "style") styles.push(content);
    i = end;
  }
  return { opens, tagEnds, comments, texts, scripts, styles, unsettled };
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

/** The range of sorted, disjoint `ranges` holding `at` (its end too, with `inclusive`), by binary search. */
export const rangeAt = (ranges: Range[], at: number, inclusive = false): Range | undefined => {
  let low = 0;
  let high = ranges.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const range = ranges[mid] as Range;
    if (at < range.begin) high = mid - 1;
    else if (inclusive ? at > range.end : at >= range.end) low = mid + 1;
    else return range;
  }
  return undefined;
};

/**
 * The tokenizer's state before the character at each of `positions` (ascending), as a key: two
 * positions with the same key are read alike from there on. Each tag is scanned once, however many
 * positions fall inside it.
 */
export const statesAt = (m: Omit<Masking, "unsettled" | "source" | "pieces">, positions: number[]): string[] => {
  let scanned = { open: -1, at: 0, state: "tagName" as ScanState };
  return positions.map((at) => {
    const comment = rangeAt(m.comments, at);
    if (comment && at > comment.begin) return `comment@${comment.begin}`;
    // Up to its end tag's `<`, a text element's text.
    const text = rangeAt(m.texts, at, true);
    if (text) return `text@${text.begin}`;
    const open = lastBefore(m.opens, at);
    const end = open === -1 ? undefined : (m.tagEnds.get(open) as TagEnd);
    if (!end || (end.end !== -1 && end.end < at)) return "data";
    if (end.bogus) return `bogus@${open}`;
    if (scanned.open !== open || scanned.at > at) scanned = { open, at: open + 1, state: "tagName" };
    scanned = { open, at, state: scanTag(m.masked, scanned.at, at, scanned.state, m.skip).state };
    return `tag@${open}:${scanned.state}`;
  });
};
