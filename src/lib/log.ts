type Level = "error" | "warn" | "info";

// Workers Logs takes a line's level from the console method that printed it.
const writers: Record<Level, (line: string) => void> = {
  error: (line) => console.error(line),
  warn: (line) => console.warn(line),
  info: (line) => console.log(line),
};

/** What a log line says of an error: its name and message (never a stack). */
const describeError = (err: unknown) => (err instanceof Error ? { name: err.name, message: err.message } : String(err));

/**
 * An email address, wherever a line would carry one (a provider's message quoting a recipient, a
 * driver's error quoting a value): personal data that has no place in a log store. Any local part
 * (dot-atom characters but `/`, which would take in a path's `node_modules/@scope`, or quoted), and
 * any domain (a name, one word, or an address literal). A local part starts where a run of its
 * characters does (the lookbehind), so a long run with no `@` after it is read once, not once from
 * each of its characters (a 40,000-character path took a second of CPU).
 */
const ADDRESS = /(?:"[^"\n]*"|(?<![\w.!#$%&'*+^`{|}~-])[\w.!#$%&'*+^`{|}~-]+)@(?:\[[^\]\s]*\]|[\w.-]+)/g;

/** Each string of a line without its addresses (before it is JSON: no escape can be cut in two). */
const withoutAddresses = (_key: string, value: unknown) => (typeof value === "string" ? value.replace(ADDRESS, "[address]") : value);

/**
 * One JSON line, printed at its level: the level, the event, its fields, and the error (if any),
 * every email address in it written `[address]`.
 */
export const log = (level: Level, event: string, fields: Record<string, unknown>, err?: unknown): void =>
  writers[level](JSON.stringify({ level, event, ...fields, ...(err !== undefined && { error: describeError(err) }) }, withoutAddresses));

export const logError = (event: string, fields: Record<string, unknown>, err?: unknown): void => log("error", event, fields, err);

/** A schema's complaints about a message, for its log line (`operation_id: Required; type: …`). */
export const issuesOf = (error: { issues: { path: PropertyKey[]; message: string }[] }): string =>
  error.issues.map((i) => `${i.path.map(String).join(".")}: ${i.message}`).join("; ");
