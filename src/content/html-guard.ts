import { CycleTag, EchoTag, Filter, type Liquid, type Template } from "liquidjs";
import { escapeAll, escapeOutput, htmlEngine, stringify, walk } from "./engine";
import type { FilterThis } from "./render-work";
import { outputPlace, type Place, SKIPPED, TAG_WINDOW } from "./markup-place";
import { maskedSource } from "./liquid-mask";
import { lineOf } from "./liquid-syntax";

// The escaping each value a campaign's html prints gets for its place (markup-place.ts): text is
// HTML-escaped, an attribute value kept inside its attribute (quoted or not), a URL whose scheme the
// template has not fixed also given a safe scheme, CSS kept to a value; a place no escaping makes
// safe is refused when the template is saved.
//
// A value printed into a URL attribute where the template has not fixed the scheme yet
// (`<a href="{{ subscriber.location }}">`) could make the link `javascript:…` or `data:…`: escaping
// keeps it from ending the attribute, not from being a script. Such an output is escaped by
// `escapeUrl` instead, which prints `#` for a value that brings a scheme other than http(s),
// mailto, tel or sms. That is enough wherever the value lands before the scheme is fixed: a URL's
// scheme is everything before its first colon, so one completed by this value ends with the value's
// own text before its colon, or the value is part of that text: the template's letters up to its
// colon complete what the value begins (`{{ v }}script:x`), and such a value is the scheme's name
// (escapeSchemeName), which prints `#` unless it is one of those words (`java` + `script:x` would be
// `javascript:`; `https` + `script:` makes an unknown scheme, which runs nothing).
const SAFE_SCHEMES: ReadonlySet<string> = new Set(["http", "https", "mailto", "tel", "sms"]);

/**
 * What ends or splits an unquoted attribute value (`title={{ v }}`), written as character
 * references: the value stays one value, and a browser shows the same text. Where an attribute's
 * name stands, `/` too: there it starts the next attribute (`<p {{ v }}>` with `x/hidden`).
 */
const ATTRIBUTE_BREAKERS = /[\t\n\f\r =`]/g;
const NAME_BREAKERS = /[\t\n\f\r =`/]/g;
const reference = (ch: string) => `&#${ch.charCodeAt(0)};`;
const keepInAttribute = (html: string): string => html.replace(ATTRIBUTE_BREAKERS, reference);

/** A value where an attribute's name stands: one name, which the template gives no value (markup-place.ts). */
function escapeName(this: FilterThis, value: unknown): string {
  return escapeAll.call(this, value).replace(NAME_BREAKERS, reference);
}

/**
 * `text` unless it brings a scheme not known to be safe to the URL it is printed into. Text before
 * its colon that starts with a digit, `+`, `-` or `.` is no scheme (a scheme starts with a letter;
 * `10:30`, `2026-12-01T10:30`), nor can text before it complete one into a dangerous scheme (every
 * part of `javascript`, `data` or `vbscript` that ends one starts with a letter); a colon first can.
 */
const urlSafe = (text: string): string => {
  const squeezed = text.includes(":") ? text.replace(SKIPPED, "") : text;
  const end = squeezed.search(/[:/?#]/);
  if (end === -1 || squeezed[end] !== ":") return text;
  const scheme = squeezed.slice(0, end).toLowerCase();
  return SAFE_SCHEMES.has(scheme) || /^[0-9+.-]/.test(scheme) ? text : "#";
};

function escapeUrl(this: FilterThis, value: unknown): string {
  return escapeAll.call(this, urlSafe(stringify(value)));
}

/** Whether `text` could begin the name of a scheme not known to be safe (the template's text completing it). */
const unsafeSchemeName = (text: string): boolean => {
  const name = text.replace(SKIPPED, "").toLowerCase();
  return /^[a-z][a-z0-9+.-]*$/.test(name) && !SAFE_SCHEMES.has(name);
};

/** Before the template's own colon, a value is a scheme's name: one other than the safe ones prints `#`. */
function escapeSchemeName(this: FilterThis, value: unknown): string {
  const text = urlSafe(stringify(value));
  return escapeAll.call(this, unsafeSchemeName(text) ? "#" : text);
}

/**
 * CSS a value may be: a colour, a size, a font list, a gradient (`#3366ff`, `rgb(26, 115, 232)`,
 * `'Open Sans', Arial`, `16px !important`, `calc(100% - 20px)`): letters, digits, spaces, quotes and
 * `# % . , + - _ ( ) / * !`, with only the functions below. Anything else could end the declaration
 * or the rule and start others (`red;background:url(…)`, `}*{…}`, `@import`), load something
 * (`url(…)`, `image-set(…)`) or spell either with escapes (`\`): such a value prints nothing.
 */
const CSS_VALUE = /^[\p{L}\p{N}\s#%.,+_\-()'"/*!]*$/u;
const CSS_FUNCTIONS: ReadonlySet<string> = new Set([
  "rgb", "rgba", "hsl", "hsla", "hwb", "lab", "lch", "oklab", "oklch", "color", "calc", "min", "max", "clamp", "var",
  "linear-gradient", "radial-gradient", "conic-gradient", "repeating-linear-gradient", "repeating-radial-gradient",
]);
const cssValue = (text: string): boolean =>
  CSS_VALUE.test(text) &&
  // No comment (which would hide the author's CSS after it), no scheme-relative URL (`//host/…` in an
  // author's `url(…)`), no string left open.
  !/\/\/|\/\*|\*\//.test(text) &&
  (text.match(/'/g)?.length ?? 0) % 2 === 0 &&
  (text.match(/"/g)?.length ?? 0) % 2 === 0 &&
  [...text.matchAll(/([\p{L}\p{N}_-]*)\s*\(/gu)].every((m) => m[1] === "" || CSS_FUNCTIONS.has((m[1] as string).toLowerCase()));

function escapeCss(this: FilterThis, value: unknown): string {
  const text = stringify(value);
  return escapeAll.call(this, cssValue(text) ? text : "");
}

/** In a style element's text (read as is: no character references): the value itself, which holds no `<` or `&`. */
function escapeCssText(this: FilterThis, value: unknown): string {
  const text = stringify(value);
  return cssValue(text) ? text : "";
}

type Escape = typeof escapeOutput;
const ESCAPES = new Set<unknown>([escapeOutput, escapeAll, escapeUrl, escapeSchemeName, escapeCss, escapeCssText, escapeName]);

/**
 * An escaping for an unquoted attribute value: the same, and kept inside the value; `alone`, for a
 * value that is the attribute's whole value, also prints an empty one as `""` (nothing there would
 * make the next attribute this one's value).
 */
const unquotedVariants = new Map<Escape, { inside: Escape; alone: Escape }>();
for (const escape of [escapeAll, escapeUrl, escapeSchemeName, escapeCss]) {
  const inside = function (this: FilterThis, value: unknown): string {
    return keepInAttribute(escape.call(this, value));
  };
  const alone = function (this: FilterThis, value: unknown): string {
    return inside.call(this, value) || '""';
  };
  unquotedVariants.set(escape, { inside, alone });
  ESCAPES.add(inside);
  ESCAPES.add(alone);
}
const unquotedOf = (escape: Escape, alone = false): Escape => {
  const variants = unquotedVariants.get(escape) as { inside: Escape; alone: Escape };
  return alone ? variants.alone : variants.inside;
};

/**
 * In a srcset, a comma in a value ends its candidate and starts another, a URL of its own whose scheme
 * the value brings: any such candidate with a scheme not known to be safe makes the value print `#`.
 * (Every comma counts, also one a browser would read as part of a URL: a stricter reading.)
 */
const srcsetVariants = { open: new Map<Escape, Escape>(), schemeName: new Map<Escape, Escape>() };
/** `escape` in a srcset; `schemeName`: the template's text after the value completes a scheme, which the value's last candidate begins. */
const srcsetOf = (escape: Escape, schemeName: boolean): Escape => {
  const variants = schemeName ? srcsetVariants.schemeName : srcsetVariants.open;
  let variant = variants.get(escape);
  if (!variant) {
    variant = function (this: FilterThis, value: unknown): string {
      const candidates = stringify(value).split(",");
      const safe =
        candidates.slice(1).every((candidate) => urlSafe(candidate) !== "#") &&
        !(schemeName && candidates.length > 1 && unsafeSchemeName(candidates.at(-1) as string));
      return escape.call(this, safe ? value : "#");
    };
    variants.set(escape, variant);
    ESCAPES.add(variant);
  }
  return variant;
};

/** A value the template prints where no escaping makes it safe: refused when the template is saved. */
export class UnsafeOutputPlace extends Error {
  constructor(readonly line: number, message: string) {
    super(message);
  }
}

/** Why a value is refused in each place no escaping makes safe. */
const REFUSALS: Record<Exclude<Place, object | null>, string> = {
  handler: "a value cannot be printed into an event-handler attribute (on…=): HTML escaping does not make it safe there, and mail clients remove them",
  script: "a value cannot be printed inside <script>: HTML escaping does not make it safe (or correct, in JSON-LD) there",
  liquidName: "a value cannot be printed into an attribute whose name Liquid writes: it could be an event handler's; write the attribute's name as markup",
  far: `a value cannot be printed more than ${TAG_WINDOW / 1024} KB into a tag (from its <): close the tag sooner`,
  tagName: "a value cannot be printed into a tag's name: it could make the tag a <script>; write the name as markup",
  markup: "a value cannot be printed into srcdoc: its value is html, which HTML escaping does not keep from running",
  animation: "a value cannot be printed into an SVG animation (<animate>, <set>, …): it can set its target's href to a script, and mail clients remove them",
  document: "a value cannot be printed into <base>, <link>, <script> or <meta http-equiv>: they rebase, load or redirect the whole message",
  unsettled:
    "a value cannot be printed after markup that readers would read differently: a Liquid branch or loop that leaves a tag, quote or comment open (or closes one) only when it runs, or a <title>, <textarea>, <noscript> or <style> holding what looks like a tag; make each branch complete markup",
};

const guardFor = (place: Place, line: () => number, source: string) => {
  if (place === "unsettled") {
    // Where the markup that readers disagree on begins, which is what to change.
    throw new UnsafeOutputPlace(line(), `${REFUSALS.unsettled} (that markup begins on line ${lineOf(source, maskedSource(source).unsettled)})`);
  }
  if (typeof place === "string") throw new UnsafeOutputPlace(line(), REFUSALS[place]);
  // Captured html prints as made only in text; everywhere else it is escaped as any value.
  if (place === null) return escapeOutput;
  if (place.strict) return escapeAll;
  if (place.name) return escapeName;
  if (place.css === "element") return escapeCssText;
  const base = place.css ? escapeCss : place.url === "open" ? escapeUrl : place.url === "beforeColon" ? escapeSchemeName : escapeAll;
  const escape = place.unquoted ? unquotedOf(base, place.alone) : base;
  return place.srcset ? srcsetOf(escape, place.url === "beforeColon") : escape;
};

/**
 * Gives every output of parsed html (`{{ … }}`, `{% echo %}`, `{% cycle %}`) the escaping its place
 * needs: inside a tag, kept inside its attribute (unquoted too); in a URL attribute before its scheme
 * is fixed, also a safe scheme. A value in an event handler or a script is refused (UnsafeOutputPlace).
 * Idempotent (parsed templates are cached): it sets the handler, it does not wrap it.
 */
export const guardHtmlOutputs = (templates: Template[]): Template[] => {
  for (const template of walk(templates)) {
    const source = template.token.input;
    const guard = () => guardFor(outputPlace(source, template.token.begin), () => template.token.getPosition()[0] as number, source);
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
