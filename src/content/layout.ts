import { escapeHtml } from "../lib/html";
import { LIQUID } from "./liquid-syntax";

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
 * non-joiner and a no-break space, repeated) fills the rest of the preview line instead.
 */
const PREHEADER_PADDING = "&#847;&zwnj;&nbsp;".repeat(90);

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
export const serviceBlocks = (newsletter: { name: string; address: string | null }) => {
  // A name saved before names had to be one line may still hold a line break: the footer's sentence stays one.
  const name = oneLine(newsletter.name);
  // Its lines as lines in every client (not all of them apply `white-space`).
  const htmlAddress = newsletter.address ? `<p style="margin:8px 0 0">${escapeHtml(newsletter.address).replace(/\r?\n/g, "<br>")}</p>` : "";
  const htmlBefore =
    '<div style="margin:32px 0 0;padding:16px 0 0;border-top:1px solid #e5e5e5;font:12px/1.5 Arial,sans-serif;color:#666666">' +
    `<p style="margin:0">You receive this email because you subscribed to ${escapeHtml(name)}. <a href="`;
  const htmlAfter = `" style="color:#666666">Unsubscribe</a></p>${htmlAddress}</div>`;
  const textBefore = `\n\n--\nYou receive this email because you subscribed to ${name}.\nUnsubscribe: `;
  const textAfter = newsletter.address ? `\n${newsletter.address.replace(/\r\n?/g, "\n")}` : "";
  return (preheader: string, unsubscribeUrl: string): ServiceBlocks => ({
    preheader: preheader ? `${PREHEADER_OPEN}${escapeHtml(preheader)}${PREHEADER_PADDING}</div>` : "",
    footer_html: `${htmlBefore}${escapeHtml(unsubscribeUrl)}${htmlAfter}`,
    footer_text: `${textBefore}${unsubscribeUrl}${textAfter}`,
  });
};

/** Where in the html template the service's blocks may go: between top-level template pieces only. */
export type TopLevelText = { begin: number; end: number }[];

const COMMENT = /<!--[\s\S]*?(?:-->|$)/g;
const BODY_OPEN = /<body\b[^>]*>/gi;
const HEAD_CLOSE = /<\/head\s*>/gi;
const HTML_OPEN = /<html\b[^>]*>/gi;
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
  const open = [BODY_OPEN, HEAD_CLOSE, HTML_OPEN, DOCTYPE]
    .map((tag) => [...masked.matchAll(tag)].find((m) => topLevel(m.index) && topLevel(m.index + m[0].length)))
    .find((m) => m !== undefined);
  const start = open ? open.index + open[0].length : 0;
  const close = [BODY_CLOSE, HTML_CLOSE]
    .map((tag) => [...masked.matchAll(tag)].filter((m) => m.index >= start && topLevel(m.index)).at(-1))
    .find((m) => m !== undefined);
  const end = close?.index ?? html.length;
  return `${html.slice(0, start)}${blockMarker("preheader")}${html.slice(start, end)}${blockMarker("footer_html")}${html.slice(end)}`;
};

const blank = (piece: string) => " ".repeat(piece.length);

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
export const withoutRedundantFooter = (out: string, footer: string, at: number | undefined, url: string, html: boolean): string => {
  if (at === undefined || !out.startsWith(footer, at)) return out;
  for (let i = out.indexOf(url); i !== -1; i = out.indexOf(url, i + 1)) {
    if (i >= at && i < at + footer.length) continue;
    if (!html || linksAt(out, i)) return out.slice(0, at) + out.slice(at + footer.length);
  }
  return out;
};
