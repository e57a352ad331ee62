import { CaptureTag, Context, CycleTag, EchoTag, type Emitter, Filter, filters, IncludeTag, Liquid, Tag, type TagToken, type Template, Token, type TopLevelToken, toValue, toValueSync } from "liquidjs";
import type { BlockName, ServiceBlocks } from "./layout";
import { LIQUID } from "./liquid-syntax";

// Two Liquid engines, configured once per isolate: `html` escapes every output (a subscriber named
// `<b>Bob</b>` is shown as that text), `plain` (subject, preheader, text) does not. Neither touches
// a file system: the tags that would read other templates are replaced by tags that refuse to parse,
// and `raw` (which would bypass the html escaping) is no filter at all. Variables are checked
// statically when a template is saved (validate.ts), so rendering is lenient: an unset value is
// empty, never a send-time error. Two more engines, configured the same, parse a template together
// with the markers of the blocks the service adds (layout.ts); a template a user saves is never
// parsed by them, so no user can place a marker.

// liquidjs finds a token's line and column by scanning its template from the start, and its static
// analysis asks for every variable's: quadratic in the template's size (a 480 KB html with 8,000
// outputs took 8 s to check). The same answer from the line starts of the template, found once per
// source (binary search), keeps checking a template linear. Lines end as text editors end them: at
// `\n`, `\r\n` or a lone `\r` (liquidjs counted only `\n`, so an old-Mac template was all line 1).
let lineIndex: { input: string; starts: number[] } | undefined;
const LINE_BREAK = /\r\n?|\n/g;
const lineStarts = (input: string): number[] => {
  if (lineIndex?.input !== input) {
    const starts = [0];
    for (const m of input.matchAll(LINE_BREAK)) starts.push(m.index + m[0].length);
    lineIndex = { input, starts };
  }
  return lineIndex.starts;
};
Token.prototype.getPosition = function (this: Token): number[] {
  const starts = lineStarts(this.input);
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if ((starts[mid] ?? 0) <= this.begin) low = mid;
    else high = mid - 1;
  }
  return [low + 1, this.begin - (starts[low] ?? 0) + 1];
};

/** Units of allocation one render may make (range items, filter strings, captures): bounds loops. */
export const RENDER_MEMORY_LIMIT = 200_000;

/**
 * Units of work one render of a part may do: every template node evaluated counts 1, plus 1 per 64
 * characters of its source (an output with many filters, a condition with many operands). Loops are
 * bounded in items by the allocation limit, but not in what each pass does: 1,000 × 199 passes of 50
 * cheap `if`s took 27 s of CPU. Tens of milliseconds of work at most, per part and message.
 */
export const RENDER_WORK_LIMIT = 20_000;

export class TooMuchWork extends Error {
  constructor(readonly limit: number) {
    super(`takes more than ${limit} steps to render`);
  }
}

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

type FilterThis = { context: Context };
const liquidEscape = filters.escape as (this: FilterThis, text: string) => string;

/** The html engine's escaping of every output: liquidjs's own `escape`, but for captured html. */
function escapeOutput(this: FilterThis, value: unknown): string {
  const text = stringify(value);
  return capturedHtml.get(this.context)?.has(text) ? text : liquidEscape.call(this, text);
}

/** What a capture holds counts against the render's memory, so doubling it in a loop stops early. */
class BoundedCaptureTag extends CaptureTag {
  override *render(ctx: Context): Generator<unknown, void, unknown> {
    const emitter = new BoundedEmitter(RENDER_MEMORY_LIMIT);
    yield this.liquid.renderer.renderTemplates(this.templates, ctx, emitter);
    ctx.memoryLimit.use(emitter.buffer.length);
    ctx.bottom()[this.variable] = emitter.buffer;
    if (this.liquid.options.outputEscape === escapeOutput) {
      let captured = capturedHtml.get(ctx);
      if (!captured) capturedHtml.set(ctx, (captured = new Set()));
      captured.add(emitter.buffer);
    }
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

// A value printed into a URL attribute where the template has not fixed the scheme yet
// (`<a href="{{ subscriber.location }}">`) could make the link `javascript:…` or `data:…`: escaping
// keeps it from ending the attribute, not from being a script. Such an output is escaped by
// `escapeUrl` instead, which prints `#` for a value that brings a scheme other than http(s),
// mailto, tel or sms. That is enough wherever the value lands before the scheme is fixed: a URL's
// scheme is everything before its first colon, so one completed by this value ends with the value's
// own text before its colon, which is then one of those words (`java` + `script:x` is refused for
// its `script`; `xyz` + `https:` makes an unknown scheme, which runs nothing).
const URL_ATTRIBUTE = /[\s"'/\u0000](href|src|srcset|action|formaction|background|poster|cite|xlink:href|data)\s*=\s*(?:"([^"]*)|'([^']*)|([^\s"'=<>`]*))$/i;
const SAFE_SCHEMES: ReadonlySet<string> = new Set(["http", "https", "mailto", "tel", "sms"]);
/** What browsers skip in a URL before reading its scheme (controls and spaces, anywhere in it). */
const SKIPPED = /[\u0000-\u0020\u007f]+/g;
/** Stands for Liquid's own markup in a masked source: text that is not known until rendering. */
const UNKNOWN = "\u0000";

/**
 * The source with each Liquid tag and output replaced by as many UNKNOWN characters (positions
 * unchanged), and where each piece begins; computed once per source (a template's outputs in turn).
 */
type Range = { begin: number; end: number };
/** Where a tag opened at some `<` ends: its `>` (-1: none), and whether Liquid stands before it. */
type TagEnd = { end: number; liquid: boolean };
type Masking = {
  source: string;
  masked: string;
  pieces: Range[];
  scripts: Range[];
  /** Every `<` of the masked source that opens a tag, in order. */
  opens: number[];
  /** Each `<` asked about so far, read once to its tag's end. */
  tagEnds: Map<number, TagEnd>;
};
let masking: Masking | undefined;
const TAG_OPEN = /<(?=[a-z/!?\u0000])/gi;
/** A script element's content, as a browser ends it (at `</script`, or the end of the document). */
const SCRIPT = /(<script\b[^>]*>)([\s\S]*?)(?:<\/script|$)/gi;
const MASKED = new RegExp(
  String.raw`(\{%-?\s*raw\s*-?%\})([\s\S]*?)(\{%-?\s*endraw\s*-?%\})|\{%-?\s*comment\s*-?%\}[\s\S]*?\{%-?\s*endcomment\s*-?%\}|${LIQUID.source}`,
  "g",
);
const maskedSource = (source: string): Masking => {
  if (masking?.source !== source) {
    const pieces: Range[] = [];
    const mask = (piece: string, at: number) => {
      pieces.push({ begin: at, end: at + piece.length });
      return UNKNOWN.repeat(piece.length);
    };
    // A comment block whole (what it holds never renders); a raw block's delimiters only (what it
    // holds renders as written, Liquid-looking text included); every other tag and output.
    const masked = source.replace(MASKED, (piece: string, rawOpen: string | undefined, rawText: string | undefined, _rawClose: string | undefined, at: number) => {
      if (rawOpen === undefined || rawText === undefined) return mask(piece, at);
      return mask(rawOpen, at) + rawText + mask(piece.slice(rawOpen.length + rawText.length), at + rawOpen.length + rawText.length);
    });
    const scripts = [...masked.matchAll(SCRIPT)].map((m) => {
      const begin = m.index + (m[1]?.length ?? 0);
      return { begin, end: begin + (m[2]?.length ?? 0) };
    });
    // A `<` opens a tag only before a letter, `/`, `!` or `?` (`a < b` is text), or before Liquid
    // that may print a tag's name.
    const opens: number[] = [];
    for (const open of masked.matchAll(TAG_OPEN)) opens.push(open.index);
    masking = { source, masked, pieces, scripts, opens, tagEnds: new Map() };
  }
  return masking;
};

/** A colon next, as a browser reads attribute text: after skipped characters, written or as a character reference. */
const COLON_NEXT = /^(?:[\u0000-\u0020\u007f]|&(?:#0*(?:9|10|13|32);?|#x0*(?:9|a|d|20);?|Tab;|NewLine;))*(?::|&#0*58;?|&#x0*3a;?|&colon;)/i;

/** The masked piece at `at` (pieces are in source order): an output's own, or the `{% liquid %}` tag holding an `echo`. */
const pieceAt = (pieces: Range[], at: number) => {
  let low = 0;
  let high = pieces.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const piece = pieces[mid] as Range;
    if (at < piece.begin) high = mid - 1;
    else if (at >= piece.end) low = mid + 1;
    else return piece;
  }
  return undefined;
};

/** An event-handler attribute (`onclick=`, `onload=`) whose value the output is printed into. */
const EVENT_HANDLER = /[\s"'/\u0000]on[a-z]+\s*=\s*(?:"[^"]*|'[^']*|[^\s"'=<>`]*)$/i;

type ScanState = "name" | "afterEquals" | "unquoted" | '"' | "'";

/**
 * Reads tag markup from `from` (just after its `<`) to `to` as a browser reads it: a quote opens a
 * value only right after `=`, and a `>` outside a quoted value ends the tag. The `>` that ended it
 * (-1: none before `to`), the state at `to` otherwise, and whether Liquid (masked) stood before.
 */
const scanTag = (text: string, from: number, to: number): { end: number; state: ScanState; liquid: boolean } => {
  let state: ScanState = "name";
  let liquid = false;
  for (let i = from; i < to; i++) {
    const ch = text[i] as string;
    if (ch === UNKNOWN) liquid = true;
    if (state === '"' || state === "'") {
      if (ch === state) state = "name";
    } else if (ch === ">") return { end: i, state, liquid };
    else if (state === "afterEquals") {
      if (ch === '"' || ch === "'") state = ch;
      else if (!/\s/.test(ch)) state = "unquoted";
    } else if (state === "unquoted") {
      if (/\s/.test(ch)) state = "name";
    } else if (ch === "=") state = "afterEquals";
  }
  return { end: -1, state, liquid };
};

/** The last `<` before `at` (-1: none), by binary search. */
const lastOpenBefore = (opens: number[], at: number): number => {
  let low = 0;
  let high = opens.length - 1;
  let found = -1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const open = opens[mid] as number;
    if (open < at) {
      found = open;
      low = mid + 1;
    } else high = mid - 1;
  }
  return found;
};

/** The end of the tag opened at `open`, read once per source and `<`. */
const tagEndOf = (m: Masking, open: number): TagEnd => {
  let known = m.tagEnds.get(open);
  if (!known) {
    const { end, liquid } = scanTag(m.masked, open + 1, m.masked.length);
    known = { end, liquid };
    m.tagEnds.set(open, known);
  }
  return known;
};

/**
 * How far into a tag (from its `<`) a value may be printed: the markup before it is read for each
 * value, so this bounds the work per value (no real tag is longer; a longer one holding a value is
 * refused when the template is saved).
 */
export const TAG_WINDOW = 8 * 1024;

/**
 * Where what a template prints at `begin` of `source` lands: in text (null); inside a tag, with
 * `url` saying whether it is in a URL attribute whose scheme the template's own text has not fixed
 * (`open`, or `beforeColon`: right before the template's own colon) and `unquoted` whether its value
 * has no quotes to stay inside; in an event handler's value (`handler`) or a script (`script`).
 */
type Place = { url: "open" | "beforeColon" | null; unquoted: boolean } | "handler" | "script" | "far" | null;
const outputPlace = (source: string, begin: number): Place => {
  const masking = maskedSource(source);
  const { masked, pieces, scripts } = masking;
  // What prints at `begin` stands where its piece stands (an `echo` inside `{% liquid %}`: that tag).
  const piece = pieceAt(pieces, begin);
  const at = piece?.begin ?? begin;
  if (scripts.some((script) => at >= script.begin && at < script.end)) return "script";
  const open = lastOpenBefore(masking.opens, at);
  if (open === -1) return null;
  // The tag ended before the value, with no Liquid inside it that could hide its `>`: text.
  const tagEnd = tagEndOf(masking, open);
  if (tagEnd.end !== -1 && tagEnd.end < at && !tagEnd.liquid) return null;
  if (at - open > TAG_WINDOW) {
    // Still inside a tag, too far from its `<` to read; or past a `>` after Liquid (most likely
    // text): kept inside any attribute it might be in.
    return tagEnd.end === -1 || tagEnd.end >= at ? "far" : { url: null, unquoted: true };
  }
  const tag = masked.slice(open, at);
  // Still inside the tag: no `>` but in the quoted values of earlier attributes. With Liquid inside
  // the tag, a `>` may be one that never renders (an untaken branch): then the tag is read on.
  if (tag.replace(/"[^"]*"|'[^']*'/g, "").includes(">") && !tag.includes(UNKNOWN)) return null;
  if (EVENT_HANDLER.test(tag)) return "handler";
  const scanned = scanTag(tag, 1, tag.length);
  const quoting = scanned.end !== -1 ? "text" : scanned.state === '"' || scanned.state === "'" ? "quoted" : "unquoted";
  const unquoted = quoting === "unquoted";
  const m = URL_ATTRIBUTE.exec(tag);
  if (!m) return quoting === "text" ? null : { url: null, unquoted };
  const value = m[2] ?? m[3] ?? m[4] ?? "";
  // A srcset is a list of URLs: each candidate after a comma starts one of its own.
  const sofar = m[1]?.toLowerCase() === "srcset" ? value.slice(value.lastIndexOf(",") + 1) : value;
  // The template's own text before any Liquid or entity in the value: only that can fix the scheme.
  const cut = sofar.search(/[\u0000&]/);
  const known = cut === -1 ? sofar : sofar.slice(0, cut);
  if (/[:/?#]/.test(known.replace(SKIPPED, ""))) return { url: null, unquoted };
  // The template's own colon right after the value makes the value the scheme's name.
  const end = piece?.end ?? begin;
  return { url: COLON_NEXT.test(masked.slice(end, end + 64).replace(/\u0000+/, "")) ? "beforeColon" : "open", unquoted };
};

/**
 * What ends or splits an unquoted attribute value (`title={{ v }}`), written as character
 * references: the value stays one value, and a browser shows the same text.
 */
const ATTRIBUTE_BREAKERS = /[\t\n\f\r =`]/g;
const keepInAttribute = (html: string): string => html.replace(ATTRIBUTE_BREAKERS, (ch) => `&#${ch.charCodeAt(0)};`);

/** `text` unless it brings a scheme not known to be safe to the URL it is printed into. */
const urlSafe = (text: string): string => {
  const squeezed = text.includes(":") ? text.replace(SKIPPED, "") : text;
  const end = squeezed.search(/[:/?#]/);
  if (end === -1 || squeezed[end] !== ":") return text;
  return SAFE_SCHEMES.has(squeezed.slice(0, end).toLowerCase()) ? text : "#";
};

function escapeUrl(this: FilterThis, value: unknown): string {
  return escapeOutput.call(this, urlSafe(stringify(value)));
}

/** Before the template's own colon, a value is a scheme's name: one other than the safe ones prints `#`. */
function escapeSchemeName(this: FilterThis, value: unknown): string {
  const text = urlSafe(stringify(value));
  const name = text.replace(SKIPPED, "").toLowerCase();
  return escapeOutput.call(this, /^[a-z][a-z0-9+.-]*$/.test(name) && !SAFE_SCHEMES.has(name) ? "#" : text);
}

/** An escaping for an unquoted attribute value: the same, and kept inside the value. */
const unquotedVariant = (escape: typeof escapeOutput) =>
  function (this: FilterThis, value: unknown): string {
    return keepInAttribute(escape.call(this, value));
  };
const escapeAttribute = unquotedVariant(escapeOutput);
const escapeUrlUnquoted = unquotedVariant(escapeUrl);
const escapeSchemeNameUnquoted = unquotedVariant(escapeSchemeName);

/** A value the template prints where no escaping makes it safe: refused when the template is saved. */
export class UnsafeOutputPlace extends Error {
  constructor(readonly line: number, message: string) {
    super(message);
  }
}

const guardFor = (place: Place, line: () => number) => {
  if (place === "handler") {
    throw new UnsafeOutputPlace(line(), "a value cannot be printed into an event-handler attribute (on…=): HTML escaping does not make it safe there, and mail clients remove them");
  }
  if (place === "script") {
    throw new UnsafeOutputPlace(line(), "a value cannot be printed inside <script>: HTML escaping does not make it safe there, and mail clients remove scripts");
  }
  if (place === "far") {
    throw new UnsafeOutputPlace(line(), `a value cannot be printed more than ${TAG_WINDOW / 1024} KB into a tag (from its <): close the tag sooner`);
  }
  if (place === null) return escapeOutput;
  if (place.url === "open") return place.unquoted ? escapeUrlUnquoted : escapeUrl;
  if (place.url === "beforeColon") return place.unquoted ? escapeSchemeNameUnquoted : escapeSchemeName;
  return place.unquoted ? escapeAttribute : escapeOutput;
};

const ESCAPES: ReadonlySet<unknown> = new Set([escapeOutput, escapeAttribute, escapeUrl, escapeUrlUnquoted, escapeSchemeName, escapeSchemeNameUnquoted]);

/**
 * Gives every output of parsed html (`{{ … }}`, `{% echo %}`, `{% cycle %}`) the escaping its place
 * needs: inside a tag, kept inside its attribute (unquoted too); in a URL attribute before its scheme
 * is fixed, also a safe scheme. A value in an event handler or a script is refused (UnsafeOutputPlace).
 * Idempotent (parsed templates are cached): it sets the handler, it does not wrap it.
 */
export const guardHtmlOutputs = (templates: Template[]): Template[] => {
  for (const template of walk(templates)) {
    const guard = () => guardFor(outputPlace(template.token.input, template.token.begin), () => template.token.getPosition()[0] as number);
    if (template instanceof CycleTag) {
      // `cycle` escapes each value with its engine's outputEscape as it writes it: inside a tag, it
      // gets an engine whose outputEscape is the guard.
      const handler = guard();
      (template as unknown as { liquid: Liquid }).liquid = handler === escapeOutput ? htmlEngine : guardedEngine(handler);
      continue;
    }
    const filters = (template as { value?: { filters?: { handler: unknown }[] } }).value?.filters;
    if (!filters) continue;
    const last = filters.at(-1);
    // An output's escaping is its last filter; `echo` escapes as it writes, unless its last filter is raw.
    const escaping = last !== undefined && ESCAPES.has(last.handler);
    if (!escaping && !(template instanceof EchoTag)) continue;
    const handler = guard();
    if (escaping) last.handler = handler;
    else if (handler !== escapeOutput) {
      // (liquidjs does not export FilterToken; a filter reads only its name and arguments from it.)
      const token = { name: "escape", args: [] } as unknown as ConstructorParameters<typeof Filter>[0];
      filters.push(new Filter(token, { handler, raw: true }, htmlEngine) as unknown as { handler: unknown });
    }
  }
  return templates;
};

/** The html engine with a place's guard as its outputEscape (for the tags that escape through it as they write). */
const guardedEngines = new Map<unknown, Liquid>();
const guardedEngine = (escape: typeof escapeUrl): Liquid => {
  let engine = guardedEngines.get(escape);
  if (!engine) {
    engine = Object.create(htmlEngine, { options: { value: { ...htmlEngine.options, outputEscape: escape } } }) as Liquid;
    guardedEngines.set(escape, engine);
  }
  return engine;
};

/** The filters the html engine replaces: an output they appear in evaluates differently there. */
export const HTML_OWN_FILTERS: ReadonlySet<string> = new Set(["escape", "escape_once"]);

/** Where each block was written in the output of the part being rendered (a character offset). */
export type BlockOffsets = Partial<Record<BlockName, number>>;

/**
 * A block of the message being rendered (the scope's `_blocks`, set by renderMessage), written at
 * `offset` of its part's output, which is recorded (`_blockAt`) so the block can be taken out again.
 */
export const writeBlock = (ctx: Context, name: BlockName, offset: number | undefined): string => {
  const scope = ctx.environments as { _blocks?: ServiceBlocks; _blockAt?: BlockOffsets };
  if (scope._blockAt && offset !== undefined) scope._blockAt[name] = offset;
  return scope._blocks?.[name] ?? "";
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

const configure = (escapeOutputs: boolean) => {
  const liquid = new Liquid({
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
  if (escapeOutputs) {
    // Outputs are escaped once already: `escape` must not escape them twice, and nothing un-escapes.
    delete liquid.filters.raw;
    for (const name of HTML_OWN_FILTERS) liquid.registerFilter(name, (value: unknown) => stringify(value));
  }
  return countingWork(liquid);
};

/** The work of evaluating a list of nodes once (see RENDER_WORK_LIMIT), computed once per list. */
const weights = new WeakMap<Template[], number>();
const weightOf = (templates: Template[]): number => {
  let weight = weights.get(templates);
  if (weight === undefined) {
    weight = 0;
    for (const template of templates) weight += 1 + ((template.token.end - template.token.begin) >> 6);
    weights.set(templates, weight);
  }
  return weight;
};

/**
 * Work done so far, by render: keyed by the context's allocation limiter, which every scope a render
 * spawns shares (a loop body, a capture) and a fresh render does not.
 */
const workDone = new WeakMap<object, number>();

/**
 * Every list of nodes an engine evaluates (a part, each pass of a loop, a branch, a capture) goes
 * through its renderer's `renderTemplates`: counting there bounds the work of any template.
 */
const countingWork = (liquid: Liquid) => {
  const { renderer } = liquid;
  const renderTemplates = renderer.renderTemplates;
  renderer.renderTemplates = function (this: typeof renderer, templates: Template[], ctx: Context, emitter?: Emitter) {
    const done = (workDone.get(ctx.memoryLimit) ?? 0) + weightOf(templates);
    if (done > RENDER_WORK_LIMIT) throw new TooMuchWork(RENDER_WORK_LIMIT);
    workDone.set(ctx.memoryLimit, done);
    return renderTemplates.call(this, templates, ctx, emitter);
  };
  return liquid;
};

const withBlocks = (liquid: Liquid) => {
  liquid.registerTag("service_block", ServiceBlockTag);
  return liquid;
};

export const htmlEngine = configure(true);
export const plainEngine = configure(false);
export const htmlLayoutEngine = withBlocks(configure(true));
export const plainLayoutEngine = withBlocks(configure(false));
export type Engine = typeof htmlEngine;

/**
 * One render context per message, shared by its parts (escaping is decided when a template is parsed,
 * so html and plain templates render in the same context): one allocation budget per message.
 */
export const renderContext = (scope: object): Context => new Context(scope, plainEngine.options, { sync: true }, { liquid: plainEngine });

/** Renders parsed `templates` in `ctx`, synchronously, failing past `maxChars` of output. */
export const renderIn = (ctx: Context, templates: Template[], maxChars: number): string => {
  const emitter = new BoundedEmitter(maxChars);
  toValueSync(plainEngine.renderer.renderTemplates(templates, ctx, emitter));
  return emitter.buffer;
};
