import { type Template, TokenKind } from "liquidjs";
import { BLOCK_AT, BLOCKS, type BlockOffsets, type Engine, htmlEngine, htmlLayoutEngine, type MessageScope, plainEngine, plainLayoutEngine, renderContext } from "./engine";
import { guardHtmlOutputs, UnsafeOutputPlace } from "./html-guard";
import { htmlToText, lineFeeds, tidyText, UnreadableHtml } from "./html-text";
import { deriveTextTemplate } from "./text-once";
import { type AddressFooter, addressFooters, blockMarker, oneLine, type ServiceBlocks, serviceBlocks, type TopLevelText, wrapHtml } from "./layout";
import { MessageRenderer, OutputSlots, type Part, partOf } from "./plan";
import { parseTemplate, renderProblem, TemplateError, type TemplateField } from "./validate";

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
  /**
   * `tidy`: the template has tags, which may leave blank lines behind in derived text. `linked`: it
   * names `unsubscribe_url`, so whether a message needs the footer is seen in its output.
   */
  | { kind: "template"; part: Part; tidy: boolean; linked: boolean; derived: boolean }
  /**
   * The html's Liquid did not survive conversion, makes markup of its own, or would not read the same
   * once for every recipient (deriveTextTemplate): its rendered html is converted per message.
   */
  | { kind: "from_rendered_html"; html: Part }
  /** No html, no text: the preheader, else the subject, and the footer. */
  | { kind: "fallback" };

export type CompiledCampaign = {
  subject: Part;
  preheader: Part | null;
  /** The html with the preheader and footer markers; `htmlLinked`: its template names `unsubscribe_url`. */
  html: Part | null;
  htmlLinked: boolean;
  text: TextPart;
  newsletter: NewsletterContent;
  blocks: (preheader: string, unsubscribeUrl: string) => ServiceBlocks;
  /** The newsletter's address alone, for a part that shows the unsubscribe link but not the address (null: no address). */
  address: { html: AddressFooter; text: AddressFooter } | null;
  /** How many distinct outputs the parts rendered step by step have. */
  outputs: number;
};

const footerText = plainLayoutEngine.parse(blockMarker("footer_text"));

/** Tags whose output is markup of their own: text derived from a template using them would show it. */
const MARKUP_TAGS = /\btablerow\b/;

/**
 * Parses and checks every template of a campaign (throws TemplateError naming the field) and
 * prepares its parts: the html wrapped with the preheader and the footer (which a message that shows
 * `unsubscribe_url` itself goes without), the text part written, derived from the html template, or
 * the fallback. `steps: false` renders every part through liquidjs's renderer (the tests compare both ways).
 */
export const compileCampaign = (content: CampaignContent, newsletter: NewsletterContent, options = { steps: true }): CompiledCampaign => {
  const slots = options.steps ? new OutputSlots() : null;
  const part = (templates: Template[], engine: Engine) => partOf(templates, engine, slots);
  const subject = part(parseTemplate("subject", content.subject).templates, plainEngine);
  const preheader = content.preheader === null ? null : part(parseTemplate("preheader", content.preheader).templates, plainEngine);
  let html: Part | null = null;
  let ownHtml: Template[] = [];
  let htmlLinked = false;
  if (content.html !== null) {
    const parsed = parseTemplate("html", content.html);
    try {
      ownHtml = guardHtmlOutputs(parsed.templates);
    } catch (err) {
      throw err instanceof UnsafeOutputPlace ? new TemplateError("html", `${err.message} on line ${err.line}`) : err;
    }
    htmlLinked = parsed.globals.has("unsubscribe_url");
    html = part(parseWrapped(content.html, topLevelText(parsed.templates)), htmlLayoutEngine);
  }
  let text: TextPart;
  if (content.text !== null) {
    const own = parseTemplate("text", content.text);
    text = { kind: "template", part: part([...own.templates, ...footerText], plainLayoutEngine), tidy: false, linked: own.globals.has("unsubscribe_url"), derived: false };
  } else if (content.html !== null) {
    // Derived once, from the template, unless its Liquid makes markup (tablerow) or the text read once
    // would not say what each recipient's html says (deriveTextTemplate): then from each message's html.
    const derived = MARKUP_TAGS.test(content.html) ? null : htmlProblem(() => deriveTextTemplate(content.html as string));
    const templates = derived === null ? null : tryParse(derived);
    text = templates
      ? { kind: "template", part: part([...templates, ...footerText], plainLayoutEngine), tidy: derived?.includes("{%") === true, linked: htmlLinked, derived: true }
      : { kind: "from_rendered_html", html: part(ownHtml, htmlEngine) };
  } else {
    text = { kind: "fallback" };
  }
  const address = addressFooters(newsletter.address, content.html ?? "", content.text ?? content.html ?? "");
  const common = { subject, preheader, html, htmlLinked, newsletter, blocks: serviceBlocks(newsletter, content.html ?? ""), address };
  if (text.kind !== "template" || !text.derived) return { ...common, text, outputs: slots?.size ?? 0 };
  // The text read once is tried on a few readers against their own html, converted: what the
  // checks before missed, it shows here (for these readers), and the text is read per message.
  const perMessage: TextPart = { kind: "from_rendered_html", html: part(ownHtml, htmlEngine) };
  const outputs = slots?.size ?? 0;
  const once = { ...common, text, outputs };
  const eachMessage = { ...common, text: perMessage, outputs };
  return readsAlikeForTrialReaders(once, eachMessage) ? once : eachMessage;
};

/** The readers a text read once is tried on: the sample subscriber, one with every optional field empty, one with every field set. */
const TRIAL_READERS: readonly Recipient[] = [
  SAMPLE_RECIPIENT,
  { email: "reader@example.com", name: null, tags: [], location: null, source: null },
  { email: "trial@example.com", name: "Trial Reader", tags: ["news", "vip"], location: "Paris", source: "import" },
];
const TRIAL_URL = "https://unsubscribe.example/u/trial";

/**
 * What a text part says: its words, links, bullets and numbers in order, whatever the spacing (the
 * text read once is wrapped before its values are known, so its lines break elsewhere).
 */
const wordsOf = (text: string) => text.replace(/\s+/g, " ").trim();

const readsAlikeForTrialReaders = (once: CompiledCampaign, perMessage: CompiledCampaign): boolean => {
  try {
    return TRIAL_READERS.every((reader) => wordsOf(renderMessage(once, reader, TRIAL_URL).text) === wordsOf(renderMessage(perMessage, reader, TRIAL_URL).text));
  } catch (err) {
    // Not renderable for a trial reader: the checks on save say why (with the sample); the text read once stands.
    if (err instanceof TemplateError) return true;
    throw err;
  }
};

/** The source ranges of a parsed template's top-level text: where the service's markers may go. */
const topLevelText = (templates: Template[]): TopLevelText =>
  templates.filter((t) => t.token.kind === TokenKind.HTML).map((t) => ({ begin: t.token.begin, end: t.token.end }));

/** The html with what the service adds; the template parsed on its own, so a failure here is ours to name. */
const parseWrapped = (source: string, text: TopLevelText): Template[] => {
  try {
    return guardHtmlOutputs(htmlLayoutEngine.parse(wrapHtml(source, text)));
  } catch (err) {
    throw renderProblem("html", err);
  }
};

/** The text read once from the html: the service's layout engine parses it (its values go through SPACED_FILTER). */
const tryParse = (source: string): Template[] | null => {
  try {
    return plainLayoutEngine.parse(source);
  } catch {
    return null;
  }
};

const part = (field: TemplateField, render: () => string): string => {
  try {
    return render();
  } catch (err) {
    throw err instanceof TemplateError ? err : renderProblem(field, err);
  }
};

/** Reading text from html: html that nests too deeply or holds too many elements is a problem of the html (whichever part asked). */
const htmlProblem = <T>(read: () => T): T => {
  try {
    return read();
  } catch (err) {
    throw err instanceof UnreadableHtml ? new TemplateError("html", err.message) : err;
  }
};

/**
 * The message for one recipient. Throws TemplateError when a part cannot be rendered for this
 * recipient (over a size ceiling, say): saved templates passed the same checks with the sample.
 */
export const renderMessage = (campaign: CompiledCampaign, recipient: Recipient, unsubscribeUrl: string): RenderedMessage => {
  // Only what the contract names: the recipient's row may carry more (its id), which no template reads.
  const { email, name, tags, location, source } = recipient;
  const scope: MessageScope = {
    subscriber: { email, name, tags, location, source },
    newsletter: { name: campaign.newsletter.name, address: campaign.newsletter.address },
    unsubscribe_url: unsubscribeUrl,
  };
  const renderer = new MessageRenderer(renderContext(scope), campaign.outputs);
  // A subject that renders blank for this recipient (`{{ subscriber.name }}` and no name) is the
  // newsletter's name: a message never goes out without one. Whichever it is, it becomes the Subject
  // header here, and only here: one line, no control character.
  const rendered = part("subject", () => renderer.render(campaign.subject, MAX_RENDERED.subject));
  const subject = oneLine(oneLine(rendered) === "" ? campaign.newsletter.name : rendered);
  scope.campaign = { subject };
  // The scope has grown: nothing evaluated before it is reused after.
  renderer.forget();
  const preheader = campaign.preheader ? part("preheader", () => oneLine(renderer.render(campaign.preheader as Part, MAX_RENDERED.preheader))) : "";
  const blocks = campaign.blocks(preheader, unsubscribeUrl);
  const at: BlockOffsets = {};
  scope[BLOCKS] = blocks;
  scope[BLOCK_AT] = at;
  const htmlLink = campaign.htmlLinked ? { url: unsubscribeUrl, footer: "footer_html" as const, address: campaign.address?.html } : undefined;
  const html = campaign.html ? part("html", () => renderer.render(campaign.html as Part, MAX_RENDERED.html, htmlLink)) : null;
  const text = part("text", () => renderText(campaign.text, renderer, blocks, at, unsubscribeUrl, preheader || subject, campaign.address?.text));
  return {
    subject,
    html,
    text,
    headers: { "List-Unsubscribe": `<${unsubscribeUrl}>`, "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" },
  };
};

/**
 * The text part; its footer is left out when the message shows the unsubscribe link itself (the
 * address alone stands there, unless the part shows it too). Text derived from an html that has none
 * to give (images only, say) is the fallback's: the preheader, else the subject.
 */
const renderText = (text: TextPart, renderer: MessageRenderer, blocks: ServiceBlocks, at: BlockOffsets, url: string, fallback: string, address: AddressFooter | undefined): string => {
  const fallbackText = () => `${fallback}${blocks.footer_text}`;
  switch (text.kind) {
    case "template": {
      const out = renderer.render(text.part, MAX_RENDERED.text, text.linked ? { url, footer: "footer_text", address } : undefined);
      if (text.derived && isBlank(out, blocks.footer_text, at.footer_text)) return fallbackText();
      return text.tidy ? tidyText(out) : lineFeeds(withoutLineBreaksBeforeFooter(out, [blocks.footer_text, address?.footer]));
    }
    case "from_rendered_html": {
      const converted = htmlProblem(() => htmlToText(renderer.render(text.html, MAX_RENDERED.html)));
      if (converted.trim() === "") return fallbackText();
      if (!converted.includes(url)) return tidyText(converted + blocks.footer_text);
      return tidyText(address && !address.shownIn(converted) ? converted + address.footer : converted);
    }
    case "fallback":
      return fallbackText();
  }
};

/**
 * A campaign's own text as it rendered, but the line breaks it ends with (an editor saves text ending
 * in one; a tag may leave more): before the footer that ends the part (it opens with its own blank
 * line), or at the part's end. Read off the output alone, so every way of rendering it agrees.
 */
const withoutLineBreaksBeforeFooter = (out: string, footers: readonly (string | undefined)[]): string => {
  const footer = footers.find((f): f is string => f !== undefined && f !== "" && out.endsWith(f)) ?? "";
  let end = out.length - footer.length;
  const own = end;
  while (end > 0 && (out[end - 1] === "\n" || out[end - 1] === "\r")) end--;
  return end === own ? out : out.slice(0, end) + footer;
};

const VISIBLE = /\S/g;

/** Whether `out` has anything but whitespace from `from` up to `to`: found at once in nearly every part. */
const hasText = (out: string, from: number, to: number): boolean => {
  VISIBLE.lastIndex = from;
  const found = VISIBLE.exec(out);
  return found !== null && found.index < to;
};

/** Whether a part says nothing but the footer written at `at` (if it is still there). */
const isBlank = (out: string, footer: string, at: number | undefined): boolean => {
  if (at === undefined || !out.startsWith(footer, at)) return !hasText(out, 0, out.length);
  return !hasText(out, 0, at) && !hasText(out, at + footer.length, out.length);
};
