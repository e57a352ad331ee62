import { z } from "@hono/zod-openapi";
import type { ErrorDetail } from "./api-error";

// Messages read as the end of a sentence whose subject is the parameter: "limit must be at most 100".
const sizeNoun: Record<string, [string, string]> = { string: ["character", "characters"], array: ["item", "items"], set: ["item", "items"] };

/** "40 characters", "1 item"; a bare number for numbers and dates. */
const amount = (origin: string, count: number | bigint) => {
  const noun = sizeNoun[origin];
  return noun ? `${count} ${noun[Number(count) === 1 ? 0 : 1]}` : String(count);
};

/** "a campaign", "an operation". */
export const article = (word: string) => (/^[aeiou]/.test(word) ? "an" : "a");

const describe = (issue: z.core.$ZodRawIssue): string | undefined => {
  switch (issue.code) {
    case "invalid_type":
      if (issue.input === undefined) return "is required";
      if (issue.expected === "int") return "must be an integer";
      return `must be ${article(issue.expected)} ${issue.expected}`;
    case "too_big":
      return issue.origin === "array" || issue.origin === "set"
        ? `must have at most ${amount(issue.origin, issue.maximum)}`
        : `must be at most ${amount(issue.origin, issue.maximum)}`;
    case "too_small":
      if (issue.origin === "string" && issue.minimum === 1) return "must not be empty";
      return issue.origin === "array" || issue.origin === "set"
        ? `must have at least ${amount(issue.origin, issue.minimum)}`
        : `must be at least ${amount(issue.origin, issue.minimum)}`;
    case "invalid_value":
      // A missing enum is reported by zod 4 as a value not among the options: say it is required.
      if (issue.input === undefined) return `is required (one of: ${issue.values.map(String).join(", ")})`;
      return `must be one of: ${issue.values.map(String).join(", ")}`;
    case "invalid_format":
      if (issue.format === "email") return "must be a valid email address";
      if (issue.format === "datetime") {
        // Right shape, impossible date (2027-02-29, 2027-04-31): say so, not that the zone is missing.
        const shaped = typeof issue.input === "string" && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(issue.input);
        return shaped
          ? "must be a real calendar date and time (an ISO 8601 date-time with a time zone, upper-case T and Z)"
          : "must be an ISO 8601 date-time with seconds and a time zone (upper-case T and Z)";
      }
      return `must be a valid ${issue.format}`;
    case "not_multiple_of":
      return `must be a multiple of ${issue.divisor}`;
    default:
      return undefined;
  }
};

z.config({ customError: describe });

/** Renders a path the way clients write it: `tags[2]`, `filter.tags_any[0]`. */
const paramOf = (path: readonly PropertyKey[], prefix?: string): string | undefined => {
  let out = prefix ?? "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out || undefined;
};

/** Problems one answer lists at most; one more entry counts the rest (a body of 580,000 unknown keys answered 37 MB). */
const MAX_DETAILS = 50;
/** A parameter's name, as an answer quotes it, at most (in characters; a longer one ends in "…"). */
const MAX_PARAM_SHOWN = 200;

/** Text an error message quotes, cut to `most` characters (the last an ellipsis) when longer. */
/** The line that stands for the problems past the first `listed`: "and 3 more problems (the first 20 are listed)". */
export const moreProblems = (more: number, listed: number, kinds = ""): string =>
  `and ${more} more problem${more === 1 ? "" : "s"}${kinds} (the first ${listed} are listed)`;

/** `text` in at most `most` characters (then "…"), cut between characters, never inside a surrogate pair. */
export const clipped = (text: string, most: number): string => {
  if (text.length <= most) return text;
  // A lone half of a pair is not well-formed text: strict JSON parsers refuse it.
  const end = /[\ud800-\udbff]/.test(text[most - 2] ?? "") ? most - 2 : most - 1;
  return `${text.slice(0, end)}…`;
};

const shown = (param: string | undefined) => param && clipped(param, MAX_PARAM_SHOWN);

export const zodIssuesToDetails = (error: z.core.$ZodError, rename?: (param: string) => string): ErrorDetail[] => {
  const details: ErrorDetail[] = [];
  let more = 0;
  const add = (detail: () => ErrorDetail) => {
    if (details.length < MAX_DETAILS) details.push(detail());
    else more++;
  };
  // A value of the wrong type is told that alone: zod still runs the checks that also apply to other
  // types (an array's `max` measures a string's length too), which would say nothing useful.
  const mistyped = new Set(error.issues.filter((issue) => issue.code === "invalid_type").map((issue) => paramOf(issue.path)));
  for (const issue of error.issues) {
    if (issue.code !== "invalid_type" && mistyped.has(paramOf(issue.path))) continue;
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        add(() => {
          const param = shown(paramOf([...issue.path, key]));
          return { param, message: `${param} is not a recognized parameter` };
        });
      }
      continue;
    }
    add(() => {
      const raw = paramOf(issue.path);
      const param = shown(raw && rename ? rename(raw) : raw);
      return { param, message: param ? `${param} ${issue.message}` : issue.message };
    });
  }
  if (more > 0) details.push({ message: moreProblems(more, MAX_DETAILS) });
  return details;
};
