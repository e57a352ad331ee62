import { LIQUID } from "./liquid-syntax";

// What the service adds to every campaign message, as Liquid over its own variables (the names start
// with an underscore, which the variables a template may use never do): the preheader as hidden
// preview text at the top of the html, and the footer with the unsubscribe link and the newsletter's
// postal address when the template does not place `unsubscribe_url` itself.

export const PREHEADER_HTML =
  '{% if _preheader %}<div style="display:none;font-size:1px;line-height:1px;max-height:0;max-width:0;opacity:0;overflow:hidden;mso-hide:all">{{ _preheader }}</div>{% endif %}';

export const FOOTER_HTML =
  '<div style="margin:32px 0 0;padding:16px 0 0;border-top:1px solid #e5e5e5;font:12px/1.5 Arial,sans-serif;color:#666666">' +
  '<p style="margin:0">You receive this email because you subscribed to {{ newsletter.name }}. ' +
  '<a href="{{ unsubscribe_url }}" style="color:#666666">Unsubscribe</a></p>' +
  '{% if _address %}<p style="margin:8px 0 0;white-space:pre-line">{{ _address }}</p>{% endif %}</div>';

export const FOOTER_TEXT =
  "\n\n--\nYou receive this email because you subscribed to {{ newsletter.name }}.\nUnsubscribe: {{ unsubscribe_url }}" +
  "{% if _address %}\n{{ _address }}{% endif %}";

const BODY_OPEN = /<body\b[^>]*>/i;
const BODY_CLOSE = /<\/body\s*>/gi;

/**
 * The html template with the preheader block just inside `<body>` and, when `footer`, the footer just
 * before the last `</body>`; without a body element, at the very start and end. Tags are looked for
 * outside Liquid only (`{{ "<body>" }}` is not one), so an insertion never lands inside a tag or an
 * output, and finding the last `</body>` is one pass over the text.
 */
export const wrapHtml = (html: string, footer: boolean): string => {
  const masked = html.replace(LIQUID, (piece) => " ".repeat(piece.length));
  const open = BODY_OPEN.exec(masked);
  const start = open ? open.index + open[0].length : 0;
  const close = [...masked.matchAll(BODY_CLOSE)].at(-1);
  const end = footer ? Math.max(start, close?.index ?? html.length) : html.length;
  return `${html.slice(0, start)}${PREHEADER_HTML}${html.slice(start, end)}${footer ? FOOTER_HTML : ""}${html.slice(end)}`;
};
