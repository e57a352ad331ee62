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
 * driver's error quoting a value): personal data that has no place in a log store.
 */
const ADDRESS = /[\w.%+-]+@[\w-]+\.[\w.-]+/g;

/**
 * One JSON line, printed at its level: the level, the event, its fields, and the error (if any),
 * every email address in it written `[address]`.
 */
export const log = (level: Level, event: string, fields: Record<string, unknown>, err?: unknown): void =>
  writers[level](JSON.stringify({ level, event, ...fields, ...(err !== undefined && { error: describeError(err) }) }).replace(ADDRESS, "[address]"));

export const logError = (event: string, fields: Record<string, unknown>, err?: unknown): void => log("error", event, fields, err);

/** A schema's complaints about a message, for its log line (`operation_id: Required; type: …`). */
export const issuesOf = (error: { issues: { path: PropertyKey[]; message: string }[] }): string =>
  error.issues.map((i) => `${i.path.map(String).join(".")}: ${i.message}`).join("; ");
