import { escapeHtml } from "../lib/html";
import { LIQUID } from "./liquid-syntax";

// What the service adds to every campaign message: the preheader as hidden preview text at the top
// of the html, and the footer with the unsubscribe link and the newsletter's postal address when the
// template does not place `unsubscribe_url` itself. The blocks are plain strings, mostly built once
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

const BODY_OPEN = /<body\b[^>]*>/i;
const BODY_CLOSE = /<\/body\s*>/gi;

/**
 * The html template with the preheader's marker just inside `<body>` and, when `footer`, the footer's
 * just before the last `</body>`; without a body element, at the very start and end. Tags are looked
 * for outside Liquid only (`{{ "<body>" }}` is not one), so an insertion never lands inside a tag or an
 * output, and finding the last `</body>` is one pass over the text.
 */
export const wrapHtml = (html: string, footer: boolean): string => {
  const masked = html.replace(LIQUID, (piece) => " ".repeat(piece.length));
  const open = BODY_OPEN.exec(masked);
  const start = open ? open.index + open[0].length : 0;
  const close = [...masked.matchAll(BODY_CLOSE)].at(-1);
  const end = footer ? Math.max(start, close?.index ?? html.length) : html.length;
  const footerMarker = footer ? blockMarker("footer_html") : "";
  return `${html.slice(0, start)}${blockMarker("preheader")}${html.slice(start, end)}${footerMarker}${html.slice(end)}`;
};
