import { escapeHtml, isolatedHtml, withoutDirectionControls } from "../lib/html";
import { LIQUID } from "./liquid-syntax";
import { scanTag } from "./markup-reader";

// What the service adds to every campaign message: the preheader as hidden preview text at the top
// of the html, and the footer with the unsubscribe link and the newsletter's postal address unless
// the message shows `unsubscribe_url` itself. The blocks are plain strings, mostly built once
// per campaign; a template gets a marker tag where each goes (`{% service_block … %}`, which only the
// layout engines know), and the marker writes out the block of the message being rendered.

export type BlockName = "preheader" | "footer_html" | "footer_text";
export type ServiceBlocks = Record<BlockName, string>;

export const blockMarker = (name: BlockName) => `{% service_block ${name} %}`;

const PREHEADER_OPEN =
  '<div style="display:none;font-size:1px;line-height:1px;max-height:0;max-width:0;opacity:0;overflow:hidden;mso-hide:all">';

/**
 * After the preheader, inside its hidden block: inbox lists show the preview text, then whatever text
 * follows it in the html; a run of invisible characters (a combining grapheme joiner, a zero-width
 * non-joiner and a no-break space, 90 times) fills the rest of the preview line instead. Written as
 * nine lines of ten (a line break is whitespace there, as the no-break spaces are): no line of the
 * service's own markup comes near the 998 characters RFC 5322 allows.
 */
const PREHEADER_PADDING = `\n${"&#847;&zwnj;&nbsp;".repeat(10)}`.repeat(9);

/**
 * The footer's block: part of the message, not something appended to it. Centred at the width most
 * newsletters are (600 px) with side padding, so it lines up under a centred layout and keeps off a
 * phone's edges; the template's own text colour, as it is (a fixed grey would be unreadable on a dark
 * template; made lighter, a grey body text's footer fell under WCAG's 4.5:1), a rule in a grey that
 * shows on light and dark; English, so it keeps its own
 * direction and language inside a right-to-left message; a long name wraps instead of widening the page.
 */
const FOOTER_STYLE =
  'dir="ltr" lang="en" style="box-sizing:border-box;max-width:600px;margin:32px auto 0;padding:16px 16px 0;' +
  'border-top:1px solid rgba(128,128,128,0.35);font:12px/1.5 Arial,Helvetica,sans-serif;text-align:center;' +
  'overflow-wrap:anywhere;word-wrap:break-word"';

/** A template with a dark mode of its own (`@media (prefers-color-scheme: dark)`). */
const DARK_MODE = /prefers-color-scheme\s*:\s*dark/i;

/**
 * The footer's opening. In a template with a dark mode of its own, the text colour the footer takes
 * from `<body>` is the light one (a dark mode recolours its own elements, seldom `<body>`'s text): there
 * the footer brings its own dark-mode colours, light text on a dark band, readable whatever the
 * template's dark background is. Other templates keep one scheme, and the footer their text colour.
 */
const footerOpen = (htmlSource: string) =>
  DARK_MODE.test(htmlSource)
    ? "<style>@media (prefers-color-scheme: dark){.nl-service-footer{background:#18181b!important;color:#e4e4e7!important;" +
      "padding-bottom:16px!important}.nl-service-footer a{color:#e4e4e7!important}}</style>" +
      `<div class="nl-service-footer" ${FOOTER_STYLE}>`
    : `<div ${FOOTER_STYLE}>`;

const RECEIVING = "You’re receiving this email because you subscribed to";

/**
 * The text footer's first line: the signature delimiter (RFC 3676, dash dash space), which mail
 * clients grey and leave out of replies, so a reply does not quote the reader's unsubscribe link.
 */
export const SIGNATURE_DELIMITER = "-- \n";

/** The postal address in the html footer: its lines as lines in every client (not all of them apply `white-space`). */
const htmlAddressLines = (address: string, margin: string) => `\n<p style="${margin}">${escapeHtml(address).replace(/\r\n?|\n/g, "<br>\n")}</p>`;

const lineFeedsOf = (text: string) => text.replace(/\r\n?/g, "\n");

/**
 * Text that goes into a header or onto one line of the footer: every line break (CR, LF, NEL, the
 * Unicode line and paragraph separators) and every other control character (a filter such as
 * `url_decode` can make one) becomes a space.
 */
export const oneLine = (value: string) => value.replace(/[\u0000-\u001F\u007F-\u009F\u2028\u2029]+/g, " ").trim();

/**
 * The blocks of one newsletter's messages: everything but the preheader and the unsubscribe link is
 * fixed, so a message's blocks cost a few concatenations.
 */
export const serviceBlocks = (newsletter: { name: string; address: string | null }, htmlSource: string) => {
  // A name saved before names had to be one line may still hold a line break: the footer's sentence stays
  // one. Its direction controls go (an override left open reversed the sentence and the Unsubscribe
  // link after it), and in html it is isolated, as on the unsubscribe page.
  const name = withoutDirectionControls(oneLine(newsletter.name));
  const htmlAddress = newsletter.address ? htmlAddressLines(newsletter.address, "margin:8px 0 0") : "";
  const htmlBefore = `${footerOpen(htmlSource)}\n<p style="margin:0">${RECEIVING} ${isolatedHtml(name)}. <a href="`;
  const htmlAfter = `" style="color:inherit;text-decoration:underline">Unsubscribe</a></p>${htmlAddress}</div>`;
  const textBefore = `\n\n${SIGNATURE_DELIMITER}${RECEIVING} ${name}.\nUnsubscribe: `;
  const textAfter = newsletter.address ? `\n${lineFeedsOf(newsletter.address)}` : "";
  return (preheader: string, unsubscribeUrl: string): ServiceBlocks => ({
    preheader: preheader ? `${PREHEADER_OPEN}${escapeHtml(preheader)}${PREHEADER_PADDING}</div>` : "",
    footer_html: `${htmlBefore}${escapeHtml(unsubscribeUrl)}${htmlAfter}`,
    footer_text: `${textBefore}${unsubscribeUrl}${textAfter}`,
  });
};

/** Where in the html template the service's blocks may go: between top-level template pieces only. */
export type TopLevelText = { begin: number; end: number }[];

const COMMENT = /<!--[\s\S]*?(?:-->|$)/g;
const BODY_OPEN = /<body\b/gi;
const HEAD_CLOSE = /<\/head\s*>/gi;
const HTML_OPEN = /<html\b/gi;
/** How far an opening `<body>` or `<html>` tag is read for its end (a data: URI background can be long). */
const TAG_READ = 64 * 1024;
/** How much of a template the placement reads for such tags' ends, all together. */
const TAG_READ_BUDGET = 256 * 1024;
const DOCTYPE = /^\s*<!doctype\b[^>]*>/gi;
const BODY_CLOSE = /<\/body\s*>/gi;
const HTML_CLOSE = /<\/html\s*>/gi;

/**
 * The html template with the preheader's marker just inside `<body>` and the footer's just before
 * the last `</body>`. Tags are looked for outside Liquid and outside html comments, and only where
 * the template's own top-level text is (`text`: the ranges of its top-level text pieces), so a block
 * never lands inside a tag, an output, a comment or a branch. Without such a `<body>`, the preheader
 * goes after `</head>`, `<html>` or the doctype, else first; without such a `</body>`, the footer goes
 * before `</html>`, else last. The footer's marker is always placed: whether a message shows the
 * footer is decided per message (renderMessage), by whether it carries the unsubscribe link itself.
 */
export const wrapHtml = (html: string, text: TopLevelText): string => {
  const masked = html.replace(LIQUID, blank).replace(COMMENT, blank);
  const topLevel = (at: number) => text.some((piece) => piece.begin <= at && at <= piece.end);
  const budget = { left: TAG_READ_BUDGET };
  const open = [BODY_OPEN, HEAD_CLOSE, HTML_OPEN, DOCTYPE].map((tag) => firstWholeTag(masked, tag, topLevel, budget)).find((m) => m !== undefined);
  const start = open ? open.end : 0;
  const close = [BODY_CLOSE, HTML_CLOSE]
    .map((tag) => [...masked.matchAll(tag)].filter((m) => m.index >= start && topLevel(m.index)).at(-1))
    .find((m) => m !== undefined);
  const end = close?.index ?? html.length;
  return `${html.slice(0, start)}${blockMarker("preheader")}${html.slice(start, end)}${blockMarker("footer_html")}${html.slice(end)}`;
};

const blank = (piece: string) => " ".repeat(piece.length);

/**
 * The first match of `tag` in the template's top-level markup, as far as the tag's end: for a tag's
 * start (`<body`), read as a browser reads it, so a `>` in a quoted attribute value (`data-note="5 > 3"`)
 * does not end it; a whole-tag pattern (`</head>`, the doctype) as it matched. Matches are tried in
 * order and reading stops at the first that fits; all the tags one template's placement reads share
 * `budget` characters, so a template of nothing but unclosed `<body` costs no more than that.
 */
const firstWholeTag = (masked: string, tag: RegExp, topLevel: (at: number) => boolean, budget: { left: number }) => {
  for (const m of masked.matchAll(tag)) {
    if (!topLevel(m.index)) continue;
    if (m[0].endsWith(">")) {
      if (topLevel(m.index + m[0].length)) return { index: m.index, end: m.index + m[0].length };
      continue;
    }
    if (budget.left <= 0) return undefined;
    const to = Math.min(masked.length, m.index + 1 + Math.min(TAG_READ, budget.left));
    const { end } = scanTag(masked, m.index + 1, to);
    budget.left -= (end === -1 ? to : end) - m.index;
    if (end !== -1 && topLevel(end + 1)) return { index: m.index, end: end + 1 };
  }
  return undefined;
};

/** The end of an `<a …>` tag's text just before an href's value (quoted or not). */
const HREF_BEFORE = /<a\s[^<>]*?\bhref\s*=\s*["']?$/i;
/** How far before a value its `<a … href=` may start. */
const TAG_LOOKBACK = 512;

/**
 * Whether the text at `index` of `html` is the href of a link a reader can follow: an `<a>` element's
 * href, outside html comments. (A link printed in a comment, a title, a style or an attribute of
 * another element is not one.)
 */
export const linksAt = (html: string, index: number, inComment = insideComment(html, index)): boolean =>
  !inComment && HREF_BEFORE.test(html.slice(Math.max(0, index - TAG_LOOKBACK), index));

const insideComment = (html: string, index: number): boolean => {
  const open = html.lastIndexOf("<!--", index);
  return open !== -1 && html.lastIndexOf("-->", index) < open;
};

/** Tracks, over text given piece by piece, whether its end is inside an html comment. */
export class CommentState {
  inside = false;
  feed(text: string) {
    let at = 0;
    for (;;) {
      const next = text.indexOf(this.inside ? "-->" : "<!--", at);
      if (next === -1) return;
      at = next + (this.inside ? 3 : 4);
      this.inside = !this.inside;
    }
  }
}

/**
 * A rendered part without the footer written at `at`, when the part shows the unsubscribe link
 * elsewhere: in html, as a link a reader can follow (linksAt); in text, anywhere. As it is otherwise.
 */
export const withoutRedundantFooter = (out: string, footer: string, at: number | undefined, url: string, html: boolean, address?: AddressFooter | null): string => {
  if (at === undefined || !out.startsWith(footer, at)) return out;
  for (let i = out.indexOf(url); i !== -1; i = out.indexOf(url, i + 1)) {
    if (i >= at && i < at + footer.length) continue;
    if (!html || linksAt(out, i)) return withoutShownFooterAt(out, at, footer.length, address);
  }
  return out;
};

/**
 * The newsletter's postal address as a footer of its own, for a part that shows the unsubscribe
 * link itself (and so goes without the service's footer) but not the address: anti-spam laws want
 * the address in every message, and the author may have placed only the link.
 */
export type AddressFooter = {
  footer: string;
  shownIn: (out: string) => boolean;
  /** The template cannot show the address (it names no address variable and writes none of it): the footer always goes in. */
  neverShown: boolean;
};

/** The part with the `length` characters of footer at `at` taken out, and the address alone in their place unless the part shows it. */
export const withoutShownFooterAt = (out: string, at: number, length: number, address: AddressFooter | null | undefined): string => {
  const without = length === 0 ? out : out.slice(0, at) + out.slice(at + length);
  if (!address || address.shownIn(without)) return without;
  return out.slice(0, at) + address.footer + out.slice(at + length);
};

const REGEXP_SPECIAL = /[.*+?^${}()|[\]\\]/g;
/** How an html template may print each character escaping changes: as it is (a literal in the template), or escaped (an output). */
const HTML_FORMS: Record<string, string> = { "&": "(?:&|&amp;|&#38;)", "<": "(?:<|&lt;|&#60;)", ">": "(?:>|&gt;|&#62;)", '"': '(?:"|&quot;|&#34;)', "'": "(?:'|&#39;|&apos;)" };
const wordPattern = (word: string, html: boolean) =>
  [...word].map((ch) => (html && HTML_FORMS[ch]) || ch.replace(REGEXP_SPECIAL, "\\$&")).join("");

/**
 * What may stand between two words of an address that a part shows: whitespace, the punctuation a
 * template joins its lines with on one line (`| replace: "\n", ", "`), `<br>` (`newline_to_br`'s),
 * and in html `&nbsp;` and an escaped `<br />` (what `newline_to_br` prints when a filter follows it).
 */
const TEXT_BETWEEN_WORDS = "(?:[\\s,;|·•]|<br\\s*/?>)+";
const HTML_BETWEEN_WORDS = "(?:[\\s,;|·•]|&nbsp;|&#160;|<br\\s*/?>|&lt;br\\s*/?&gt;)+";

/**
 * Whether a part rendered from `source` shows `address`: its words in order, whatever separates
 * them (above). Its longest word is looked for first (a
 * plain search), and a template that neither names a variable `…address…` nor writes that word
 * cannot show it at all: most messages need no search, and the rest one `indexOf` before any regex.
 */
const addressFooter = (footer: string, address: string, source: string, html: boolean): AddressFooter => {
  const all = address.trim().split(/\s+/);
  // A word of punctuation alone (`Acme | Corp`) is a separator like any other (and would put two
  // runs of separators side by side in the search, which backtracks over a long run of them).
  const spelled = all.filter((word) => !/^[,;|·•]+$/.test(word));
  const words = spelled.length > 0 ? spelled : all;
  const plain = words.filter((word) => !html || escapeHtml(word) === word);
  const key = plain.reduce((longest, word) => (word.length > longest.length ? word : longest), "");
  if (key !== "" && !source.includes("address") && !source.includes(key)) return { footer, shownIn: () => false, neverShown: true };
  const pattern = new RegExp(words.map((word) => wordPattern(word, html)).join(html ? HTML_BETWEEN_WORDS : TEXT_BETWEEN_WORDS));
  return { footer, shownIn: (out) => (key === "" || out.includes(key)) && pattern.test(out), neverShown: false };
};

/** The address footers of a newsletter's messages (null without an address), for parts rendered from `htmlSource` and `textSource`. */
export const addressFooters = (address: string | null, htmlSource: string, textSource: string): { html: AddressFooter; text: AddressFooter } | null => {
  if (!address) return null;
  return {
    html: addressFooter(`${footerOpen(htmlSource)}${htmlAddressLines(address, "margin:0")}</div>`, address, htmlSource, true),
    text: addressFooter(`\n\n${SIGNATURE_DELIMITER}${lineFeedsOf(address)}`, address, textSource, false),
  };
};
