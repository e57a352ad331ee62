import { type Context, defaultOperators, type Emitter, type Liquid, type Template } from "liquidjs";

// The bound on what one render may do, beside liquidjs's own bound on what it may allocate: every
// list of nodes evaluated, every operator and every filter charges its work to the render, which
// stops past RENDER_WORK_LIMIT (engine.ts installs the counting in each engine).

export type FilterThis = { context: Context };

/**
 * Units of work one render of a part may do: every template node evaluated counts 1, plus 1 per 64
 * characters of its source (an output with many filters, a condition with many operands). Loops are
 * bounded in items by the allocation limit, but not in what each pass does: 1,000 × 199 passes of 50
 * cheap `if`s took 27 s of CPU. Tens of milliseconds of work at most, per part and message.
 */
const RENDER_WORK_LIMIT = 20_000;

export class TooMuchWork extends Error {
  constructor(readonly limit: number) {
    super(`takes more than ${limit} steps to render`);
  }
}

/**
 * The work a filter or an operator does on its operands: one unit per array item it may go through
 * (`has`, `sum`, `contains`, `==` between arrays walk them all, allocating nothing), one per 64
 * characters of a string, as for a template's own text. Counted with the nodes', so a
 * loop that scans a 100,000-item array in each pass stops as one that does much else: 1,000 such
 * `contains` took 24 s of CPU.
 */
const operandWork = (values: readonly unknown[]): number => {
  let units = 0;
  for (const value of values) {
    if (Array.isArray(value)) units += value.length;
    else if (typeof value === "string") units += value.length >> 6;
  }
  return units;
};

/**
 * Work done so far, by render: keyed by the context's allocation limiter, which every scope a render
 * spawns shares (a loop body, a capture) and a fresh render does not.
 */
const workDone = new WeakMap<object, number>();

/** Adds `units` to the work of the render `ctx` belongs to; past the limit, the render stops. */
const chargeWork = (ctx: Context, units: number) => {
  if (units === 0) return;
  const done = (workDone.get(ctx.memoryLimit) ?? 0) + units;
  if (done > RENDER_WORK_LIMIT) throw new TooMuchWork(RENDER_WORK_LIMIT);
  workDone.set(ctx.memoryLimit, done);
};

type OperatorImpl = (...args: unknown[]) => unknown;

/** Liquid's operators, each charging its operands' work first (the context is always the last argument). */
export const countedOperators = Object.fromEntries(
  Object.entries(defaultOperators as unknown as Record<string, OperatorImpl>).map(([name, operator]) => [
    name,
    function* (...args: unknown[]): Generator<unknown, unknown, unknown> {
      chargeWork(args.at(-1) as Context, operandWork(args.slice(0, -1)));
      return yield operator(...args);
    },
  ]),
) as unknown as typeof defaultOperators;

/** Every filter of `liquid`, charging its input's and arguments' work before it runs. */
const countingFilters = (liquid: Liquid) => {
  const counted = (handler: (this: FilterThis, ...args: unknown[]) => unknown) =>
    function (this: FilterThis, ...args: unknown[]) {
      chargeWork(this.context, operandWork(args));
      return handler.apply(this, args);
    };
  const registry = liquid.filters as unknown as Record<string, unknown>;
  for (const [name, impl] of Object.entries(registry)) {
    if (typeof impl === "function") registry[name] = counted(impl as never);
    else if (impl && typeof (impl as { handler?: unknown }).handler === "function") {
      registry[name] = { ...impl, handler: counted((impl as { handler: never }).handler) };
    }
  }
};

/** The work of evaluating a list of nodes once (see RENDER_WORK_LIMIT), computed once per list. */
const weights = new WeakMap<Template[], number>();
const weightOf = (templates: Template[]): number => {
  let weight = weights.get(templates);
  if (weight === undefined) {
    weight = 0;
    for (const template of templates) weight += 1 + ((template.token.end - template.token.begin) >> 6);
    // An empty list (a loop's empty body) still costs its pass: a loop over 100,000 items that does
    // nothing, 400 times over, took 18 s.
    weight = Math.max(weight, 1);
    weights.set(templates, weight);
  }
  return weight;
};

/**
 * Makes `liquid` (built with countedOperators, its filters registered) charge every render its work:
 * each filter call, and every list of nodes it evaluates (a part, each pass of a loop, a branch, a
 * capture), which all go through its renderer's `renderTemplates`: counting there bounds the work of
 * any template.
 */
export const countingWork = (liquid: Liquid): Liquid => {
  countingFilters(liquid);
  const { renderer } = liquid;
  const renderTemplates = renderer.renderTemplates;
  renderer.renderTemplates = function (this: typeof renderer, templates: Template[], ctx: Context, emitter?: Emitter) {
    chargeWork(ctx, weightOf(templates));
    return renderTemplates.call(this, templates, ctx, emitter);
  };
  return liquid;
};
