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
 * The blocks of one newsletter's messages: everything but the preheader and the unsubscribe link is
 * fixed, so a message's blocks cost a few concatenations.
 */
export const serviceBlocks = (newsletter: { name: string; address: string | null }) => {
  const htmlAddress = newsletter.address ? `<p style="margin:8px 0 0;white-space:pre-line">${escapeHtml(newsletter.address)}</p>` : "";
  const htmlBefore =
    '<div style="margin:32px 0 0;padding:16px 0 0;border-top:1px solid #e5e5e5;font:12px/1.5 Arial,sans-serif;color:#666666">' +
    `<p style="margin:0">You receive this email because you subscribed to ${escapeHtml(newsletter.name)}. <a href="`;
  const htmlAfter = `" style="color:#666666">Unsubscribe</a></p>${htmlAddress}</div>`;
  const textBefore = `\n\n--\nYou receive this email because you subscribed to ${newsletter.name}.\nUnsubscribe: `;
  const textAfter = newsletter.address ? `\n${newsletter.address}` : "";
  return (preheader: string, unsubscribeUrl: string): ServiceBlocks => ({
    preheader: preheader ? `${PREHEADER_OPEN}${escapeHtml(preheader)}</div>` : "",
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

/**
 * A rendered part without the footer written at `at`, when the part carries the unsubscribe link
 * elsewhere (its template placed `unsubscribe_url` and this message shows it); as it is otherwise.
 */
export const withoutRedundantFooter = (out: string, footer: string, at: number | undefined, url: string): string => {
  if (at === undefined || !out.startsWith(footer, at)) return out;
  const first = out.indexOf(url);
  const elsewhere = first !== -1 && (first < at || out.indexOf(url, at + footer.length) !== -1);
  return elsewhere ? out.slice(0, at) + out.slice(at + footer.length) : out;
};
