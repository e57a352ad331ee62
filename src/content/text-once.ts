import { Parser } from "htmlparser2";
import { tidyText, toText } from "./html-text";
import { SPACED_FILTER } from "./engine";
import { LIQUID } from "./liquid-syntax";

// The text part of a campaign without `text` is read from its html. Converting html is far too slow
// to do for every recipient (milliseconds for a 20 KB template), so the html TEMPLATE is converted
// once per send: each Liquid tag or output is swapped for an inert placeholder, the html becomes
// text, and the tags come back; the result is a text template rendered like any other.

// Private-use characters: never in Liquid syntax, unchanged by case mapping, not whitespace, so a
// placeholder is one word that wrapping never splits.
const OPEN = "\uE000";
const CLOSE = "\uE001";
const PLACEHOLDER = /\uE000(\d+)\uE001/g;

/** A Liquid tag's name: `if` of `{%- if a -%}`. */
const TAG_NAME = /^\{%-?\s*(\w+)/;
/** Tags that open a block, and those that divide one into branches. */
const OPENS_BLOCK: ReadonlySet<string> = new Set(["if", "unless", "case", "for", "tablerow", "capture", "comment", "raw"]);
const DIVIDES_BLOCK: ReadonlySet<string> = new Set(["elsif", "else", "when"]);
/** Blocks whose content Liquid does not read: the tags in them are text, up to the first end tag. */
const VERBATIM: ReadonlySet<string> = new Set(["comment", "raw"]);
/** A tag that writes a value (`echo`, `cycle`, or a `liquid` tag holding one), whose line breaks asHtmlShowsIt cannot reach. */
const WRITES_VALUE = /^\{%-?\s*(?:echo|cycle)\b|^\{%-?\s*liquid\b[\s\S]*\b(?:echo|cycle)\b/;
/** A Liquid piece that trims the whitespace beside it. */
const TRIMS = /^\{[{%]-|-[}%]\}$/;
/** Elements whose text the converter does not print. */
const UNPRINTED: ReadonlySet<string> = new Set(["style", "script", "title"]);
/** Text without its spacing, zero-width characters included. */
const squeezed = (text: string) => text.replace(/[\s\u200b-\u200d\u2060\ufeff]+/g, "");
/** The one output whose value is known to be a URL (never empty, never `#…`, never a link's own text). */
const UNSUBSCRIBE_URL = /^\{\{-?\s*unsubscribe_url\s*-?\}\}$/;

/**
 * Whether the text the converter reads from the masked template, its Liquid put back, says for every
 * recipient what their own html says: the converter reads every branch at once, and decides some
 * things from what a value will be. Not so, and the text is read from each message's html, when
 * - a branch of a Liquid block (an if's, a case's, a loop's body, a comment) holds part of an
 *   element: the same elements must be open at each of a block's tags (its start, each
 *   elsif/else/when, its end), or the converter writes what the element adds where it ends, outside
 *   the branch (`{% if vip %}<a href="A">{% else %}<a href="B">{% endif %}Offer</a>` would give every
 *   reader both URLs; a link left open in a comment, its URL);
 * - a capture holds markup: it is converted where it is written, not where it is shown (`<li>`
 *   captured, then shown in a `<ul>`, would lose its bullet);
 * - a Liquid tag stands inside an `<ol>`: the converter numbers the items it sees, all of a loop's
 *   as one and those of every branch, where the html numbers those a recipient gets;
 * - Liquid stands inside a table with header cells: the converter lays such a table out in columns,
 *   and a loop or branch in one cell would take the row's other cells with it;
 * - a link's `href` holds Liquid and may render empty or as `#…` (the URL is left out then): unless
 *   it starts with fixed text, or is `unsubscribe_url`; or the URL may be the link's text (left out
 *   then, and shown bare where the text is empty): a text holding Liquid, or a fixed text that starts
 *   as the `href` does;
 * - a tag trims the whitespace around it (`{%-`, `-}}`): it would also trim the line breaks the
 *   converter writes between blocks;
 * - Liquid stands inside a `<pre>`, whose line breaks html keeps (elsewhere a value's line breaks
 *   print as spaces: asHtmlShowsIt), or a tag writes a value (`echo`, `cycle`), which that cannot reach.
 * Elements are read as the converter's parser (htmlparser2) reads them.
 */
const readsAlikeOnce = (masked: string, pieces: readonly string[], inVerbatim: ReadonlySet<number>): boolean => {
  if (pieces.some((piece) => TRIMS.test(piece))) return false;
  // Where the open elements change: the innermost then (its number stands for its ancestors too, so
  // the same number means the same elements open), whether an <ol> is among them, and the tables.
  type Here = { at: number; innermost: number; inOl: boolean; inPre: boolean; tables: number[] };
  const changes: Here[] = [];
  const open: { n: number; name: string }[] = [];
  const dataTables = new Set<number>();
  let numbered = 0;
  let alike = true;
  let link: { href: string; text: string } | undefined;
  const changed = () =>
    changes.push({
      at: parser.startIndex,
      innermost: open.at(-1)?.n ?? 0,
      inOl: open.some((e) => e.name === "ol"),
      inPre: open.some((e) => e.name === "pre"),
      tables: open.filter((e) => e.name === "table").map((e) => e.n),
    });
  const parser = new Parser({
    onopentag: (name, attributes) => {
      if (name === "th") {
        const table = open.findLast((e) => e.name === "table");
        if (table) dataTables.add(table.n);
      }
      open.push({ n: ++numbered, name });
      changed();
      if (name === "a") {
        // A link inside a link: which one the converter keeps is not worth reading out.
        if (link) alike = false;
        link = { href: (attributes.href ?? "").trim(), text: "" };
      }
    },
    ontext: (text) => {
      // What the converter prints of the link: not a style's, a script's or a title's text.
      if (link && !open.some((e) => UNPRINTED.has(e.name))) link.text += text;
    },
    onclosetag: (name) => {
      open.pop();
      changed();
      if (name === "a" && link) {
        if (!linkReadsAlike(link.href, link.text, pieces)) alike = false;
        link = undefined;
      }
    },
  });
  parser.end(masked);
  if (!alike) return false;
  const blocks: { name: string; innermost: number; elementsBefore: number }[] = [];
  let next = 0;
  let here: Omit<Here, "at"> = { innermost: 0, inOl: false, inPre: false, tables: [] };
  for (const m of masked.matchAll(PLACEHOLDER)) {
    for (let change = changes[next]; change !== undefined && change.at <= m.index; change = changes[++next]) here = change;
    if (here.inPre || here.tables.some((table) => dataTables.has(table))) return false;
    const piece = pieces[Number(m[1])] ?? "";
    const name = TAG_NAME.exec(piece)?.[1];
    const block = blocks.at(-1);
    if (name === undefined || inVerbatim.has(Number(m[1]))) continue;
    if (here.inOl || WRITES_VALUE.test(piece)) return false;
    if (OPENS_BLOCK.has(name)) blocks.push({ name, innermost: here.innermost, elementsBefore: next });
    else if (DIVIDES_BLOCK.has(name) || name.startsWith("end")) {
      if (block === undefined || block.innermost !== here.innermost) return false;
      if (name !== `end${block.name}`) {
        if (name.startsWith("end")) return false;
      } else {
        blocks.pop();
        if (block.name === "capture" && next > block.elementsBefore) return false;
      }
    }
  }
  return blocks.length === 0;
};

/**
 * Whether the converter decides a link's URL (shown, left out, shown bare) the same for every value
 * of its Liquid: an `href` holding Liquid must start with fixed text that is not `#…` (or be
 * `unsubscribe_url`), and the URL must never be the link's text, so the text holds no Liquid, nor
 * starts as the `href`'s fixed text does (`https://x.example/{{ p }}` shown as `https://x.example/abc`),
 * compared as the converter compares them: spacing aside.
 */
const linkReadsAlike = (href: string, linkText: string, pieces: readonly string[]): boolean => {
  const text = linkText.trim();
  if (text.includes(OPEN)) return false;
  const liquidAt = href.indexOf(OPEN);
  if (liquidAt < 0) return true;
  const only = /^\uE000(\d+)\uE001$/.exec(href)?.[1];
  if (only !== undefined) return UNSUBSCRIBE_URL.test(pieces[Number(only)] ?? "");
  const fixed = squeezed(href.slice(0, liquidAt));
  return fixed !== "" && !fixed.startsWith("#") && !squeezed(text).startsWith(fixed);
};

/** The pieces inside a raw or comment block, by number: text to Liquid, not tags or outputs. */
const verbatimPieces = (pieces: readonly string[]): ReadonlySet<number> => {
  const inside = new Set<number>();
  let block: string | undefined;
  pieces.forEach((piece, i) => {
    const name = TAG_NAME.exec(piece)?.[1];
    if (block === undefined) {
      if (name !== undefined && VERBATIM.has(name)) block = name;
    } else if (name === `end${block}`) block = undefined;
    else inside.add(i);
  });
  return inside;
};

/**
 * A text template derived from an html template; null when its Liquid does not survive conversion
 * or the text would not say what each recipient's html says (readsAlikeOnce).
 */
export const deriveTextTemplate = (htmlTemplate: string): string | null => {
  if (htmlTemplate.includes(OPEN) || htmlTemplate.includes(CLOSE)) return null;
  const pieces: string[] = [];
  const masked = htmlTemplate.replace(LIQUID, (piece) => `${OPEN}${pieces.push(piece) - 1}${CLOSE}`);
  // What `newline_to_br` prints breaks lines in the html (a `<br />` each), which a text read once
  // shows as spaces (asHtmlShowsIt): such html is read per message, its breaks as the reader sees them.
  if (pieces.some((piece) => piece.includes("newline_to_br"))) return null;
  // Tidied as a message's text is (its blank and blank-looking lines), before any value is known.
  const text = tidyText(toText(masked));
  // Liquid the html shows as text (`&#123;&#123; x &#125;&#125;`, `{<b></b>{ x }}`) would be Liquid
  // to the text template: such text is left to each message's html.
  const inVerbatim = verbatimPieces(pieces);
  if (/\{[{%]/.test(text) || !readsAlikeOnce(masked, pieces, inVerbatim)) return null;
  let restored = 0;
  const result = text.replace(PLACEHOLDER, (_, index: string) => {
    restored++;
    const piece = pieces[Number(index)] ?? "";
    // In a raw block, `{{ … }}` is text: back as written.
    return inVerbatim.has(Number(index)) ? piece : asHtmlShowsIt(piece);
  });
  // A piece lost (inside a tag's attributes, say, or in <head>) would change the template's meaning.
  return restored === pieces.length ? result : null;
};

/**
 * An output of the html as the text shows it: `escape` and `escape_once` change nothing in html (its
 * outputs are escaped once already), so in the text derived from it they are left out, or the reader
 * would see `&amp;` where the html shows `&`.
 */
const withoutHtmlEscaping = (piece: string) =>
  piece.startsWith("{{") ? piece.replace(/\|\s*escape(?:_once)?\s*(?=\||-?\}\}$)/g, "") : piece;

/**
 * An output of the html as the text shows it, its line breaks as spaces: html shows a value's line
 * breaks as spaces (outside `<pre>`, whose Liquid takes the other path), and a line break left in
 * would end a quoted or listed line early (`> line one`, then `line two` unquoted).
 */
const asHtmlShowsIt = (piece: string) => {
  const output = withoutHtmlEscaping(piece);
  return output.startsWith("{{") && output.endsWith("}}") ? `${output.slice(0, -2)} | ${SPACED_FILTER} }}` : output;
};
