import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { log } from "../lib/log";
import type { AppEnv } from "../lib/types";
import { ApiError } from "./api-error";
import { configurationProblemOf } from "./configuration";

type ErrorBody = {
  error: {
    type: string;
    code: string;
    message: string;
    param?: string;
    details?: unknown[];
    request_id: string;
  };
};

const errorBody = (err: ApiError, requestId: string): ErrorBody => ({
  error: {
    type: err.type,
    code: err.code,
    message: err.message,
    ...(err.param !== undefined && { param: err.param }),
    ...(err.details !== undefined && { details: err.details }),
    request_id: requestId,
  },
});

/** The one place an error becomes a response. Unknown throwables never leak their message. */
export const renderError = (c: Context<AppEnv>, thrown: unknown): Response => {
  const err =
    thrown instanceof ApiError
      ? thrown
      : (configurationProblemOf(thrown) ?? new ApiError("internal_error", "An unexpected error occurred. It has been logged."));
  // The provider's trouble is not the service's: the access line carries it as a warning.
  if (err.code === "provider_unavailable") c.set("warning", err.message);
  else if (!(thrown instanceof ApiError) || err.status >= 500) {
    // Its own description: the stack, without what a client sent.
    log("error", "request_failed", { request_id: c.get("requestId"), code: err.code, error: describeForLog(thrown) });
  }
  for (const [name, value] of Object.entries(err.headers ?? {})) c.header(name, value);
  c.header("Request-Id", c.get("requestId"));
  return c.json(errorBody(err, c.get("requestId")), err.status as ContentfulStatusCode);
};

/** Enough to debug, nothing a client sent: query parameters (emails, tags) are cut from driver errors. */
const describeForLog = (thrown: unknown) => {
  if (!(thrown instanceof Error)) return { message: String(thrown) };
  const strip = (text: string) => text.replace(/\nparams: [^\n]*/g, "");
  const cause = thrown.cause instanceof Error ? strip(thrown.cause.message) : undefined;
  return { name: thrown.name, message: strip(thrown.message), cause, stack: thrown.stack && strip(thrown.stack).split("\n").slice(0, 8).join("\n") };
};
