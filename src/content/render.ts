import type { Template } from "liquidjs";
import type { Context } from "liquidjs";
import { htmlEngine, plainEngine, renderContext, renderIn } from "./engine";
import { deriveTextTemplate, htmlToText, tidyText } from "./html-text";
import { FOOTER_TEXT, wrapHtml } from "./layout";
import { parseTemplate, renderProblem, type TemplateField, usesUnsubscribeUrl } from "./validate";

// The one rendering path: the preview, the test send and every delivery of a send (whatever the
// integration) build their message here, so what a preview shows is what a recipient gets. A
// campaign is compiled once (per queue message, per request) and rendered once per recipient.

export type CampaignContent = { subject: string; preheader: string | null; html: string | null; text: string | null };
export type NewsletterContent = { name: string; address: string | null };
export type Recipient = { email: string; name: string | null; tags: readonly string[]; location: string | null; source: string | null };

/** What a recipient receives, but the envelope (from, to, reply-to). */
export type RenderedMessage = { subject: string; html: string | null; text: string; headers: Record<string, string> };

/** Ceilings on rendered parts (the stored templates are bounded by the API's size limits). */
export const MAX_RENDERED = { subject: 998, preheader: 1000, html: 2 * 1024 * 1024, text: 1024 * 1024 } as const;

export const SAMPLE_RECIPIENT: Recipient = {
  email: "subscriber@example.com",
  name: "Sample Subscriber",
  tags: ["sample"],
  location: null,
  source: null,
};

type TextPart =
  /** `tidy`: the template has tags, which may leave blank lines behind in derived text. */
  | { kind: "template"; templates: Template[]; tidy: boolean }
  /** The html's Liquid did not survive conversion: its own rendered html is converted per message. */
  | { kind: "from_rendered_html"; html: Template[]; footer: Template[] | null }
  /** No html, no text: the preheader, else the subject. */
  | { kind: "fallback"; footer: Template[] };

export type CompiledCampaign = {
  subject: Template[];
  preheader: Template[] | null;
  html: Template[] | null;
  text: TextPart;
  newsletter: NewsletterContent;
};

const footerText = plainEngine.parse(FOOTER_TEXT);

/**
 * Parses and checks every template of a campaign (throws TemplateError naming the field) and
 * prepares its parts: the html wrapped with the preheader and, unless it places `unsubscribe_url`
 * itself, the footer; the text part written, derived from the html template, or the fallback.
 */
export const compileCampaign = (content: CampaignContent, newsletter: NewsletterContent): CompiledCampaign => {
  const subject = parseTemplate("subject", content.subject);
  const preheader = content.preheader === null ? null : parseTemplate("preheader", content.preheader);
  let html: Template[] | null = null;
  let ownHtml: Template[] = [];
  let htmlFooter = false;
  if (content.html !== null) {
    ownHtml = parseTemplate("html", content.html);
    htmlFooter = !usesUnsubscribeUrl(htmlEngine, ownHtml);
    html = parseWrapped(content.html, htmlFooter);
  }
  let text: TextPart;
  if (content.text !== null) {
    const own = parseTemplate("text", content.text);
    text = { kind: "template", templates: usesUnsubscribeUrl(plainEngine, own) ? own : [...own, ...footerText], tidy: false };
  } else if (content.html !== null) {
    const derived = deriveTextTemplate(content.html);
    const templates = derived === null ? null : tryParse(derived);
    const footer = htmlFooter ? footerText : null;
    text = templates
      ? { kind: "template", templates: footer ? [...templates, ...footer] : templates, tidy: derived?.includes("{%") === true }
      : { kind: "from_rendered_html", html: ownHtml, footer };
  } else {
    text = { kind: "fallback", footer: footerText };
  }
  return { subject, preheader, html, text, newsletter };
};

/** The html with what the service adds; the template parsed on its own, so a failure here is ours to name. */
const parseWrapped = (source: string, footer: boolean): Template[] => {
  try {
    return htmlEngine.parse(wrapHtml(source, footer));
  } catch (err) {
    throw renderProblem("html", err);
  }
};

const tryParse = (source: string): Template[] | null => {
  try {
    return plainEngine.parse(source);
  } catch {
    return null;
  }
};

const oneLine = (value: string) => value.replace(/[\r\n]+/g, " ").trim();

const part = (field: TemplateField, render: () => string): string => {
  try {
    return render();
  } catch (err) {
    throw renderProblem(field, err);
  }
};

/**
 * The message for one recipient. Throws TemplateError when a part cannot be rendered for this
 * recipient (over a size ceiling, say): saved templates passed the same checks with the sample.
 */
export const renderMessage = (campaign: CompiledCampaign, recipient: Recipient, unsubscribeUrl: string): RenderedMessage => {
  const scope: Record<string, unknown> = {
    subscriber: recipient,
    newsletter: { name: campaign.newsletter.name },
    unsubscribe_url: unsubscribeUrl,
    _address: campaign.newsletter.address,
  };
  const ctx = renderContext(scope);
  const subject = part("subject", () => oneLine(renderIn(ctx, campaign.subject, MAX_RENDERED.subject)));
  scope.campaign = { subject };
  const preheader = campaign.preheader
    ? part("preheader", () => oneLine(renderIn(ctx, campaign.preheader ?? [], MAX_RENDERED.preheader)))
    : "";
  // In Liquid an empty string is truthy: no preheader is nil, so the hidden block is left out.
  scope._preheader = preheader || null;
  const html = campaign.html ? part("html", () => renderIn(ctx, campaign.html ?? [], MAX_RENDERED.html)) : null;
  const text = part("text", () => renderText(campaign.text, ctx, preheader || subject));
  return {
    subject,
    html,
    text,
    headers: { "List-Unsubscribe": `<${unsubscribeUrl}>`, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" },
  };
};

const renderText = (text: TextPart, ctx: Context, fallback: string): string => {
  const footer = (templates: Template[] | null) => (templates ? renderIn(ctx, templates, MAX_RENDERED.text) : "");
  switch (text.kind) {
    case "template": {
      const out = renderIn(ctx, text.templates, MAX_RENDERED.text);
      return text.tidy ? tidyText(out) : out;
    }
    case "from_rendered_html":
      return tidyText(htmlToText(renderIn(ctx, text.html, MAX_RENDERED.html)) + footer(text.footer));
    case "fallback":
      return `${fallback}${footer(text.footer)}`;
  }
};
