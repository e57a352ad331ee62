import type { Context } from "hono";
import { ApiError } from "../errors/api-error";
import { sha256Hex } from "../lib/crypto";
import { idPrefixes, newId } from "../lib/ids";
import type { AppEnv } from "../lib/types";
import { outcomeUnknown } from "./batch-settlement";
import { type BatchAnswer, type DeliveryError, type EmailOutcome, noOutcome } from "./integrations/types";

// What the messages a request sends itself while its client waits (test sends, confirmation mail)
// share: the provider key and message ids a retry of the request meets again, the 503 when the
// provider did not take them yet, and what its answer says of each message.

/**
 * The provider key of `kind`'s messages and their ids (as tags): from the request's Idempotency-Key
 * (and its credential), so that a retry asks with the same request under the same key and the
 * provider mails nobody twice; fresh ones without a key.
 */
export const oneOffIds = async (c: Context<AppEnv>, kind: string) => {
  const key = c.var.idempotency;
  const seed = key ? (await sha256Hex(`${key.credentialId}\n${key.key}`)).slice(0, 32) : undefined;
  return {
    keyed: seed !== undefined,
    providerKey: `${kind}:${seed ?? newId("test_message")}`,
    messageId: (i: number) => (seed ? `${idPrefixes.test_message}${seed.slice(0, 24).toUpperCase()}${String(i).padStart(2, "0")}` : newId("test_message")),
  };
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

/** A message Resend may have taken in another request of the `what` (one that timed out or answered 5xx). */
const mayHaveBeenSent = (what: string, last: DeliveryError): DeliveryError => ({
  code: outcomeUnknown.code,
  message: `Resend may have taken this message in another request of the ${what} (one that timed out or answered with an error); it was not sent again, so that nobody gets two copies (its last answer: ${last.message})`,
});

/**
 * What a settled answer says of the message `id` of its request (these requests take no look: every
 * message is in it). A refusal after an ask beside it that may have been taken proves nothing: the
 * message may have gone out, and it is not sent again.
 */
export const oneOffOutcome = (answer: Exclude<BatchAnswer, { kind: "retry" | "deferred" }>, id: string, what: string): EmailOutcome => {
  if (answer.kind === "answered") return answer.outcomes.get(id) ?? noOutcome;
  if (answer.kind === "unasked") return noOutcome;
  return { kind: "failed", error: answer.earlierMayBeTaken ? mayHaveBeenSent(what, answer.error) : answer.error };
};

/** An outcome as the API shows it. */
export const oneOffResult = (outcome: EmailOutcome) =>
  outcome.kind === "sent"
    ? { status: "sent" as const, provider_message_id: outcome.providerMessageId, error: null }
    : { status: "failed" as const, provider_message_id: null, error: outcome.error };
