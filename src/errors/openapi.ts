import { z } from "@hono/zod-openapi";
import { MAX_BODY_BYTES } from "../middleware/request-context";
import { type ErrorCode, errorCodes } from "./api-error";

const ErrorSchema = z
  .object({
    error: z.object({
      type: z.enum([...new Set(Object.values(errorCodes).map((e) => e.type))] as [string, ...string[]]),
      code: z.enum(Object.keys(errorCodes) as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
      param: z.string().optional(),
      details: z
        .array(
          z
            .object({
              param: z.string().optional(),
              message: z.string(),
              subscriber_id: z.string().optional().openapi({ description: "`subscriber_exists`: the subscriber that has the email." }),
              operation_id: z.string().optional().openapi({ description: "`campaign_not_sendable`: the campaign's send." }),
            })
            .catchall(z.unknown()),
        )
        .optional(),
      request_id: z.string().openapi({ example: "req_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    }),
  })
  .openapi("Error");

type HeaderObject = { description: string; required?: boolean; schema: { type: "string" | "integer" } };

/** On every response, success or error. */
export const requestIdHeader: Record<string, HeaderObject> = {
  "Request-Id": { description: "This request's id (`req_…`), equal to `error.request_id` on errors.", required: true, schema: { type: "string" } },
};

/** On every response of a route that takes `Idempotency-Key`, when the answer is a replay. */
export const replayedHeader: Record<string, HeaderObject> = {
  "Idempotent-Replayed": {
    description: "`true` when this is the stored response of an earlier request with the same Idempotency-Key.",
    schema: { type: "string" },
  },
};

/** An error response whose description names the codes it can carry. */
export const errorResponse = (codes: readonly ErrorCode[] | string, headers: Record<string, HeaderObject> = {}) =>
  json(typeof codes === "string" ? codes : codes.join(", "), headers);

const json = (description: string, headers: Record<string, HeaderObject> = {}) => ({
  description,
  headers: { ...requestIdHeader, ...headers },
  content: { "application/json": { schema: ErrorSchema } },
});

const unauthorized = json("missing_credential or invalid_credential", {
  "WWW-Authenticate": { description: "The bearer challenge.", required: true, schema: { type: "string" } },
});

const sizeText = (bytes: number) => (bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : `${bytes / 1024} KiB`);

/** The 413 of a route whose bodies may be up to `maxBytes`. */
export const payloadTooLarge = (maxBytes: number) => json(`payload_too_large: body over ${sizeText(maxBytes)}`);

/** A route that reads a JSON body: too large, or not JSON. */
export const bodyErrorResponses = {
  413: payloadTooLarge(MAX_BODY_BYTES),
  415: json("unsupported_media_type: body is not application/json"),
} as const;

const configurationError = json("configuration_error: the deployment lacks a binding or its migrations (GET /health says which)");

/** The 503 of a route that waits on the mail provider: the provider's trouble, beside the deployment's. */
export const providerUnavailable = json(
  "configuration_error: the deployment lacks a binding or its migrations (GET /health says which); provider_unavailable: the mail provider did not take the messages yet (rate limited, an error or no answer): retry with the same Idempotency-Key after Retry-After",
  { "Retry-After": { description: "Seconds to wait before retrying (provider_unavailable).", schema: { type: "integer" } } },
);

/** A rate-limited request's 429 (authenticated routes and /health). */
export const rateLimited = json("rate_limited", {
  "Retry-After": { description: "Seconds to wait before retrying.", required: true, schema: { type: "integer" } },
});

/** Errors any authenticated route can answer with. */
const common = {
  // Each route names its own (src/lib/route.ts): this is a read's without a cursor.
  400: json("validation_failed"),
  401: unauthorized,
  403: json("insufficient_scope"),
  404: json("not_found"),
  429: rateLimited,
  500: json("internal_error"),
  503: configurationError,
} as const;

/** While a request with the same Idempotency-Key runs: how long to wait before asking again. */
export const keyInUseHeaders = {
  "Retry-After": { description: "Seconds to wait before retrying (idempotency_key_in_use).", schema: { type: "integer" } },
} as const;

const writes = {
  ...bodyErrorResponses,
  409: json("idempotency_key_in_use", keyInUseHeaders),
  422: json("idempotency_key_reused"),
} as const;

export const readErrorResponses = common;
/** A route that reads a body without writing (a preview): the body's own errors too. */
export const bodyReadErrorResponses = { ...common, ...bodyErrorResponses };
export const writeErrorResponses = { ...common, ...writes };

/** The operator API: no scopes, workspaces or rate limit; 404 also when ADMIN_TOKEN is unset. */
export const operatorErrorResponses = {
  400: json("validation_failed"),
  401: unauthorized,
  404: json("not_found (also every operator route when ADMIN_TOKEN is not configured)"),
  500: common[500],
  503: common[503],
} as const;
/** An operator create: a body, and an Idempotency-Key (its scope is the operator token). */
export const operatorWriteErrorResponses = { ...operatorErrorResponses, ...writes, 400: json("validation_failed, invalid_json") };
