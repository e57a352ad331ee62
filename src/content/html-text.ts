import { compile } from "html-to-text";
import { Parser } from "htmlparser2";

// Text read from html: the converter (html-to-text, with the layout rules of mail), the nesting it
// can read, and the tidying every text part gets. text-once.ts reads a text template from an html
// template with it.

type Node = { type?: string; name?: string; data?: string; attribs?: Record<string, string>; children?: Node[]; parent?: Node | null };
type Format = (elem: Node, walk: unknown, builder: { options: { formatters: Record<string, Format> } }, options: unknown) => void;

/** Whether an element is inside an `<a>`. */
const insideLink = (node: Node): boolean => {
  for (let at = node.parent; at; at = at.parent) if (at.type === "tag" && at.name === "a") return true;
  return false;
};

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
    linkLabel: ((elem, _walk, builder) => {
      const alt = elem.attribs?.alt?.trim();
      if (alt && insideLink(elem)) (builder as unknown as { addInline: (text: string) => void }).addInline(alt);
    }) as Format,
    table: ((elem, walk, builder, options) =>
      (hasHeaderCell(elem) && !moreCellsThan(elem, MAX_DATA_CELLS) ? builder.options.formatters.dataTable : builder.options.formatters.block)?.(elem, walk, builder, options)) as Format,
  } as never,
  selectors: [
    // Tracking pixels and decorative images have nothing to say in text; nor has a title, which no
    // client shows (even when the html has no <body>). Not the whole <head>: a template that opens
    // one and never closes it has its content there, as a browser would not.
    // An image inside a link is its label (an image button, a social icon): its alt text stays.
    { selector: "img", format: "linkLabel" },
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
 * html no text part can be read from at a bounded cost: elements nested deeper than the converter's
 * recursion goes (some thousands of unclosed tags), or more elements than it reads in good time.
 */
export class UnreadableHtml extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnreadableHtml";
  }
}

const nestedTooDeep = () =>
  new UnreadableHtml(
    "the html nests its elements too deeply to read a text part from it (thousands of tags left open, inside one another?); close them, or give the campaign a text of its own",
  );

/**
 * Elements the html may hold for a text part to be read from it. The converter's work grows with
 * them (some 6 µs each: 150,000 paragraphs, 1.2 MB printed by a loop, took 0.7 s a message), far
 * more than with the text's length; a long newsletter holds a few thousand.
 */
const MAX_ELEMENTS = 10_000;

const tooManyElements = () =>
  new UnreadableHtml(
    `the html holds more than ${MAX_ELEMENTS} elements, too many to read a text part from it (a loop printing markup too many times?); print fewer, or give the campaign a text of its own`,
  );

/**
 * How deep elements may nest for a text part to be read from the html. The converter's work grows
 * faster than the depth (1,500 nested blockquotes, 156 bytes of template with a loop, took 5 s a
 * message); mail nests tables in tables some tens deep.
 */
const MAX_NESTING = 256;

/**
 * Throws UnreadableHtml when elements of `html` nest deeper than MAX_NESTING or number more than
 * MAX_ELEMENTS, as the converter's own parser (htmlparser2) reads them: elements it closes by itself
 * (a paragraph when a block opens, a list item when the next opens, cells, void elements) nest
 * nothing; a script's or a style's text is no markup. The parser's events alone, without a document
 * built, stopping at the first element past a limit.
 */
const checkReadable = (html: string): void => {
  let depth = 0;
  let elements = 0;
  const parser = new Parser({
    onopentag: () => {
      if (++depth > MAX_NESTING) throw nestedTooDeep();
      if (++elements > MAX_ELEMENTS) throw tooManyElements();
    },
    onclosetag: () => {
      depth--;
    },
  });
  parser.end(html);
};

/** The converter, its stack overflow on deep nesting reported as UnreadableHtml. */
export const toText = (html: string): string => {
  checkReadable(html);
  try {
    return convert(bodyToEnd(html));
  } catch (err) {
    if (err instanceof RangeError && /call stack/i.test(err.message)) throw nestedTooDeep();
    throw err;
  }
};

/** Readable text of rendered html: links kept as URLs, images dropped. */
export const htmlToText = (html: string): string => tidyText(toText(html));

/** One kind of line ending in a text part: text written with CRLF (or CR) gets LF, as the footer has. */
export const lineFeeds = (text: string): string => (text.includes("\r") ? text.replace(/\r\n?/g, "\n") : text);

/** Whether the line that ends at `at` (before its trailing spaces) reads `--`. */
const isDelimiterLine = (all: string, at: number) => at >= 2 && all.startsWith("--", at - 2) && (at === 2 || all[at - 3] === "\n");

/**
 * Blank lines left by tags that rendered nothing collapse to one, and so do lines that only look
 * blank (a spacer cell's `&nbsp;` or `&zwnj;`); no trailing space; LF line endings.
 */
export const tidyText = (text: string): string =>
  lineFeeds(text)
    .replace(/^[ \t\u00a0\u034f\u200b-\u200d\u2060\ufeff]+$/gm, "")
    // A run of spaces is matched from its start only (the lookbehind), so a long run costs one pass;
    // a signature delimiter (`-- `, the footer's first line) keeps its space.
    .replace(/(?<![ \t])[ \t]+\n/g, (_spaces: string, at: number, all: string) => (isDelimiterLine(all, at) ? " \n" : "\n"))
    .replace(/\n{3,}/g, "\n\n")
    .trim();
