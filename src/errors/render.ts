import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { AppEnv } from "../lib/types";
import { ApiError } from "./api-error";

export type ErrorBody = {
  error: {
    type: string;
    code: string;
    message: string;
    param?: string;
    details?: unknown[];
    request_id: string;
  };
};

export const errorBody = (err: ApiError, requestId: string): ErrorBody => ({
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
    thrown instanceof ApiError ? thrown : new ApiError("internal_error", "An unexpected error occurred. It has been logged.");
  if (!(thrown instanceof ApiError)) {
    console.error(
      JSON.stringify({
        level: "error",
        request_id: c.get("requestId"),
        error: thrown instanceof Error ? { name: thrown.name, message: thrown.message, stack: thrown.stack } : String(thrown),
      }),
    );
  }
  for (const [name, value] of Object.entries(err.headers ?? {})) c.header(name, value);
  return c.json(errorBody(err, c.get("requestId")), err.status as ContentfulStatusCode);
};
