import { idPrefixes } from "../lib/ids";
import { article, clipped } from "./zod-messages";
// The closed list of error codes the API can answer with, and the status and type each implies.
export const errorCodes = {
  validation_failed: { status: 400, type: "invalid_request_error" },
  invalid_json: { status: 400, type: "invalid_request_error" },
  invalid_cursor: { status: 400, type: "invalid_request_error" },
  resource_missing: { status: 400, type: "invalid_request_error" },
  unknown_integration: { status: 400, type: "invalid_request_error" },
  integration_not_configured: { status: 400, type: "invalid_request_error" },
  invalid_signature: { status: 401, type: "authentication_error" },
  missing_credential: { status: 401, type: "authentication_error" },
  invalid_credential: { status: 401, type: "authentication_error" },
  insufficient_scope: { status: 403, type: "permission_error" },
  not_found: { status: 404, type: "invalid_request_error" },
  method_not_allowed: { status: 405, type: "invalid_request_error" },
  subscriber_exists: { status: 409, type: "invalid_request_error" },
  subscriber_not_pending: { status: 409, type: "invalid_request_error" },
  campaign_not_sendable: { status: 409, type: "invalid_request_error" },
  campaign_not_editable: { status: 409, type: "invalid_request_error" },
  campaign_not_scheduled: { status: 409, type: "invalid_request_error" },
  campaign_not_sending: { status: 409, type: "invalid_request_error" },
  webhook_endpoint_limit_reached: { status: 409, type: "invalid_request_error" },
  delivery_in_flight: { status: 409, type: "invalid_request_error" },
  idempotency_key_in_use: { status: 409, type: "idempotency_error" },
  payload_too_large: { status: 413, type: "invalid_request_error" },
  unsupported_media_type: { status: 415, type: "invalid_request_error" },
  idempotency_key_reused: { status: 422, type: "idempotency_error" },
  rate_limited: { status: 429, type: "rate_limit_error" },
  internal_error: { status: 500, type: "api_error" },
  configuration_error: { status: 503, type: "api_error" },
  provider_unavailable: { status: 503, type: "api_error" },
} as const;

export type ErrorCode = keyof typeof errorCodes;
type ErrorStatus = (typeof errorCodes)[ErrorCode]["status"];

export type ErrorDetail = { param?: string; message: string; [extra: string]: unknown };

type ApiErrorOptions = {
  param?: string;
  details?: ErrorDetail[];
  /** Extra response headers (Allow, Retry-After, WWW-Authenticate). */
  headers?: Record<string, string>;
};

/** Thrown anywhere; rendered into the one error envelope by `renderError`. */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly param?: string;
  readonly details?: ErrorDetail[];
  readonly headers?: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: ApiErrorOptions = {}) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.param = options.param;
    this.details = options.details;
    this.headers = options.headers;
  }

  get status(): ErrorStatus {
    return errorCodes[this.code].status;
  }

  get type(): string {
    return errorCodes[this.code].type;
  }
}

/**
 * A `kind` (workspace, subscriber, …) that does not exist, or that the credential may not see. With
 * the `id` it was asked for, `param` names the path parameter that held it (`<kind>_id`).
 */
export const notFound = (kind: string, id?: string, name = kind) =>
  id === undefined
    ? new ApiError("not_found", `No such ${name}`)
    : new ApiError("not_found", `No such ${name}: ${echoed(id)}`, { param: `${kind}_id` });

/** A path the service has no route for: an unknown one, or one whose feature this deployment has off (it looks the same). */
export const noRoute = (method: string, path: string) =>
  new ApiError("not_found", `No route for ${echoed(method)} ${echoed(path)}${OTHER_VERSION.test(path) ? " (paths start with /v1, in lower case, or with no version)" : ""}`);

/** A version prefix the API does not have (`/v2/…`, `/V1/…`): the 404 says which it has. */
const OTHER_VERSION = /^\/(?!v1(?:\/|$))[vV]\d+(?:\/|$)/;

/** What a client sent, as a message repeats it: control characters escaped, at most 200 characters (then "…"). */
const ECHO_MAX = 200;
const echoed = (text: string): string =>
  // eslint-disable-next-line no-control-regex
  clipped(text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`), ECHO_MAX);

/** A value the schema admits and a rule of the service refuses: 400 validation_failed naming `param`. */
export const invalidParam = (param: string, message: string) =>
  new ApiError("validation_failed", message, { param, details: [{ param, message }] });

/**
 * An id given in the body or query (`param`) of a `kind` that does not exist where the request looks
 * for it: 400 resource_missing (a path id that does not exist is 404 not_found instead).
 */
export const resourceMissing = (param: string, kind: string, id: string, where = "in this workspace") =>
  new ApiError("resource_missing", `No ${kind} ${echoed(id)} exists ${where}${otherKind(kind, id)}`, { param });

/** An id of another kind where one of `kind` belongs (a segment's id as newsletter_id) is said to be one. */
const otherKind = (kind: string, id: string): string => {
  const other = Object.entries(idPrefixes).find(([name, prefix]) => name !== kind && id.startsWith(prefix));
  return other ? ` (${id.slice(0, other[1].length)}… is ${article(other[0])} ${other[0].replace(/_/g, " ")} id)` : "";
};
