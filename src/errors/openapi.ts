import { z } from "@hono/zod-openapi";
import { type ErrorCode, errorCodes } from "./api-error";

export const ErrorSchema = z
  .object({
    error: z.object({
      type: z.enum([...new Set(Object.values(errorCodes).map((e) => e.type))] as [string, ...string[]]),
      code: z.enum(Object.keys(errorCodes) as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
      param: z.string().optional(),
      details: z
        .array(z.object({ param: z.string().optional(), message: z.string() }).catchall(z.unknown()))
        .optional(),
      request_id: z.string().openapi({ example: "req_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    }),
  })
  .openapi("Error");

const json = (description: string) => ({ description, content: { "application/json": { schema: ErrorSchema } } });

/** Errors any authenticated route can answer with. */
const common = {
  400: json("validation_failed, invalid_json (and route-specific 400 codes)"),
  401: json("missing_credential or invalid_credential"),
  403: json("insufficient_scope"),
  404: json("not_found"),
  429: json("rate_limited (see Retry-After)"),
  500: json("internal_error"),
} as const;

const writes = {
  409: json("conflict: see the route's description for the codes"),
  413: json("payload_too_large: body over 64 KiB"),
  415: json("unsupported_media_type: body is not application/json"),
  422: json("idempotency_key_reused"),
} as const;

export const readErrorResponses = common;
export const writeErrorResponses = { ...common, ...writes };
