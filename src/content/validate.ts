import { ForTag, LiquidError, TablerowTag, TagToken, type Template, type Token, Tokenizer, TokenKind } from "liquidjs";
import { type Engine, EXPRESSION_FILTERS, htmlEngine, LOOP_PROPERTIES, OutputTooLarge, plainEngine, RENDER_MEMORY_LIMIT, walk } from "./engine";
import { lineOf as lineAt, offsetOf } from "./liquid-syntax";
import { TooMuchWork } from "./render-work";
import { article, clipped, moreProblems } from "../errors/zod-messages";

// A template is checked when it is saved, never first at send time: it must parse, name only the
// variables the contract lists (checked statically, so a typo inside a branch the sample would not
// take is caught too), and loop over no literal range larger than MAX_LOOP_RANGE.

export type TemplateField = "subject" | "preheader" | "html" | "text";

/** A template that cannot be saved: `message` names the line and the problem. */
export class TemplateError extends Error {
  constructor(
    readonly field: TemplateField,
    message: string,
  ) {
    super(message);
    this.name = "TemplateError";
  }
}

const MAX_LOOP_RANGE = 1000;

/**
 * Liquid tags and outputs one template may hold: half the render's step budget (each is at least a
 * step), and a bound on the work of checking it when it is saved.
 */
const MAX_LIQUID_PIECES = 10_000;
/**
 * Brackets inside one another in one tag or output, at most (`a[b[c[0]]]` is three): each level is an
 * index read from another variable, which the engine's analysis walks recursively and reports as a
 * variable of its own (its name holding every level inside it), so depth costs stack and, reported,
 * the square of the depth in characters.
 */
const MAX_INDEX_NESTING = 16;
/** Problems one field reports at most (each unknown variable is one); the count of the others is given. */
const MAX_PROBLEMS = 20;
/** A name (a variable's, a filter's, a property's), as quoted in a problem, at most (in characters; longer ones end in "…"). */
const MAX_NAME_SHOWN = 120;
/** The engine's own message about a template, as a problem quotes it, at most (it quotes the tag it is about). */
const MAX_ENGINE_MESSAGE = 300;
const linesIn = (tag: string): number => 1 + (tag.match(/\r\n?|\n/g)?.length ?? 0);

/** The variables a template may use, by root; `null`: the root is a value itself. */
const VARIABLES: Record<string, readonly string[] | null> = {
  subscriber: ["email", "name", "tags", "location", "source"],
  campaign: ["subject"],
  newsletter: ["name", "address"],
  unsubscribe_url: null,
};
/** Liquid's own properties of any value (`subscriber.tags.size`, `subscriber.tags.first`). */
const VALUE_PROPERTIES = new Set(["size", "first", "last"]);

const variableList = "subscriber.email, subscriber.name, subscriber.tags, subscriber.location, subscriber.source, campaign.subject, newsletter.name, newsletter.address, unsubscribe_url";
/** The variables a field's template may use, as its problems list them (the subject cannot use itself). */
const knownIn = (field: TemplateField) => (field === "subject" ? variableList.replace("campaign.subject, ", "") : variableList);

const engineFor = (field: TemplateField): Engine => (field === "html" ? htmlEngine : plainEngine);

type Segments = readonly unknown[];

const isKnown = (segments: Segments, field: TemplateField): boolean => {
  const [root, property, ...rest] = segments;
  if (typeof root !== "string" || !Object.hasOwn(VARIABLES, root)) return false;
  const properties = VARIABLES[root] ?? null;
  let tail: Segments = [property, ...rest];
  if (properties === null) tail = property === undefined ? [] : tail;
  else {
    if (typeof property !== "string" || !properties.includes(property)) return false;
    tail = rest;
  }
  // The subject cannot be made of itself.
  if (field === "subject" && root === "campaign") return false;
  return tail.every((s) => typeof s === "number" || (typeof s === "string" && VALUE_PROPERTIES.has(s)));
};

const lineOf = (err: LiquidError): number | undefined => err.token?.getPosition()[0];

/** liquidjs appends ", line:N, col:M" to its messages; the contract's wording is "… on line N". */
const problemOf = (err: unknown): string => {
  const cause = err instanceof LiquidError && err.originalError instanceof Error ? err.originalError : err;
  const message = cause instanceof Error ? cause.message : String(cause);
  if (cause instanceof OutputTooLarge) return `the template ${message}`;
  if (cause instanceof TooMuchWork) return `the template ${message} (a loop doing too much in each pass?)`;
  if (/memory alloc limit exceeded/.test(message)) {
    return `the template needs more than ${RENDER_MEMORY_LIMIT} items or characters to render (a loop over too large a range?)`;
  }
  // The engine's own exceptions, in words a template's author can act on.
  if (cause instanceof RangeError && /call stack/i.test(message)) return `${NESTS_TOO_DEEPLY} (tags, captures or parentheses inside one another)`;
  if (cause instanceof URIError) return "url_decode was given malformed percent-encoding";
  // (The engine's messages quote the tag they are about, however long: quoted up to a few hundred characters.)
  const text = clipped(message.replace(/, line:\d+, col:\d+$/, ""), MAX_ENGINE_MESSAGE);
  const filter = /^undefined filter: (\w+)$/.exec(text)?.[1];
  if (filter && (EXPRESSION_FILTERS as readonly string[]).includes(filter)) {
    return `the ${filter} filter is not supported: it evaluates an expression hidden in a string (use ${filter.replace(/_exp$/, "")} with a property, or a for loop with an if)`;
  }
  const tag = /^tag "(\w+)" not found$/.exec(text)?.[1];
  if (tag) return strayTag(tag);
  if (text === 'expected "|" before filter') return 'something follows a value that is neither an operator nor a "|" and a filter (to compare, write == or !=; = only assigns, in {% assign %})';
  return text;
};

/** The block each part of one belongs to (liquidjs reports a part outside its block as a tag it does not know). */
const BLOCK_OF: Record<string, string> = { else: "{% if %}, {% unless %}, {% case %} or {% for %}", elsif: "{% if %}", when: "{% case %}" };

/** A tag the engine has no tag for: a part of a block outside it (an end tag that closes nothing open), or an unknown one. */
const strayTag = (name: string): string => {
  const block = BLOCK_OF[name];
  if (block) return `{% ${name} %} stands outside ${article(block.slice(3))} ${block}`;
  if (/^end(if|unless|for|case|capture|comment|raw|tablerow)$/.test(name)) {
    return `{% ${name} %} closes no open {% ${name.slice(3)} %} (a stray end tag, or one that does not match the block it ends)`;
  }
  return `unknown tag "${name}"`;
};

const NESTS_TOO_DEEPLY = "the template nests too deeply";

/**
 * How deep `[` nest in one tag or output, strings and comments included: what reads as a string or a
 * comment is the engine's to decide (a `#` line of a {% liquid %} tag is one, its apostrophe opens
 * nothing), so no quote is taken to hide a bracket.
 */
const indexNesting = (piece: string): number => {
  let depth = 0;
  let deepest = 0;
  for (const char of piece) {
    if (char === "[") deepest = Math.max(deepest, ++depth);
    else if (char === "]") depth = Math.max(0, depth - 1);
  }
  return deepest;
};

const clippedName = (name: string) => clipped(name, MAX_NAME_SHOWN);

const at = (line: number | undefined) => (line === undefined ? "" : ` on line ${line}`);


type RangeLike = { kind: number; lhs?: { content?: unknown }; rhs?: { content?: unknown } };

/** Every literal `(a..b)` range wider than MAX_LOOP_RANGE, whatever branch it is in. */
const loopProblems = (field: TemplateField, templates: Template[]): TemplateError[] => {
  const problems: TemplateError[] = [];
  for (const template of walk(templates)) {
    if (!(template instanceof ForTag || template instanceof TablerowTag)) continue;
    const collection = (template as unknown as { collection: RangeLike }).collection;
    const low = Number(collection.lhs?.content);
    const high = Number(collection.rhs?.content);
    if (Number.isFinite(low) && Number.isFinite(high) && high - low + 1 > MAX_LOOP_RANGE) {
      const line = template.token.getPosition()[0];
      problems.push(new TemplateError(field, `a loop may cover at most ${MAX_LOOP_RANGE} items (range (${low}..${high}))${at(line)}`));
    }
  }
  return problems;
};

/** What liquidjs keeps of a token: where it stands in the template's source. */
type SourceToken = { kind: number; begin: number; end: number; input: string; operator?: string; getPosition(): [number, number] };
type ParsedExpression = { postfix: SourceToken[] };
type ParsedValue = { initial: ParsedExpression };

/** Liquid's one operator with a single operand (`not a`); every other stands between two. */
const UNARY_OPERATORS = new Set(["not"]);

/**
 * What is wrong with an expression's shape, if anything: liquidjs reads an operator missing an
 * operand (`a and`, `a ==`) or two operands with none between them (`a b`) without complaint, and
 * renders them as something else (the condition false, the second value dropped), so every
 * recipient would get the wrong branch. Read in source order (the engines group no expressions in
 * parentheses: `(` starts a range).
 */
const expressionProblem = (expression: ParsedExpression): { token: SourceToken; problem: string } | undefined => {
  const tokens = [...expression.postfix].sort((a, b) => a.begin - b.begin);
  const first = tokens[0];
  if (!first) return undefined;
  const last = tokens[tokens.length - 1] as SourceToken;
  const text = clippedName(first.input.slice(first.begin, last.end));
  let wantOperand = true;
  for (const token of tokens) {
    if (token.kind === TokenKind.Operator) {
      if (UNARY_OPERATORS.has(token.operator ?? "")) {
        if (!wantOperand) return { token, problem: `"${text}" has "${token.operator}" after a value (it goes before the one it negates)` };
        continue;
      }
      if (wantOperand) return { token, problem: `"${text}" has "${token.operator}" without a value before it` };
      wantOperand = true;
      continue;
    }
    if (!wantOperand) return { token, problem: `"${text}" has two values with no operator between them (==, !=, <, >, <=, >=, contains, and, or)` };
    wantOperand = false;
  }
  if (wantOperand) return { token: last, problem: `"${text}" ends with "${last.operator}", which needs a value after it` };
  return undefined;
};

/**
 * Expressions the engine parsed into something other than what was written (see expressionProblem),
 * a `{% when %}` comparing with nothing, and a `|` with no filter after it: each refused on save.
 */
const expressionProblems = (field: TemplateField, templates: Template[]): { line: number; problem: TemplateError }[] => {
  const problems: { line: number; problem: TemplateError }[] = [];
  for (const template of walk(templates)) {
    const parts = template as unknown as { value?: ParsedValue; branches?: { value?: ParsedValue; values?: unknown[] }[]; token: Token & { args?: string; content?: string } };
    const line = template.token.getPosition()[0] ?? 0;
    for (const value of [parts.value, ...(parts.branches ?? []).map((b) => b.value)]) {
      const found = value?.initial ? expressionProblem(value.initial) : undefined;
      if (found) {
        const at = found.token.getPosition()[0] ?? line;
        problems.push({ line: at, problem: new TemplateError(field, `${found.problem} on line ${at}`) });
      }
    }
    if ((parts.branches ?? []).some((b) => Array.isArray(b.values) && b.values.length === 0)) {
      problems.push({ line, problem: new TemplateError(field, `a {% when %} of the {% case %} on line ${line} names no value to compare with`) });
    }
    // Only where a value is read (an output, a tag with a value or conditions): a comment may end in anything.
    const written = parts.value || parts.branches?.some((b) => b.value) ? (parts.token.args ?? parts.token.content) : undefined;
    if (typeof written === "string" && /\|\s*$/.test(written)) {
      problems.push({ line, problem: new TemplateError(field, `a "|" on line ${line} has no filter name after it`) });
    }
  }
  return problems;
};

/** Tags whose arguments are one value (filters included) that the engine reads up to where it stops, ignoring the rest. */
const VALUE_TAGS = new Set(["if", "elsif", "unless", "case", "echo", "assign"]);

/**
 * Text the engine stops reading before and ignores: `{% if a, b == "x" %}` is `{% if a %}`,
 * `{{ a, "x" }}` is `{{ a }}`, `{% when "x" "y" %}` compares with "x" alone. Each output and each
 * tag that reads a value is read again as the engine reads it, and what is left is a problem.
 */
const trailingTextProblems = (field: TemplateField, source: string, pieces: Token[], engine: Engine): { line: number; problem: TemplateError }[] => {
  const problems: { line: number; problem: TemplateError }[] = [];
  const left = (line: number, text: string, read: (t: Tokenizer) => void) => {
    const tokenizer = new Tokenizer(text, engine.options.operators, undefined, undefined, engine.options.groupedExpressions);
    try {
      read(tokenizer);
      tokenizer.skipBlank();
    } catch {
      return; // what the engine cannot read, its parser has reported
    }
    if (tokenizer.end()) return;
    const rest = clippedName(tokenizer.remaining().trim());
    problems.push({ line, problem: new TemplateError(field, `"${rest}" on line ${line} follows a complete value, and the engine would ignore it (to compare, join values with an operator)`) });
  };
  /** A tag's arguments read as the engine reads them, when the tag reads a value. */
  const tag = (line: number, name: string, args: string) => {
    if (VALUE_TAGS.has(name)) {
      left(line, args, (t) => {
        if (name === "assign") {
          t.readIdentifier();
          t.skipBlank();
          if (t.peek() === "=") t.advance();
        }
        t.readFilteredValue();
      });
    } else if (name === "when") {
      // Values joined by "," or "or", as the engine splits them.
      left(line, args, (t) => {
        for (;;) {
          t.skipBlank();
          if (t.end() || !t.readValue()) return;
          t.skipBlank();
          if (t.peek() === ",") t.advance();
          else if (/^or\b/.test(t.remaining())) t.advance(2);
          else return;
        }
      });
    }
  };
  // What a {% comment %} block holds is not read (the tokenizer already leaves {% raw %} alone); the
  // engine ends a comment at its first {% endcomment %}, whatever it holds.
  let inComment = false;
  for (const piece of pieces) {
    const name = piece instanceof TagToken ? piece.name : undefined;
    if (inComment) {
      if (name === "endcomment") inComment = false;
      continue;
    }
    if (name === "comment") {
      inComment = true;
      continue;
    }
    const line = lineAt(source, piece.begin);
    if (piece.kind === TokenKind.Output) left(line, (piece as unknown as { content: string }).content, (t) => t.readFilteredValue());
    else if (piece instanceof TagToken && piece.name === "liquid") {
      // Each line of a {% liquid %} tag is a tag of its own (a # line a comment); lines counted from
      // where its arguments start.
      const first = lineAt(source, Math.max(piece.begin, source.indexOf(piece.args, piece.begin)));
      let commented = false;
      piece.args.split(/\r\n?|\n/).forEach((text, i) => {
        const match = /^\s*(\w+)\s*([\s\S]*)$/.exec(text);
        if (!match?.[1] || match[2] === undefined) return;
        // A comment's lines, up to its endcomment line, are not read.
        if (commented) commented = match[1] !== "endcomment";
        else if (match[1] === "comment") commented = true;
        else tag(first + i, match[1], match[2]);
      });
    } else if (piece instanceof TagToken) tag(line, piece.name, piece.args);
  }
  return problems;
};

/** A checked template, with the names of the variables it reads from outside. */
type ParsedTemplate = { templates: Template[]; globals: ReadonlySet<string> };

/**
 * Parses `source` as the template of `field` and checks it statically: the parsed template, or every
 * problem found (a syntax error stops the parser, so it comes alone; unknown variables and loop
 * ranges are all reported, in the order they appear).
 */
export const checkTemplate = (field: TemplateField, source: string): ParsedTemplate | { problems: TemplateError[] } => {
  const engine = engineFor(field);
  const unclosed = unclosedOpeners(field, source);
  if (unclosed) return { problems: [unclosed] };
  // The tags and outputs as the engine reads them (quotes, raw blocks): counted, and their nesting
  // bounded, before the engine parses them. One it cannot read is the parser's to report.
  let pieces: Token[] = [];
  try {
    pieces = new Tokenizer(source, engine.options.operators, undefined, undefined, engine.options.groupedExpressions).readTopLevelTokens(engine.options);
  } catch (err) {
    if (!(err instanceof LiquidError)) throw err;
  }
  let count = 0;
  for (const piece of pieces) {
    if (piece.kind !== TokenKind.Tag && piece.kind !== TokenKind.Output) continue;
    const text = piece.getText();
    // Each line of a {% liquid %} tag is a tag of its own (and parsing them costs as much).
    count += piece instanceof TagToken && piece.name === "liquid" ? linesIn(text) : 1;
    if (count > MAX_LIQUID_PIECES) {
      return { problems: [new TemplateError(field, `the template holds more than ${MAX_LIQUID_PIECES} Liquid tags and outputs`)] };
    }
    if (indexNesting(text) > MAX_INDEX_NESTING) {
      return { problems: [new TemplateError(field, `${NESTS_TOO_DEEPLY} (more than ${MAX_INDEX_NESTING} "[" inside one another) on line ${lineAt(source, piece.begin)}`)] };
    }
  }
  let templates: Template[];
  try {
    templates = engine.parse(source);
  } catch (err) {
    if (!(err instanceof LiquidError)) throw err;
    return { problems: [new TemplateError(field, `${problemOf(err)}${at(lineOf(err))}`)] };
  }
  let analysis: ReturnType<typeof engine.analyzeSync>;
  try {
    analysis = engine.analyzeSync(templates);
  } catch (err) {
    // (The analysis walks what the parser built recursively, and may run out of stack where parsing did not.)
    if (!(err instanceof RangeError)) throw err;
    return { problems: [new TemplateError(field, problemOf(err))] };
  }
  const unknown: { line: number; problem: TemplateError }[] = [];
  for (const variables of Object.values(analysis.globals)) {
    for (const variable of variables) {
      if (isKnown(variable.segments, field) || isOffsetContinue(source, variable)) continue;
      const name = clippedName(String(variable));
      const hint = field === "subject" && name.startsWith("campaign.") ? " (the subject cannot use itself)" : "";
      const line = variable.location.row;
      // Liquid reads a number it does not know (`1e3`, `1_000`) as the name of a variable.
      const head = clippedName(String(variable.segments[0] ?? ""));
      const problem = /^[0-9.]/.test(head)
        ? `"${head}" is not a number Liquid reads${at(line)} (write numbers as digits with an optional point, without an exponent)`
        : `unknown variable "${name}"${at(line)}${hint}; known: ${knownIn(field)}`;
      unknown.push({ line, problem: new TemplateError(field, problem) });
    }
  }
  const used = Object.values(analysis.variables).flat();
  unknown.push(
    ...namesNotWrittenOut(field, source, used),
    ...loopObjectMisreads(field, used),
    ...expressionProblems(field, templates),
    ...trailingTextProblems(field, source, pieces, engine),
  );
  const problems = [...unknown.sort((a, b) => a.line - b.line).map((u) => u.problem), ...loopProblems(field, templates)];
  if (problems.length > MAX_PROBLEMS) {
    const more = problems.length - MAX_PROBLEMS;
    return { problems: [...problems.slice(0, MAX_PROBLEMS), new TemplateError(field, moreProblems(more, MAX_PROBLEMS, " of the same kinds"))] };
  }
  if (problems.length > 0) return { problems };
  return { templates, globals: new Set(Object.keys(analysis.globals)) };
};

type AnalyzedVariable = { segments: readonly unknown[]; location: { row: number; col: number } };

/** `offset:continue` in a `for` tag is Liquid's own word (go on where the last loop over it stopped), not a variable. */
const isOffsetContinue = (source: string, { segments, location }: AnalyzedVariable): boolean => {
  if (segments.length !== 1 || segments[0] !== "continue") return false;
  const offset = offsetOf(source, location.row, location.col);
  return /offset\s*:\s*$/.test(source.slice(Math.max(0, offset - 32), offset));
};

/**
 * `[k]` where `k` is a variable (`{% assign k = "subscriber" %}{{ [k].id }}`) names a variable by a
 * value known only when rendering, which no check can see: liquidjs's analysis reports it as `k`
 * itself. Such a name is refused; a quoted one (`["subscriber"]`) is written out and checked as any.
 */
const namesNotWrittenOut = (field: TemplateField, source: string, variables: readonly AnalyzedVariable[]) => {
  const found: { line: number; problem: TemplateError }[] = [];
  for (const { segments, location } of variables) {
    const offset = offsetOf(source, location.row, location.col);
    if (source[offset] !== "[" || /^\[\s*["']/.test(source.slice(offset, offset + 16))) continue;
    const name = clippedName(String(segments[0] ?? ""));
    found.push({
      line: location.row,
      problem: new TemplateError(
        field,
        `"[${name}]"${at(location.row)} names a variable by the value of "${name}"; write the variable's name out (known: ${knownIn(field)})`,
      ),
    });
  }
  return found;
};

/**
 * A loop's own object read past its properties (`forloop.constructor`, `forloop.next`) reaches the
 * engine's code, not a value: refused on save, even in a branch the sample would not take.
 */
const loopObjectMisreads = (field: TemplateField, variables: readonly AnalyzedVariable[]) =>
  variables.flatMap(({ segments: [root, property], location }) => {
    const known = typeof root === "string" && Object.hasOwn(LOOP_PROPERTIES, root) ? LOOP_PROPERTIES[root] : undefined;
    if (!known || property === undefined || (typeof property === "string" && known.includes(property))) return [];
    const name = clippedName(`${root}.${String(property)}`);
    return [{ line: location.row, problem: new TemplateError(field, `"${name}"${at(location.row)} is not a property of ${root} (it has ${known.join(", ")})`) }];
  });

/**
 * How many `{{` (or `{%`) may have no `}}` (`%}`) anywhere after them. A few are fine (in a raw block,
 * or in a string inside an output: liquidjs reads past them), but each costs a search through the
 * rest of the template for a closer that is not there, in every pass that finds the Liquid in it:
 * 100,000 cost seconds. Counted first, in one pass.
 */
const MAX_UNCLOSED = 20;

const unclosedOpeners = (field: TemplateField, source: string): TemplateError | undefined => {
  for (const [open, close] of [["{{", "}}"], ["{%", "%}"]] as const) {
    // An opener is closed by a closer that starts two characters after it, or later.
    const from = Math.max(0, source.lastIndexOf(close) - 1);
    let first = -1;
    let count = 0;
    for (let at = source.indexOf(open, from); at >= 0; at = source.indexOf(open, at + 1)) {
      if (first < 0) first = at;
      if (++count > MAX_UNCLOSED) {
        return new TemplateError(field, `more than ${MAX_UNCLOSED} "${open}" are never closed (no "${close}" after them), the first on line ${lineAt(source, first)}`);
      }
    }
  }
  return undefined;
};

/** Parses `source` as the template of `field`, checking it statically; throws the first problem (TemplateError). */
export const parseTemplate = (field: TemplateField, source: string): ParsedTemplate => {
  const checked = checkTemplate(field, source);
  if ("problems" in checked) throw checked.problems[0];
  return checked;
};

/** A render failure as the API reports it: the field, the line when known, the problem. */
export const renderProblem = (field: TemplateField, err: unknown): TemplateError =>
  new TemplateError(field, `${problemOf(err)}${at(err instanceof LiquidError ? lineOf(err) : undefined)}`);
