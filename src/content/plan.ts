import { type Context, type FilterImplOptions, Output, type Template, TokenKind, TypeGuards, toValue, toValueSync, Value } from "liquidjs";
import { BLOCK_AT, BLOCKS, type Engine, HTML_OWN_FILTERS, type MessageScope, renderContext, renderIn, ServiceBlockTag, stringify, writeBlock } from "./engine";
import { type AddressFooter, type BlockName, CommentState, linksAt, withoutRedundantFooter, withoutShownFooterAt } from "./layout";

// Most campaign templates are text and outputs only, no tags. Such a part is rendered from a flat
// list of steps instead of through liquidjs's renderer: the same parsed outputs, without a generator
// per piece of text, and each distinct output evaluated once per message however many parts show it
// (an html and the text derived from it name the same variables). An output that reads a variable
// by a literal path and applies filters with literal arguments (`{{ subscriber.name | default:
// "there" }}`, nearly all of them) is evaluated by liquidjs's own variable lookup and filter
// functions called in turn; any other output by liquidjs's evaluator. A part with any tag renders
// through liquidjs's renderer. Every way gives the same bytes: test/content.plan.test.ts renders a
// corpus of templates both ways.

type Evaluate = (ctx: Context) => unknown;
type FilterHandler = Extract<FilterImplOptions, (...args: never[]) => unknown>;
type Escape = { handler: FilterHandler; token: unknown; liquid: Engine };

type Step =
  | { kind: "text"; text: string }
  /** `links`: its value, when it is the unsubscribe link, is one a reader can follow (see FooterLink). */
  | { kind: "output"; evaluate: Evaluate; slot: number; escape: Escape | null; links: boolean }
  | { kind: "block"; name: BlockName };

/** A parsed part of a message, with its steps when it has no tags. */
export type Part = { templates: Template[]; steps: Step[] | null };

/** Numbers the distinct outputs of one campaign, so a message keeps each value in one array slot. */
export class OutputSlots {
  private readonly slots = new Map<string, number>();

  get size() {
    return this.slots.size;
  }

  slotOf(key: string): number {
    let slot = this.slots.get(key);
    if (slot === undefined) {
      slot = this.slots.size;
      this.slots.set(key, slot);
    }
    return slot;
  }
}

/** What liquidjs's evaluator reads from a literal token (a string, number, `true`, `nil`), else none. */
const literal = (token: unknown): { value: unknown } | null =>
  typeof token === "object" && token !== null && !Array.isArray(token) && "content" in token ? { value: token.content } : null;

type FilterParts = { name: string; args: unknown[]; token?: unknown };

const handlerOf = (engine: Engine, name: string): FilterHandler | null => {
  const impl = engine.filters[name];
  if (typeof impl === "function") return impl;
  return typeof impl?.handler === "function" ? impl.handler : null;
};

/**
 * The expression's value as liquidjs's evaluator computes it (Value.value: the initial token, then
 * each filter called with its arguments), without a generator per step; null when the expression
 * is not a literal or a literal path followed by filters with literal arguments.
 */
const directEvaluate = (value: Value, engine: Engine): Evaluate | null => {
  const postfix = (value.initial as unknown as { postfix: unknown[] }).postfix;
  if (postfix.length !== 1) return null;
  const [token] = postfix;
  let initial: Evaluate;
  const constant = literal(token);
  if (constant) initial = () => constant.value;
  else if (TypeGuards.isPropertyAccessToken(token) && token.variable === undefined) {
    const props = token.props.map(literal);
    if (props.some((prop) => prop === null)) return null;
    const path = props.map((prop) => toValue(prop?.value)) as string[];
    initial = (ctx) => ctx.getSync(path);
  } else return null;
  const filters: { handler: FilterHandler; args: unknown[]; token: unknown }[] = [];
  for (const filter of value.filters as unknown as FilterParts[]) {
    const args = filter.args.map(literal);
    const handler = handlerOf(engine, filter.name);
    if (handler === null || args.some((arg) => arg === null)) return null;
    filters.push({ handler, args: args.map((arg) => arg?.value), token: filter.token });
  }
  return (ctx) => {
    let result = initial(ctx);
    for (const { handler, args, token } of filters) {
      result = toValueSync(handler.call({ context: ctx, token, liquid: engine } as never, result, ...args));
    }
    return result;
  };
};

const outputStep = (output: Output, engine: Engine, slots: OutputSlots): Step => {
  const expression = output.token.content;
  // The expression without the escaping the engine appends to every output: its value is the same
  // in html and text unless it uses a filter the html engine replaces.
  const value = new Value(expression, engine);
  const evaluate = directEvaluate(value, engine) ?? ((ctx: Context) => toValueSync(value.value(ctx, false)));
  // The escaping appended (the engine's, or the one guarding a URL's scheme: guardHtmlOutputs).
  const appended = output.value.filters.length > value.filters.length ? (output.value.filters.at(-1) as unknown as FilterParts & { handler: FilterHandler }) : null;
  const escape = engine.options.outputEscape && appended ? { handler: appended.handler, token: appended.token, liquid: engine } : null;
  const own = escape !== null && value.filters.some((filter) => HTML_OWN_FILTERS.has(filter.name));
  return { kind: "output", evaluate, slot: slots.slotOf(own ? `html ${expression}` : expression), escape, links: true };
};

/** `templates` as a part: with steps when every template is text, an output or a service block. */
export const partOf = (templates: Template[], engine: Engine, slots: OutputSlots | null): Part => {
  if (slots === null) return { templates, steps: null };
  // In html, an output counts as showing a link only as an `<a>` element's href outside comments,
  // which its place in the template's markup says once for every message.
  const html = engine.options.outputEscape !== undefined;
  const comments = new CommentState();
  let markup = "";
  const steps: Step[] = [];
  for (const template of templates) {
    if (template.token.kind === TokenKind.HTML) {
      const text = (template.token as unknown as { getContent(): string }).getContent();
      steps.push({ kind: "text", text });
      if (html) {
        comments.feed(text);
        markup = (markup + text).slice(-TAG_CONTEXT);
      }
    } else if (template instanceof Output) {
      const step = outputStep(template, engine, slots);
      if (html && step.kind === "output") {
        step.links = linksAt(markup, markup.length, comments.inside);
        // The output's place, so markup after it is never read as right after the `<a … href=`.
        markup = (markup + "\u0000").slice(-TAG_CONTEXT);
      }
      steps.push(step);
    } else if (template instanceof ServiceBlockTag) steps.push({ kind: "block", name: template.block });
    else return { templates, steps: null };
  }
  return { templates, steps };
};

/** How much markup before an output its link context is read from (an `<a …>` tag's length, at most). */
const TAG_CONTEXT = 1024;

const UNSET = Symbol("unset");

/** Renders the parts of one message in one context, keeping each output's value for the next part. */
export class MessageRenderer {
  private readonly values: unknown[];

  constructor(
    readonly ctx: Context,
    slots: number,
  ) {
    this.values = new Array(slots).fill(UNSET);
  }

  /** Drops the values kept so far: the scope has changed. */
  forget() {
    this.values.fill(UNSET);
  }

  /**
   * `part` rendered, failing past `maxChars`; errors are liquidjs's own, with their line. With
   * `link`, the part's footer block is left out when the part shows `link.url` itself (see
   * renderMessage): step by step, as the outputs are written; through liquidjs, by looking.
   */
  render(part: Part, maxChars: number, link?: FooterLink): string {
    if (part.steps === null) {
      // Tags keep state (assign, increment, cycle): each part with tags starts from the message's
      // scope alone, so an html and the text derived from it render alike. And a tag may assign a
      // variable that shadows another: values kept before it may no longer hold.
      // (`increment` counts in the scope itself: each such part gets a copy of it.)
      const out = renderIn(renderContext({ ...this.ctx.environments }), part.templates, maxChars);
      this.forget();
      return link ? this.withoutShownFooter(out, link) : out;
    }
    let out: string | undefined;
    try {
      out = this.run(part.steps, link);
    } catch {
      out = undefined;
    }
    if (out !== undefined && out.length <= maxChars) return out;
    // The same part through liquidjs's renderer fails the same way (too large included), with the line of the error.
    const again = renderIn(this.ctx, part.templates, maxChars);
    return link ? this.withoutShownFooter(again, link) : again;
  }

  private withoutShownFooter(out: string, link: FooterLink): string {
    const scope = this.ctx.environments as MessageScope;
    return withoutRedundantFooter(out, scope[BLOCKS]?.[link.footer] ?? "", scope[BLOCK_AT]?.[link.footer], link.url, link.footer === "footer_html", link.address);
  }

  /**
   * The steps written out. With `link`: an output showing the url before the footer's place means no
   * footer; one after it (rare: the link below the footer) takes the footer written out again.
   */
  private run(steps: Step[], link: FooterLink | undefined): string {
    let out = "";
    const url = link?.url;
    let shown = false;
    let footerAt = -1;
    let footerLength = 0;
    let addressWritten = false;
    for (const step of steps) {
      if (step.kind === "text") out += step.text;
      else if (step.kind === "block") {
        if (step.name === link?.footer) {
          footerAt = out.length;
          if (shown) {
            // The part shows the link already: no footer. The address alone goes in its place, here,
            // when the part cannot show it (no copy of the part made afterwards to put it in).
            if (link.address?.neverShown) {
              out += link.address.footer;
              addressWritten = true;
            }
            continue;
          }
          const footer = writeBlock(this.ctx, step.name, out.length);
          footerLength = footer.length;
          out += footer;
        } else out += writeBlock(this.ctx, step.name, out.length);
      } else {
        let value = this.values[step.slot];
        if (value === UNSET) {
          value = step.evaluate(this.ctx);
          this.values[step.slot] = value;
        }
        const { escape } = step;
        const text = stringify(escape ? escape.handler.call({ context: this.ctx, token: escape.token, liquid: escape.liquid } as never, value) : value);
        if (url !== undefined && !shown && step.links && text.length >= url.length && text.includes(url)) shown = true;
        out += text;
      }
    }
    return footerAt >= 0 && shown && !addressWritten ? withoutShownFooterAt(out, footerAt, footerLength, link?.address) : out;
  }
}

/**
 * A part whose footer (block `footer`) goes only where the message does not show `url` itself; where
 * it does, `address` (the newsletter's, when set) stands in the footer's place unless the part shows it.
 */
type FooterLink = { url: string; footer: BlockName; address?: AddressFooter | null };
