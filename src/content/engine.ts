import { CaptureTag, Context, Drop, type Emitter, IncludeTag, Liquid, Tag, type TagToken, type Template, Token, type TopLevelToken, toValue, toValueSync } from "liquidjs";
import type { BlockName, ServiceBlocks } from "./layout";
import { escapeHtml } from "../lib/html";
import { positionOf } from "./liquid-syntax";
import { countedOperators, countingWork, type FilterThis } from "./render-work";

// Two Liquid engines, configured once per isolate: `html` escapes every output (a subscriber named
// `<b>Bob</b>` is shown as that text), `plain` (subject, preheader, text) does not. Neither touches
// a file system: the tags that would read other templates are replaced by tags that refuse to parse,
// and `raw` (which would bypass the html escaping) is no filter at all. Variables are checked
// statically when a template is saved (validate.ts), so rendering is lenient: an unset value is
// empty, never a send-time error. Two more engines, configured the same, parse a template together
// with the markers of the blocks the service adds (layout.ts); a template a user saves is never
// parsed by them, so no user can place a marker.

// liquidjs finds a token's line and column by scanning its template from the start, and its static
// analysis asks for every variable's: quadratic in the template's size. Positions come from the
// template's line starts instead (liquid-syntax.ts), which also end lines as editors do.
Token.prototype.getPosition = function (this: Token): number[] {
  return positionOf(this.input, this.begin);
};

/** Units of allocation one render may make (range items, filter strings, captures): bounds loops. */
export const RENDER_MEMORY_LIMIT = 200_000;

export class OutputTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`renders to more than ${limit} characters`);
  }
}

export const stringify = (value: unknown): string => {
  const v = toValue(value);
  if (typeof v === "string") return v;
  if (v === null || v === undefined) return "";
  if (Array.isArray(v)) return v.map(stringify).join("");
  return String(v);
};

/** liquidjs's string emitter with a ceiling: a loop cannot build an unbounded message. */
class BoundedEmitter {
  buffer = "";
  constructor(private readonly limit: number) {}
  write(html: unknown) {
    this.buffer += stringify(html);
    if (this.buffer.length > this.limit) throw new OutputTooLarge(this.limit);
  }
}

/**
 * The html each capture of a message's html made (its outputs escaped already), by render context:
 * printing one again prints it as it is, not escaped twice. A filter applied to it makes it text
 * again (escaped once more). Kept by value: a string equal to one is the same safe html.
 */
const capturedHtml = new WeakMap<Context, Set<string>>();

/**
 * The html engine's escaping of every output, but for captured html: the service's escapeHtml, which
 * (unlike liquidjs's `escape`) charges nothing to the render's allocation budget. An output is bounded
 * by the part's output cap, as in text: charged, html printing a name 3,000 times saved with the
 * sample subscriber and failed at send for a subscriber whose name is longer.
 */
export function escapeOutput(this: FilterThis, value: unknown): string {
  const text = stringify(value);
  return capturedHtml.get(this.context)?.has(text) ? text : escapeHtml(text);
}

/**
 * The escaping of an output anywhere but text (an attribute, a comment): captured html escaped too,
 * since its quotes or `-->` would end the attribute or comment it is printed in.
 */
export function escapeAll(this: FilterThis, value: unknown): string {
  const text = stringify(value);
  // Captured html's entities stay (an attribute reads them as a browser reads them in text); its
  // quotes and brackets, which would end the attribute or the comment, are escaped.
  if (capturedHtml.get(this.context)?.has(text)) return text.replace(/["'<>`]/g, (ch) => `&#${ch.charCodeAt(0)};`);
  return escapeHtml(text);
}

/** Marks a string of this render as html made by the template's own means (printed again, it is printed as it is). */
const markHtml = (ctx: Context, html: string): void => {
  let captured = capturedHtml.get(ctx);
  if (!captured) capturedHtml.set(ctx, (captured = new Set()));
  captured.add(html);
};

/**
 * `newline_to_br` in html: the value escaped as any output is, then each line break made a real
 * `<br />` (its only purpose; escaped, it showed as text). Html like a capture's: a filter applied to
 * it makes it text again.
 */
function htmlNewlineToBr(this: FilterThis, value: unknown): string {
  const text = stringify(value);
  this.context.memoryLimit.use(text.length);
  const html = escapeOutput.call(this, text).replace(/\r?\n/g, "<br />\n");
  markHtml(this.context, html);
  return html;
}

/** What a capture holds counts against the render's memory, so doubling it in a loop stops early. */
class BoundedCaptureTag extends CaptureTag {
  override *render(ctx: Context): Generator<unknown, void, unknown> {
    const emitter = new BoundedEmitter(RENDER_MEMORY_LIMIT);
    yield this.liquid.renderer.renderTemplates(this.templates, ctx, emitter);
    ctx.memoryLimit.use(emitter.buffer.length);
    ctx.bottom()[this.variable] = emitter.buffer;
    if (this.liquid.options.outputEscape === escapeOutput) markHtml(ctx, emitter.buffer);
  }
}

const refusing = (name: string, why: string) =>
  class extends Tag {
    constructor(...args: ConstructorParameters<typeof IncludeTag>) {
      super(args[0], args[1], args[2]);
      throw new Error(`{% ${name} %} is not supported: ${why}`);
    }
    *render() {}
  };

/** Every template of a parsed list and of the tags in it, in order. */
export const walk = function* (templates: Template[]): Generator<Template> {
  for (const template of templates) {
    yield template;
    const children = (template as { children?: (partials: boolean, sync: boolean) => Generator<unknown, Template[]> }).children;
    if (children) {
      const gen = children.call(template, false, true);
      let step = gen.next();
      while (!step.done) step = gen.next();
      yield* walk(step.value ?? []);
    }
  }
};

/**
 * The filters whose value in html differs from text, subject and preheader: an output they appear
 * in evaluates differently there. Outputs are escaped once already, so `escape` and `escape_once`
 * do nothing more in html; `newline_to_br` makes real line breaks in html and leaves the line breaks
 * as they are elsewhere (a text part has no markup, and a text part read from the html shows lines).
 */
const HTML_FILTERS = { escape: stringify, escape_once: stringify, newline_to_br: htmlNewlineToBr } as const;
export const HTML_OWN_FILTERS: ReadonlySet<string> = new Set(Object.keys(HTML_FILTERS));

/** Where each block was written in the output of the part being rendered (a character offset). */
export type BlockOffsets = Partial<Record<BlockName, number>>;

/**
 * Where the scope of a message keeps the service's own blocks and their offsets: under symbols, which
 * no Liquid lookup can name (a template reads strings only), so a template sees only its variables.
 */
export const BLOCKS = Symbol("service blocks");
export const BLOCK_AT = Symbol("service block offsets");
export type MessageScope = Record<string, unknown> & { [BLOCKS]?: ServiceBlocks; [BLOCK_AT]?: BlockOffsets };

/**
 * A block of the message being rendered (the scope's BLOCKS, set by renderMessage), written at
 * `offset` of its part's output, which is recorded (BLOCK_AT) so the block can be taken out again.
 */
export const writeBlock = (ctx: Context, name: BlockName, offset: number | undefined): string => {
  const scope = ctx.environments as MessageScope;
  const at = scope[BLOCK_AT];
  if (at && offset !== undefined) at[name] = offset;
  return scope[BLOCKS]?.[name] ?? "";
};

/** `{% service_block name %}`: where a block the service adds goes, written out as it is. */
export class ServiceBlockTag extends Tag {
  readonly block: BlockName;
  constructor(token: TagToken, remainTokens: TopLevelToken[], liquid: Liquid) {
    super(token, remainTokens, liquid);
    this.block = token.args.trim() as BlockName;
  }
  *render(ctx: Context, emitter: Emitter) {
    // Markers are placed at the top level only, where the emitter is the part's own.
    emitter.write(writeBlock(ctx, this.block, emitter instanceof BoundedEmitter ? emitter.buffer.length : undefined));
  }
}

/**
 * Filters that evaluate a Liquid expression written in a string (`where_exp: "t", "t == 'vip'"`), per
 * item, when rendering: what it reads is out of sight of the check on save, and its work out of the
 * step count. Not supported (an unknown filter, refused on save); `where`, `find`, `has`,
 * `group_by` with a property, or a `for` loop with an `if`, do the same in sight.
 */
export const EXPRESSION_FILTERS = ["where_exp", "reject_exp", "group_by_exp", "find_exp", "find_index_exp", "has_exp"] as const;

/**
 * `service_spaced`: a value's line breaks as spaces, as html shows them outside `<pre>` (the text read
 * once from an html template prints each value through it: text-once.ts). Like escaping, it charges
 * nothing against the allocation budget: printing a value is bounded by the output cap alone.
 */
export const SPACED_FILTER = "service_spaced";
function spaced(this: FilterThis, value: unknown): string {
  return stringify(value).replace(/\r\n?|\n/g, " ");
}

/** `serviceParts`: the engine of the service's own layouts (its block markers, the text read from html). */
const configure = (escapeOutputs: boolean, serviceParts = false) => {
  const liquid = new Liquid({
    operators: countedOperators,
    outputEscape: escapeOutputs ? escapeOutput : undefined,
    strictFilters: true,
    strictVariables: false,
    ownPropertyOnly: true,
    memoryLimit: RENDER_MEMORY_LIMIT,
    // Templates are never looked up by name: an empty in-memory map instead of the file system.
    templates: {},
    relativeReference: false,
  });
  for (const name of ["include", "render"]) liquid.registerTag(name, refusing(name, "a campaign template cannot include other templates"));
  for (const name of ["layout", "block"]) liquid.registerTag(name, refusing(name, "a campaign template cannot use layouts"));
  liquid.registerTag("capture", BoundedCaptureTag);
  for (const name of EXPRESSION_FILTERS) delete liquid.filters[name];
  // liquidjs's slice charges the allocation limit the length asked for, not the length it can return:
  // `"abc" | slice: 1, 300000` was refused as too large. Asked for no more than there is.
  const slice = liquid.filters.slice as (this: FilterThis, value: unknown, begin: number, length?: number) => unknown;
  liquid.registerFilter("slice", function (this: FilterThis, value: unknown, begin: number, length = 1) {
    const size = Array.isArray(value) ? value.length : typeof value === "string" ? value.length : undefined;
    return slice.call(this, value, begin, size === undefined || typeof length !== "number" ? length : Math.min(length, size));
  });
  if (escapeOutputs) {
    // Nothing un-escapes (and see HTML_FILTERS).
    delete liquid.filters.raw;
    for (const [name, filter] of Object.entries(HTML_FILTERS)) liquid.registerFilter(name, filter);
  } else {
    liquid.registerFilter("newline_to_br", function (this: FilterThis, value: unknown) {
      const text = stringify(value);
      this.context.memoryLimit.use(text.length);
      return text;
    });
  }
  if (serviceParts) {
    liquid.registerTag("service_block", ServiceBlockTag);
    liquid.registerFilter(SPACED_FILTER, spaced);
  }
  return countingWork(liquid);
};

export const htmlEngine = configure(true);
export const plainEngine = configure(false);
export const htmlLayoutEngine = configure(true, true);
export const plainLayoutEngine = configure(false, true);
export type Engine = typeof htmlEngine;

const FORLOOP = ["index", "index0", "rindex", "rindex0", "first", "last", "length", "name"];

/** What a loop's own object gives a template: Liquid's documented properties, nothing else. */
export const LOOP_PROPERTIES: Readonly<Record<string, readonly string[]>> = {
  forloop: FORLOOP,
  tablerowloop: [...FORLOOP, "row", "col", "col0", "col_first", "col_last"],
};
const DROP_PROPERTIES: ReadonlySet<unknown> = new Set(Object.values(LOOP_PROPERTIES).flat());

/**
 * The render's context. liquidjs reads any property of its drop objects (forloop, tablerowloop,
 * empty, blank), its methods included: `constructor` threw, `next` moved the loop on. Saving refuses
 * those reads where a template names the loop object (validate.ts); through another name
 * (`{% assign f = forloop %}{{ f.constructor }}`) a read past the documented properties is nothing,
 * as a missing property of any assigned value is, on save and at send alike. (Only what spawns a
 * context of its own, liquidjs's `render` tag and *_exp filters, would read past it: both are refused.)
 */
class MessageContext extends Context {
  override readProperty(obj: unknown, key: unknown) {
    if (obj instanceof Drop && !DROP_PROPERTIES.has(toValue(key))) return undefined;
    return super.readProperty(obj as never, key as never);
  }
}

/**
 * One render context per message, shared by its parts (escaping is decided when a template is parsed,
 * so html and plain templates render in the same context): one allocation budget per message.
 */
export const renderContext = (scope: object): Context => new MessageContext(scope, plainEngine.options, { sync: true }, { liquid: plainEngine });

/** Renders parsed `templates` in `ctx`, synchronously, failing past `maxChars` of output. */
export const renderIn = (ctx: Context, templates: Template[], maxChars: number): string => {
  const emitter = new BoundedEmitter(maxChars);
  toValueSync(plainEngine.renderer.renderTemplates(templates, ctx, emitter));
  return emitter.buffer;
};
