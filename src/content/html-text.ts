import { compile } from "html-to-text";
import { Parser } from "htmlparser2";
import { LIQUID } from "./liquid-syntax";

// The text part of a campaign without `text` is read from its html. Converting html is far too slow
// to do for every recipient (milliseconds for a 20 KB template), so the html TEMPLATE is converted
// once per send: each Liquid tag or output is swapped for an inert placeholder, the html becomes
// text, and the tags come back; the result is a text template rendered like any other.

type Node = { type?: string; name?: string; data?: string; attribs?: Record<string, string>; children?: Node[] };
type Format = (elem: Node, walk: unknown, builder: { options: { formatters: Record<string, Format> } }, options: unknown) => void;

/** Whether a table holds header cells of its own (not only inside a table nested in one of its cells). */
const hasHeaderCell = (node: Node): boolean =>
  (node.children ?? []).some((child) => child.type === "tag" && (child.name === "th" || (child.name !== "table" && hasHeaderCell(child))));

/**
 * Cells a table laid out in columns may have: the converter's column layout costs time that grows
 * faster than the table (a 25,000-column table took seconds), and a table that large reads as well
 * one cell after the other.
 */
const MAX_DATA_CELLS = 1_000;

/** Whether a table has more than `limit` cells of its own (counting stops there). */
const moreCellsThan = (node: Node, limit: number): boolean => {
  let count = 0;
  const visit = (parent: Node): boolean =>
    (parent.children ?? []).some((child) => {
      if (child.type !== "tag" || child.name === "table") return false;
      if ((child.name === "td" || child.name === "th") && ++count > limit) return true;
      return visit(child);
    });
  return visit(node);
};

const convert = compile({
  wordwrap: 78,
  formatters: {
    // A table with header cells holds data: a row per line, its cells in columns (up to MAX_DATA_CELLS).
    // Any other lays a message out: its cells are blocks, read one after the other.
    table: ((elem, walk, builder, options) =>
      (hasHeaderCell(elem) && !moreCellsThan(elem, MAX_DATA_CELLS) ? builder.options.formatters.dataTable : builder.options.formatters.block)?.(elem, walk, builder, options)) as Format,
  } as never,
  selectors: [
    // Tracking pixels and decorative images have nothing to say in text; nor has a title, which no
    // client shows (even when the html has no <body>). Not the whole <head>: a template that opens
    // one and never closes it has its content there, as a browser would not.
    { selector: "img", format: "skip" },
    { selector: "title", format: "skip" },
    { selector: "a", options: { hideLinkHrefIfSameAsText: true, linkBrackets: ["<", ">"] } },
    // html-to-text drops `mailto:`, which leaves `<editor@example.com?subject=…>`: neither a URL nor
    // an address. The scheme stays.
    { selector: 'a[href^="mailto:"]', format: "anchor", options: { linkBrackets: ["<", ">"], pathRewrite: (path: string) => `mailto:${path}` } },
    ...["h1", "h2", "h3", "h4", "h5", "h6"].map((selector) => ({ selector, options: { uppercase: false } })),
    { selector: "table", format: "table", options: { uppercaseHeaderCells: false, maxColumnWidth: 40 } },
    { selector: "tr", format: "block" },
    { selector: "td", format: "block" },
    { selector: "th", format: "block" },
  ],
});

/**
 * What html-to-text reads: the body ends at the end of the document. Browsers and mail clients show
 * what a stray `</body>` or `</html>` is followed by; the converter would stop at the first one.
 */
const bodyToEnd = (html: string) => html.replace(/<\/(?:body|html)\s*>/gi, "");

/**
 * html whose elements nest deeper than the converter's recursion goes (some thousands of unclosed
 * tags): no text part can be read from it.
 */
export class NestedTooDeep extends Error {
  constructor() {
    super("the html nests its elements too deeply to read a text part from it (thousands of tags left open, inside one another?); close them, or give the campaign a text of its own");
    this.name = "NestedTooDeep";
  }
}

/**
 * How deep elements may nest for a text part to be read from the html. The converter's work grows
 * faster than the depth (1,500 nested blockquotes, 156 bytes of template with a loop, took 5 s a
 * message); mail nests tables in tables some tens deep.
 */
export const MAX_NESTING = 256;

/** Thrown from the parser's callback to stop reading at the first element past the limit. */
class DeeperThan extends Error {}

/**
 * Whether elements of `html` nest deeper than `limit`, as the converter's own parser (htmlparser2)
 * reads them: elements it closes by itself (a paragraph when a block opens, a list item when the
 * next opens, cells, void elements) nest nothing; a script's or a style's text is no markup. The
 * parser's events alone, without a document built, stopping at the first element past the limit.
 */
const nestsDeeperThan = (html: string, limit: number): boolean => {
  let depth = 0;
  const parser = new Parser({
    onopentag: () => {
      if (++depth > limit) throw new DeeperThan();
    },
    onclosetag: () => {
      depth--;
    },
  });
  try {
    parser.end(html);
  } catch (err) {
    if (err instanceof DeeperThan) return true;
    throw err;
  }
  return false;
};

/** The converter, its stack overflow on deep nesting reported as NestedTooDeep. */
const toText = (html: string): string => {
  if (nestsDeeperThan(html, MAX_NESTING)) throw new NestedTooDeep();
  try {
    return convert(bodyToEnd(html));
  } catch (err) {
    if (err instanceof RangeError && /call stack/i.test(err.message)) throw new NestedTooDeep();
    throw err;
  }
};

/** Readable text of rendered html: links kept as URLs, images dropped. */
export const htmlToText = (html: string): string => tidyText(toText(html));

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
 *   it starts with fixed text, or is `unsubscribe_url`; or a link's text holds Liquid (the URL is left
 *   out where it is the link's text), unless its `href` is `unsubscribe_url`;
 * - a tag trims the whitespace around it (`{%-`, `-}}`): it would also trim the line breaks the
 *   converter writes between blocks;
 * - Liquid stands inside a `<pre>`, whose line breaks html keeps (elsewhere a value's line breaks
 *   print as spaces: asHtmlShowsIt), or a tag writes a value (`echo`, `cycle`), which that cannot reach.
 * Elements are read as the converter's parser (htmlparser2) reads them.
 */
const readsAlikeOnce = (masked: string, pieces: readonly string[]): boolean => {
  if (pieces.some((piece) => TRIMS.test(piece))) return false;
  // Where the open elements change: the innermost then (its number stands for its ancestors too, so
  // the same number means the same elements open), whether an <ol> is among them, and the tables.
  type Here = { at: number; innermost: number; inOl: boolean; inPre: boolean; tables: number[] };
  const changes: Here[] = [];
  const open: { n: number; name: string }[] = [];
  const dataTables = new Set<number>();
  let numbered = 0;
  let alike = true;
  let link: { href: string; liquidHref: boolean; fixedHref: boolean; unsubscribeHref: boolean; text: string } | undefined;
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
        const href = (attributes.href ?? "").trim();
        const only = /^\uE000(\d+)\uE001$/.exec(href)?.[1];
        const unsubscribeHref = only !== undefined && UNSUBSCRIBE_URL.test(pieces[Number(only)] ?? "");
        link = { href, liquidHref: href.includes(OPEN), fixedHref: unsubscribeHref || (!href.startsWith(OPEN) && !href.startsWith("#")), unsubscribeHref, text: "" };
      }
    },
    ontext: (text) => {
      if (link) link.text += text;
    },
    onclosetag: (name) => {
      open.pop();
      changed();
      if (name === "a" && link) {
        const text = link.text.trim();
        // A fixed text the Liquid href may render as (`https://x.example/{{ p }}` shown as `https://x.example/abc`).
        const fixed = link.liquidHref ? link.href.slice(0, link.href.indexOf(OPEN)) : "";
        const textMayBeHref = fixed !== "" && text.startsWith(fixed);
        if ((link.liquidHref && !link.fixedHref) || (text.includes(OPEN) && !link.unsubscribeHref) || textMayBeHref) alike = false;
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
    if (name === undefined || (block && VERBATIM.has(block.name) && name !== `end${block.name}`)) continue;
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
  const text = toText(masked);
  if (!readsAlikeOnce(masked, pieces)) return null;
  const inVerbatim = verbatimPieces(pieces);
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

/** One kind of line ending in a text part: text written with CRLF (or CR) gets LF, as the footer has. */
export const lineFeeds = (text: string): string => (text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text);

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
  return output.startsWith("{{") && output.endsWith("}}") ? `${output.slice(0, -2)} | replace: "\r", " " | replace: "\n", " " }}` : output;
};

/** Blank lines left by tags that rendered nothing collapse to one; no trailing space; LF line endings. */
export const tidyText = (text: string): string =>
  lineFeeds(text)
    .replace(/[ \t]+\n/g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
