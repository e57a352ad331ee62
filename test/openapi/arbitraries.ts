import { Validator } from "@cfworker/json-schema";
import fc from "fast-check";
import { emailPattern, optionalEmailPattern } from "../../src/lib/text-patterns";

/** The subset of JSON Schema the generated document uses for requests. */
export type Schema = {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean;
  minProperties?: number;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  not?: Schema;
  items?: Schema;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  minimum?: number;
  maximum?: number;
  [annotation: string]: unknown;
};

export type Document = { components: { schemas: Record<string, Schema> } };

/**
 * The schema with every `$ref` inlined and `format` dropped: in JSON Schema 2020-12 (OpenAPI 3.1's
 * dialect) `format` is an annotation, and what the document asserts is in the other keywords. An
 * OpenAPI `discriminator` is a hint to code generators over a `oneOf` that validates on its own.
 */
export const resolve = (doc: Document, schema: Schema): Schema => {
  if (schema.$ref) return resolve(doc, doc.components.schemas[schema.$ref.split("/").pop() as string] as Schema);
  const { format: _format, discriminator: _discriminator, ...rest } = schema as Schema & { discriminator?: unknown };
  const out: Schema = { ...rest, ...(schema.format && { "x-format": schema.format }) };
  if (schema.properties) {
    out.properties = Object.fromEntries(Object.entries(schema.properties).map(([k, v]) => [k, resolve(doc, v)]));
  }
  if (schema.items) out.items = resolve(doc, schema.items);
  if (schema.anyOf) out.anyOf = schema.anyOf.map((s) => resolve(doc, s));
  if (schema.oneOf) out.oneOf = schema.oneOf.map((s) => resolve(doc, s));
  if (schema.allOf) out.allOf = schema.allOf.map((s) => resolve(doc, s));
  if (schema.not) out.not = resolve(doc, schema.not);
  return out;
};

/** Whether the document's schema accepts a value (a validator that runs in workerd: no `new Function`). */
export const accepts = (schema: Schema) => {
  const validator = new Validator(schema as object, "2020-12", false);
  return (value: unknown) => validator.validate(value).valid && withinByteLimits(schema, value);
};

const utf8 = new TextEncoder();

/**
 * The document's `x-max-bytes` (a size in UTF-8 bytes, which no JSON Schema keyword can state; each
 * such field also says it in its description), held like any other rule.
 */
const withinByteLimits = (schema: Schema, value: unknown): boolean => {
  if (typeof value === "string" && typeof schema["x-max-bytes"] === "number") {
    return utf8.encode(value).byteLength <= schema["x-max-bytes"];
  }
  if (schema.anyOf) return schema.anyOf.some((option) => accepts(option)(value));
  if (schema.properties && value !== null && typeof value === "object" && !Array.isArray(value)) {
    return Object.entries(value).every(([key, item]) => {
      const property = schema.properties?.[key];
      return property === undefined || withinByteLimits(property, item);
    });
  }
  return true;
};

// ---- Values the schema allows (mostly) ----------------------------------------------------------

const validEmails = [
  "ada@example.com",
  "a@localhost",
  "first.last+tag@sub.example.org",
  '"john doe"@example.com',
  "x@[192.168.0.1]",
  "x@[IPv6:2001:db8::1]",
  `${"l".repeat(64)}@example.com`,
  `a@${"d".repeat(63)}.${"e".repeat(63)}.${"f".repeat(63)}.${"g".repeat(57)}`,
];

const emailArbitrary = fc.oneof(
  fc.constantFrom(...validEmails),
  fc
    .tuple(fc.stringMatching(/^[a-z0-9!#$%&'*+\/=?^_`{|}~-]{1,20}$/), fc.stringMatching(/^[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?$/))
    .map(([local, domain]) => `${local}@${domain}.example`),
);

/** Trimmed values arrive with surrounding whitespace too. */
const padded = (inner: fc.Arbitrary<string>) =>
  fc.tuple(fc.constantFrom("", " ", "\t", "\u00A0", "\u3000 "), inner, fc.constantFrom("", " ", "\n", "\u2028")).map((p) => p.join(""));

const futureDateTime = fc
  .tuple(fc.integer({ min: 1, max: 5 * 365 * 24 * 3600 }), fc.constantFrom("Z", "+02:00", "-05:30"))
  .map(([seconds, zone]) => {
    const iso = new Date(Date.now() + 86_400_000 + seconds * 1000).toISOString();
    if (zone === "Z") return iso;
    const [hours, minutes] = zone.slice(1).split(":").map(Number) as [number, number];
    const shift = (zone.startsWith("+") ? 1 : -1) * (hours * 60 + minutes) * 60_000;
    return new Date(Date.parse(iso) + shift).toISOString().replace("Z", zone);
  });

/** The most characters a text schema allows, read from maxLength or from its pattern's bound. */
const maxCharacters = (schema: Schema) => {
  if (schema.maxLength !== undefined) return schema.maxLength;
  const trimmed = schema.pattern?.match(/\{0,(\d+)\}/);
  if (trimmed) return Number(trimmed[1]) + 2;
  const raw = schema.pattern?.match(/\{1,(\d+)\}\$$/);
  return raw ? Number(raw[1]) : undefined;
};

const stringArbitrary = (schema: Schema): fc.Arbitrary<string> => {
  // An email field is known by its pattern (the document gives it no `format`: see the README).
  if (schema.pattern === emailPattern || schema.pattern === optionalEmailPattern) return padded(emailArbitrary);
  if (schema["x-format"] === "date-time") return futureDateTime;
  const max = maxCharacters(schema);
  const maxBytes = schema["x-max-bytes"];
  // Lengths at the limit and just past it, in ASCII and in astral characters (one character, two UTF-16
  // units, four UTF-8 bytes); in bytes where the limit is in bytes.
  const boundaries =
    typeof maxBytes === "number"
      ? ["a".repeat(maxBytes), "😀".repeat(maxBytes / 4), "a".repeat(maxBytes + 1), `${"😀".repeat(maxBytes / 4)}a`]
      : max === undefined ? [] : ["a".repeat(max), ` ${"é".repeat(max)} `, "😀".repeat(max), "a".repeat(max + 1), "😀".repeat(max + 1)];
  const drawn = schema.pattern
    ? fc.stringMatching(new RegExp(schema.pattern))
    : fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 40, 40), unit: "binary" });
  return boundaries.length ? fc.oneof({ arbitrary: drawn, weight: 4 }, { arbitrary: fc.constantFrom(...boundaries), weight: 1 }) : drawn;
};

export const valueArbitrary = (schema: Schema): fc.Arbitrary<unknown> => {
  if (schema.enum) return fc.constantFrom(...schema.enum);
  // A choice of whole shapes (the segment filter, a nullable reference): one of them.
  const choices = schema.type === undefined ? (schema.anyOf ?? schema.oneOf) : undefined;
  if (choices) return fc.oneof(...choices.map(valueArbitrary));
  const types = Array.isArray(schema.type) ? schema.type : [schema.type ?? "object"];
  const options = types.map((type) => ({ arbitrary: typedArbitrary(schema, type), weight: type === "null" ? 1 : 4 }));
  return options.length === 1 ? (options[0] as { arbitrary: fc.Arbitrary<unknown> }).arbitrary : fc.oneof(...options);
};

/**
 * Keys a schema forbids together (`not: {anyOf: [{required: [a, b]}, …]}`): a drawn object keeps
 * all but the last of each such set, so it is one the schema allows (near misses break it again).
 */
const withoutForbiddenSets = (schema: Schema) => (value: Record<string, unknown>) => {
  const sets = (schema.not?.anyOf ?? (schema.not ? [schema.not] : [])).map((option) => option.required ?? []).filter((keys) => keys.length > 1);
  const out = { ...value };
  for (const keys of sets) if (keys.every((key) => key in out)) delete out[keys[keys.length - 1] as string];
  return out;
};

const typedArbitrary = (schema: Schema, type: string): fc.Arbitrary<unknown> => {
  switch (type) {
    case "null":
      return fc.constant(null);
    case "string":
      return stringArbitrary(schema);
    case "integer":
      return fc.integer({ min: schema.minimum ?? -1000, max: schema.maximum ?? 1000 });
    case "boolean":
      return fc.boolean();
    case "array":
      return fc.array(valueArbitrary(schema.items ?? {}), { minLength: schema.minItems ?? 0, maxLength: Math.min(schema.maxItems ?? 5, 60) });
    default: {
      const properties = schema.properties ?? {};
      const record = fc.record(
        Object.fromEntries(Object.entries(properties).map(([key, value]) => [key, valueArbitrary(value)])),
        { requiredKeys: schema.required ?? [] },
      );
      // Sometimes every property, so limits on each are reached together.
      const every = fc.record(Object.fromEntries(Object.entries(properties).map(([key, value]) => [key, valueArbitrary(value)])));
      return fc.oneof(record, every).map(withoutForbiddenSets(schema));
    }
  }
};

// ---- Near misses --------------------------------------------------------------------------------

/** Values the fuzzer found or that sit just past a rule: blank, control characters, lone surrogates, wrong types. */
export const nearMissValues: unknown[] = [
  "",
  " ",
  "   \t\n",
  "\u00A0\u3000",
  "a\u0000b",
  "tab\u0007bell",
  "\u007F",
  "\u000B",
  "\ud800",
  "x\udc00y",
  "x".repeat(300),
  null,
  0,
  -1,
  1.5,
  1e21,
  true,
  [],
  {},
  [null],
  { tags_all: null },
  "not-an-email",
  "a@-example.com",
  // One past a limit the document states as a pattern: a 65-character local part, a 64-character label.
  `${"l".repeat(65)}@example.com`,
  `a@${"d".repeat(64)}.example`,
  // A line break inside otherwise valid text (one-line fields refuse it; multi-line ones take it).
  "first line\nsecond line",
  "first line\u2028second line",
  "2020-01-01",
];

type Path = (string | number)[];

const pathsOf = (value: unknown, path: Path = []): Path[] => {
  if (Array.isArray(value)) return [path, ...value.flatMap((item, i) => pathsOf(item, [...path, i]))];
  if (value && typeof value === "object") return [path, ...Object.entries(value).flatMap(([k, v]) => pathsOf(v, [...path, k]))];
  return [path];
};

const objectPathsOf = (value: unknown): Path[] =>
  pathsOf(value).filter((path) => {
    const node = path.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], value);
    return node !== null && typeof node === "object" && !Array.isArray(node);
  });

const withAt = (value: unknown, path: Path, replace: (node: unknown, parent: unknown, key: string | number) => void): unknown => {
  const copy = structuredClone(value);
  if (path.length === 0) return copy;
  const parent = path.slice(0, -1).reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], copy);
  const key = path[path.length - 1] as string | number;
  replace((parent as Record<string | number, unknown>)[key], parent, key);
  return copy;
};

/**
 * Every string near miss at every place a string stands in `value`, one at a time: the drawn bodies
 * meet each near miss somewhere, this meets each one everywhere (a rule of one field, such as a
 * one-line name, is then never missed by chance).
 */
export const everyStringNearMiss = (value: unknown): unknown[] => {
  const strings = pathsOf(value).filter((path) => path.length > 0 && typeof path.reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], value) === "string");
  return strings.flatMap((path) =>
    nearMissValues
      .filter((bad) => typeof bad === "string")
      .map((bad) =>
        withAt(value, path, (_node, parent, key) => {
          (parent as Record<string | number, unknown>)[key] = bad;
        }),
      ),
  );
};

/** One change to a drawn body: a value replaced by a near miss, a property removed, or an unknown one added. */
export const mutated = (value: unknown): fc.Arbitrary<unknown> => {
  const paths = pathsOf(value).filter((p) => p.length > 0);
  const objects = objectPathsOf(value);
  const replace =
    paths.length === 0
      ? fc.constantFrom(...nearMissValues)
      : fc.tuple(fc.constantFrom(...paths), fc.constantFrom(...nearMissValues)).map(([path, bad]) =>
          withAt(value, path, (_node, parent, key) => {
            (parent as Record<string | number, unknown>)[key] = bad;
          }),
        );
  const remove = fc.constantFrom(...(paths.length ? paths : [[]])).map((path) =>
    withAt(value, path, (_node, parent, key) => {
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else delete (parent as Record<string, unknown>)[key as string];
    }),
  );
  const extra = fc.constantFrom(...(objects.length ? objects : [[]])).map((path) => {
    const copy = structuredClone(value) as Record<string, unknown>;
    const node = path.reduce<Record<string, unknown>>((v, k) => v[k] as Record<string, unknown>, copy);
    if (node && typeof node === "object") node.unexpected = "x";
    return copy;
  });
  return fc.oneof({ arbitrary: replace, weight: 4 }, remove, extra);
};
