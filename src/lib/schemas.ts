import { z } from "@hono/zod-openapi";
import { article } from "../errors/zod-messages";
import { EMAIL_MAX_LENGTH, emailAddressProblem, emailKey } from "./email";
import { idPrefixes, prefixPattern, type IdKind } from "./ids";
import { emailPattern, optionalEmailPattern, optionalLinePattern, optionalTextPattern, rawTextPattern, requiredLinePattern, requiredTextPattern } from "./text-patterns";

const idRule = (kind: IdKind) => `must be ${article(kind)} ${kind} id, which starts with ${idPrefixes[kind]}`;

/** A path id: validated against its prefix, so `sub_…` in a workspace slot is a 400; any other id not found is a 404. */
export const idParam = (kind: IdKind, name: string) =>
  z
    .string()
    .regex(prefixPattern(kind), { error: idRule(kind) })
    .openapi({ param: { name, in: "path" }, example: `${idPrefixes[kind]}01JD6Q3Z6W9X8B4N2M5K7P1R3T` });

export const WorkspaceParams = z.object({ workspace_id: idParam("workspace", "workspace_id") });

// ---- Body text -------------------------------------------------------------------------------

// C0 controls other than tab, line feed and carriage return, DEL and the C1 controls (NEL, CSI…):
// invisible in every interface, a line break or a terminal escape to some readers, and a NUL
// truncates the text in whatever C code reads it downstream.
const CONTROL_CHARACTER = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]/;

/**
 * Every string of every request body is built from this, so no field stores text that is not
 * well-formed Unicode (a lone surrogate would come back as U+FFFD) or that holds control characters.
 * Both checks run on the text as sent, before trimming, and abort: the length or format rules that
 * follow would say nothing useful about such text.
 */
export const bodyString = () => characterRules(z.string());

const characterRules = (text: z.ZodString) =>
  text
    .refine((value) => value.isWellFormed(), { error: "must be well-formed Unicode text", abort: true })
    .refine((value) => !CONTROL_CHARACTER.test(value), { error: "must not contain control characters", abort: true });

/**
 * At most `max` characters, counted as JSON Schema's maxLength counts them (code points), so an
 * emoji is one character, not two UTF-16 units.
 */
const atMostCharacters =
  (max: number) =>
  (ctx: z.core.ParsePayload<string>): void => {
    if (ctx.value.length <= max) return;
    let count = 0;
    for (const _ of ctx.value) count++;
    if (count > max) {
      ctx.issues.push({ code: "too_big", origin: "string", maximum: max, inclusive: true, input: ctx.value });
    }
  };

type TextCheck = (ctx: z.core.ParsePayload<string>) => void;

/** Required text: trimmed, then 1 to `max` characters (and whatever `more` checks). */
export const requiredText = (max: number, ...more: TextCheck[]) =>
  bodyString()
    .trim()
    .min(1)
    .check(atMostCharacters(max), ...more)
    .openapi({ pattern: requiredTextPattern(max), description: `1 to ${max} characters after trimming.` });

/** Untrimmed text of 1 to `max` characters (the rules every body string follows). */
export const rawText = (max: number) =>
  bodyString().min(1).check(atMostCharacters(max)).openapi({ pattern: rawTextPattern(1, max) });

const blankToNull = (value: string) => (value === "" ? null : value);

/**
 * Optional free text: trimmed, at most `max` characters. `null`, or text that is empty after
 * trimming, means "no value" and is stored and returned as `null` (as Stripe reads `""`).
 */
export const optionalText = (max: number) =>
  bodyString()
    .trim()
    .check(atMostCharacters(max))
    .openapi({ pattern: optionalTextPattern(max) })
    .transform(blankToNull)
    .nullable()
    .optional();

const LINE_BREAK = /[\r\n\u2028\u2029]/;

/** Required text that ends up in a mail header (a newsletter's name, its subject when none renders): one line. */
export const requiredLine = (max: number) =>
  bodyString()
    .trim()
    .min(1)
    .check(atMostCharacters(max))
    .refine((value) => !LINE_BREAK.test(value), { error: "must be a single line" })
    .openapi({ pattern: requiredLinePattern(max), description: `One line of 1 to ${max} characters after trimming.` });

/** Optional text that ends up in a mail header (a display name): as optionalText, on one line. */
export const optionalLine = (max: number) =>
  bodyString()
    .trim()
    .check(atMostCharacters(max))
    .refine((value) => !LINE_BREAK.test(value), { error: "must be a single line" })
    .openapi({ pattern: optionalLinePattern(max) })
    .transform(blankToNull)
    .nullable()
    .optional();

const emailRules = `An RFC 5322 addr-spec of at most ${EMAIL_MAX_LENGTH} characters (64 before the @), trimmed; ASCII only; the domain a hostname or an address literal such as [192.168.0.1].`;

const validEmail = (ctx: z.core.ParsePayload<string>) => {
  // Blank is the optional variant's "no value"; the required one has already rejected it.
  if (ctx.value === "") return;
  const problem = emailAddressProblem(ctx.value);
  if (problem) ctx.issues.push({ code: "custom", message: problem, input: ctx.value, continue: false });
};

/** Required email address (src/lib/email.ts says which addresses and why). */
export const emailAddress = (what: string) =>
  bodyString()
    .trim()
    .min(1, { abort: true })
    .check(validEmail)
    .openapi({ pattern: emailPattern, description: `${what} ${emailRules}`, example: "ada@example.com" });

/** Optional email address: `null` or blank means none. */
export const optionalEmailAddress = (what: string) =>
  bodyString()
    .trim()
    .check(validEmail)
    .openapi({ pattern: optionalEmailPattern })
    .transform(blankToNull)
    .nullable()
    .optional()
    .openapi({ description: `${what} ${emailRules} \`null\` or blank: none.` });

/**
 * A list's check that no address is in it twice, as the service compares addresses (case-insensitively):
 * each later copy is an issue at `at(i)`, naming the first by `named(first)`.
 */
export const noAddressTwice =
  <T>(emailOf: (item: T) => string, at: (i: number) => (string | number)[], named: (first: number) => string) =>
  (items: T[], ctx: z.RefinementCtx) => {
    const first = new Map<string, number>();
    items.forEach((item, i) => {
      const key = emailKey(emailOf(item));
      const seen = first.get(key);
      if (seen === undefined) first.set(key, i);
      else ctx.addIssue({ code: "custom", path: at(i), message: `is the same address as ${named(seen)} (case-insensitively)` });
    });
  };

// ---- Tags ------------------------------------------------------------------------------------

export const TAG_MAX_LENGTH = 40;
/** The most tags a subscriber has (a request's list, and the list a tag edit leaves). */
export const TAGS_MAX = 50;

/**
 * A tag list: each tag trimmed, 1 to 40 characters; duplicates dropped, order kept. At most 50
 * entries, repeats included: a limit on distinct tags is not something a schema can state.
 */
/**
 * A tag is kept in Unicode NFC, and a few characters grow when composed (U+FB2A, a Hebrew letter with
 * its dot, is two in NFC): held to the limit as kept too, a tag read back can always be written back,
 * filtered on and put in a segment.
 */
const atMostWhenKept = (max: number): TextCheck => (ctx) => {
  let count = 0;
  for (const _ of ctx.value.normalize("NFC")) count++;
  if (count > max) ctx.issues.push({ code: "custom", message: `must be at most ${max} characters in Unicode NFC, as tags are kept (it has ${count})`, input: ctx.value });
};

export const tagList = (options: { minItems: 0 | 1; description: string }) =>
  z
    .array(requiredText(TAG_MAX_LENGTH, atMostWhenKept(TAG_MAX_LENGTH)))
    .min(options.minItems)
    .max(TAGS_MAX)
    // Unicode NFC, so a tag typed precomposed (é) and one typed decomposed (e + ◌́) are one tag.
    .transform((list) => [...new Set(list.map((tag) => tag.normalize("NFC")))])
    .openapi({
      description: `${options.description} At most ${TAGS_MAX}; each tag is trimmed, 1 to ${TAG_MAX_LENGTH} characters as sent and as kept (in Unicode NFC); duplicates are dropped and the order kept.`,
      example: ["weekly", "beta"],
    });

// ---- Query -----------------------------------------------------------------------------------

/** A repeated query parameter reaches the validator as an array: name the mistake. */
const givenOnce = (issue: z.core.$ZodRawIssue) => (Array.isArray(issue.input) ? "must be given once" : undefined);

const queryString = () => z.string({ error: givenOnce });

/** An id as a query filter (`?workspace_id=ws_…`): the same rule as in a path, given once. */
export const idQuery = (kind: IdKind, description: string) =>
  queryString()
    .regex(prefixPattern(kind), { error: idRule(kind) })
    .optional()
    .openapi({ description, example: `${idPrefixes[kind]}01JD6Q3Z6W9X8B4N2M5K7P1R3T` });

export const queryEnum = <const T extends readonly [string, ...string[]]>(values: T) => z.enum(values, { error: givenOnce });

/** Trimmed query text of 1 to `max` characters, under the same character rules as body text. */
export const queryText = (max: number) =>
  characterRules(z.string({ error: givenOnce }))
    .trim()
    .min(1)
    .check(atMostCharacters(max))
    .openapi({ pattern: requiredTextPattern(max) });

// Decimal digits only: an integer's text, as the document's `type: integer` reads it (so `01` is 1).
// No sign, exponent, fraction, hex or spaces, which Number() would all accept.
export const limitQuery = queryString()
  .regex(/^0*(?:[1-9][0-9]?|100)$/, { error: "must be an integer from 1 to 100" })
  .transform(Number)
  .default(20)
  // Clients send and read a number; the pattern above is how the text form of one is checked.
  .openapi({
    type: "integer",
    pattern: undefined,
    minimum: 1,
    maximum: 100,
    default: 20,
    description: "Maximum number of objects to return: an integer from 1 to 100, in decimal digits (no sign, exponent or fraction).",
    example: 20,
  });

/** Any text: whatever a cursor is not (empty, too long, altered) is a 400 `invalid_cursor`, never a page. */
export const afterQuery = queryString()
  .optional()
  .openapi({ description: "Opaque cursor: the previous page's `pagination.next_cursor`. Anything else is a 400 `invalid_cursor`." });

// ---- Responses -------------------------------------------------------------------------------

/** `next_cursor` is a string exactly when `has_more` is true, so a typed client narrows on `has_more`. */
const PaginationSchema = z
  .union([
    z.object({ has_more: z.literal(true), next_cursor: z.string().openapi({ description: "Pass as `after` for the next page." }) }),
    z.object({ has_more: z.literal(false), next_cursor: z.null() }),
  ])
  .openapi("Pagination");

/**
 * What came of one message sent at once (a test send's, a confirmation's), split by `status` as
 * Pagination is, so a typed client reads `error` after `failed` without a null check. A sent message's
 * id is null when the provider took it in an earlier request that did not answer.
 */
export const oneOffResultSchema = <T extends z.ZodRawShape>(shape: T) =>
  z.union([
    z.object({ ...shape, status: z.literal("sent"), provider_message_id: z.string().nullable(), error: z.null() }),
    z.object({ ...shape, status: z.literal("failed"), provider_message_id: z.null(), error: z.object({ code: z.string(), message: z.string() }) }),
  ]);

export const isoDateTime = z.string().openapi({ format: "date-time", example: "2026-11-21T12:00:00.000Z" });

/**
 * An update's body names something to change: refused otherwise in the one wording every update
 * route answers `{}` with, listing the body's own fields.
 */
export const somethingToChange = <T extends z.ZodObject>(body: T) =>
  body.refine((value) => Object.values(value).some((v) => v !== undefined), {
    error: `Request body must contain at least one of: ${Object.keys(body.shape).join(", ")}`,
  });

/** The body of an action that takes no parameters: none, or `{}`. */
export const noBody = {
  required: false,
  content: { "application/json": { schema: z.strictObject({}).openapi("EmptyRequest", { description: "No parameters." }) } },
};

export const dataEnvelope = <T extends z.ZodType>(schema: T) => z.object({ data: schema });

/** A route's response of one object in the `{data}` envelope. */
export const dataResponse = <T extends z.ZodType>(description: string, schema: T) => ({
  description,
  content: { "application/json": { schema: dataEnvelope(schema) } },
});

export const pageEnvelope = <T extends z.ZodType>(schema: T) =>
  z.object({ data: z.array(schema), pagination: PaginationSchema });
