/** One JSON line at error level: the event, its fields, and the error's name and message (never a stack). */
export const logError = (event: string, fields: Record<string, unknown>, err?: unknown): void =>
  console.error(
    JSON.stringify({
      level: "error",
      event,
      ...fields,
      ...(err !== undefined && { error: err instanceof Error ? { name: err.name, message: err.message } : String(err) }),
    }),
  );
