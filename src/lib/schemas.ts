import { z } from "@hono/zod-openapi";
import { article } from "../errors/zod-messages";
import { EMAIL_MAX_LENGTH, emailAddressProblem } from "./email";
import { idPrefixes, type IdKind } from "./ids";

/** A path id: validated against its prefix, so `sub_…` in a workspace slot is a 400, not a 404. */
export const idParam = (kind: IdKind, name: string) =>
  z
    .string()
    .regex(new RegExp(`^${idPrefixes[kind]}[0-9A-Za-z]{1,64}$`), {
      error: `must be ${article(kind)} ${kind} id: ${idPrefixes[kind]} followed by 1 to 64 letters and digits`,
    })
    .openapi({ param: { name, in: "path" }, example: `${idPrefixes[kind]}01JD6Q3Z6W9X8B4N2M5K7P1R3T` });

export const WorkspaceParams = z.object({ workspace_id: idParam("workspace", "workspace_id") });

// ---- Body text -------------------------------------------------------------------------------

// C0 controls other than tab, line feed and carriage return, and DEL: invisible in every interface,
// and a NUL truncates the text in whatever C code reads it downstream.
const CONTROL_CHARACTER = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/;

/**
 * Every string of every request body is built from this, so no field stores text that is not
 * well-formed Unicode (a lone surrogate would come back as U+FFFD) or that holds control characters.
 * Both checks run on the text as sent, before trimming, and abort: the length or format rules that
 * follow would say nothing useful about such text.
 */
export const bodyString = () =>
  z
    .string()
    .refine((value) => value.isWellFormed(), { error: "must be well-formed Unicode text", abort: true })
    .refine((value) => !CONTROL_CHARACTER.test(value), { error: "must not contain control characters", abort: true });

/** Required text: trimmed, then 1 to `max` characters. */
export const requiredText = (max: number) => bodyString().trim().min(1).max(max);

const blankToNull = (value: string) => (value === "" ? null : value);

/**
 * Optional free text: trimmed, at most `max` characters. `null`, or text that is empty after
 * trimming, means "no value" and is stored and returned as `null` (as Stripe reads `""`).
 */
export const optionalText = (max: number) => bodyString().trim().max(max).transform(blankToNull).nullable().optional();

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
    .max(EMAIL_MAX_LENGTH, { abort: true })
    .check(validEmail)
    .openapi({ format: "email", description: `${what} ${emailRules}`, example: "ada@example.com" });

/** Optional email address: `null` or blank means none. */
export const optionalEmailAddress = (what: string) =>
  bodyString()
    .trim()
    .max(EMAIL_MAX_LENGTH, { abort: true })
    .check(validEmail)
    .transform(blankToNull)
    .nullable()
    .optional()
    .openapi({ format: "email", description: `${what} ${emailRules} \`null\` or blank: none.` });

// ---- Tags ------------------------------------------------------------------------------------

export const TAG_MAX_LENGTH = 40;
export const TAGS_MAX = 50;
/** Bounds the work a body can ask for before duplicates are dropped. */
const TAG_ENTRIES_MAX = 200;

/**
 * A tag list: each tag trimmed, 1 to 40 characters; duplicates dropped, order kept. The limit of
 * 50 counts distinct tags, so a list that repeats itself is not rejected for its repeats.
 */
export const tagList = (options: { minItems: 0 | 1; description: string }) =>
  z
    .array(requiredText(TAG_MAX_LENGTH))
    .min(options.minItems)
    .max(TAG_ENTRIES_MAX)
    .transform((list, ctx) => {
      const distinct = [...new Set(list)];
      if (distinct.length > TAGS_MAX) {
        ctx.issues.push({ code: "custom", message: `must have at most ${TAGS_MAX} distinct tags`, input: list });
      }
      return distinct;
    })
    .openapi({
      description: `${options.description} Each tag is trimmed and 1 to ${TAG_MAX_LENGTH} characters; duplicates are dropped and the order kept. At most ${TAGS_MAX} distinct tags, in a list of at most ${TAG_ENTRIES_MAX} entries.`,
      example: ["weekly", "beta"],
    });

// ---- Query -----------------------------------------------------------------------------------

/** A repeated query parameter reaches the validator as an array: name the mistake. */
const givenOnce = (issue: z.core.$ZodRawIssue) => (Array.isArray(issue.input) ? "must be given once" : undefined);

export const queryString = () => z.string({ error: givenOnce });

export const queryEnum = <const T extends readonly [string, ...string[]]>(values: T) => z.enum(values, { error: givenOnce });

// A plain decimal integer: no sign, exponent, hex, spaces or leading zeros, which Number() would all accept.
export const limitQuery = queryString()
  .regex(/^(?:[1-9][0-9]?|100)$/, { error: "must be an integer from 1 to 100" })
  .transform(Number)
  .default(20)
  // Clients send and read a number; the pattern above is how the text form of one is checked.
  .openapi({
    type: "integer",
    pattern: undefined,
    minimum: 1,
    maximum: 100,
    default: 20,
    description: "Maximum number of objects to return: an integer from 1 to 100 (plain decimal digits).",
    example: 20,
  });

export const afterQuery = queryString()
  .min(1)
  .max(512)
  .optional()
  .openapi({ description: "Opaque cursor: the previous page's `pagination.next_cursor`." });

// ---- Responses -------------------------------------------------------------------------------

export const PaginationSchema = z
  .object({
    has_more: z.boolean(),
    next_cursor: z.string().nullable(),
  })
  .openapi("Pagination");

export const isoDateTime = z.string().openapi({ format: "date-time", example: "2026-11-21T12:00:00.000Z" });

export const dataEnvelope = <T extends z.ZodType>(schema: T) => z.object({ data: schema });

export const pageEnvelope = <T extends z.ZodType>(schema: T) =>
  z.object({ data: z.array(schema), pagination: PaginationSchema });
