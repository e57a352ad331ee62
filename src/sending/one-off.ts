import type { Context } from "hono";
import { ApiError } from "../errors/api-error";
import { sha256Hex } from "../lib/crypto";
import type { AppEnv } from "../lib/types";
import type { BatchAnswer } from "./integrations/types";

// What the messages a request sends itself while its client waits (test sends, confirmation mail)
// share: the provider key a retry of the request meets again, and the 503 when the provider did not
// take them yet.

/**
 * A seed for the provider's key and the messages' ids: from the request's Idempotency-Key (and its
 * credential), so that a retry asks with the same request under the same key and the provider mails
 * nobody twice; undefined without a key (fresh ones per request).
 */
export const requestSeed = async (c: Context<AppEnv>): Promise<string | undefined> => {
  const key = c.var.idempotency;
  return key ? (await sha256Hex(`${key.credentialId}\n${key.key}`)).slice(0, 32) : undefined;
};

/**
 * Not taken yet (rate limited, provider trouble, no answer): not an outcome to report, or to store
 * under the Idempotency-Key; the client's retry asks again. `what`: the messages, as the error names them.
 */
export const notTakenYet = (answer: Extract<BatchAnswer, { kind: "retry" | "deferred" }>, what: string, keyed: boolean): ApiError => {
  const wait = Math.max(1, Math.ceil(answer.retryAfterSeconds ?? 5));
  return new ApiError(
    "provider_unavailable",
    `The mail provider did not take the ${what} yet (${answer.error.message}); retry after ${wait} seconds${keyed ? " with the same Idempotency-Key: nobody gets two copies" : ", with an Idempotency-Key so that a message the provider took without answering is not sent twice"}`,
    { headers: { "Retry-After": String(wait) } },
  );
};
