import type { BatchAnswer, DeliveryError } from "./integrations/types";

// What a provider's answer for a batch means for each of its deliveries: one rule, in one place.
//
// A batch is asked for under one idempotency key, in requests numbered 1, 2, … (deliveries.asked_seq:
// the latest request that held the delivery). A request only ever holds members of the one before it
// (someone who left, moved or could not be rendered is left out of it and of every later one; the
// look before a request numbers only rows of the latest, so a second runner of the same chunk cannot
// add one back), so a delivery numbered n was in requests 1..n and in none after. (A number whose
// slot was taken back, or whose every request was answered 429, is withdrawn before another request
// is prepared, src/sending/deliver.ts; a crash or an error between the look and the request, or an
// ask turned away as in progress, can still leave a number to a request that never left. That only
// makes a verdict more cautious.) Hedged requests share their number: a refusal answering
// one of them while another went unanswered is judged as a refusal after earlier requests. A runner settles the chunk only while its last number is still the
// chunk's latest: a runner that another one overtook writes nothing. The provider keeps a key's first
// accepted request: a later request with the same content is answered as that one was; with other
// content it is refused as "taken already" (`acceptedEarlier`), without saying which it took. From
// that alone, for the batch's last request L:
//
// | the answer                        | in L          | numbered L-1 | numbered 1..L-2 | never asked (0) |
// |-----------------------------------|---------------|--------------|-----------------|-----------------|
// | answered (L taken, or its replay) | its outcome   | not mailed   | not mailed      | not mailed      |
// | answered, taken earlier           | sent          | sent         | outcome unknown | not mailed      |
// | refused (a 4xx), the first request| failed        | -            | -               | not mailed      |
// | refused after earlier requests, or retries exhausted | unknown | unknown | unknown   | not mailed      |
// | the first request refused for one email named | that one failed, the others not mailed | - | - | not mailed |
// | no request (everyone left)        | -             | unknown      | unknown         | not mailed      |
// | to be asked again                 | retry (costs an attempt) | retry | retry         | retry           |
//
// "Not mailed": failed for its own reason when it has one (it left, moved, cannot be rendered), or
// else held: it goes out in a batch (and under a key) of its own once this one is settled, since a
// request under this key with it would be answered as one without it. "Outcome unknown": in some
// request the provider may have taken and not in others: never sent again (no second copy), failed
// `outcome_unknown`.

/** A delivery of the batch as its step ends. */
export type BatchMember = {
  /** The delivery (the answer's outcomes are keyed by it). */
  id: string;
  /** The latest request of the batch that held it (0: none). */
  askedSeq: number;
  /** In the batch's last request (the one the answer is about). */
  inLastRequest: boolean;
  attempts: number;
  /** Why it may not be mailed now (it left, moved, or cannot be rendered), if so. */
  local?: DeliveryError;
};

/** What becomes of one delivery. */
export type Settlement =
  | { kind: "sent"; providerMessageId: string | null }
  /** `attempted`: it was in the request the failure is about (its attempt is counted). */
  | { kind: "failed"; error: DeliveryError; attempted: boolean }
  /** Still queued, for the batch's next request; `attempted`: it was in the request that failed. */
  | { kind: "retry"; error: DeliveryError; attempted: boolean }
  /** Still queued, for a batch of its own: never in a request of this batch the provider may have taken. */
  | { kind: "held" };

export const outcomeUnknown: DeliveryError = {
  code: "outcome_unknown",
  message:
    "It was in a request to the provider that may have taken it (one whose answer was lost or an error, or that may have left before a crash), and the answers do not say whether it did: it is not sent again, so that nobody gets two copies",
};

const notMailed = (member: BatchMember): Settlement =>
  member.local ? { kind: "failed", error: member.local, attempted: false } : { kind: "held" };

/**
 * `outcome_unknown`, saying what the provider last answered when there is something to say (then the
 * member of that last request has its attempt counted).
 */
const unknown = (member: BatchMember, error?: DeliveryError): Settlement => ({
  kind: "failed",
  error: error ? { code: outcomeUnknown.code, message: `${outcomeUnknown.message} (its last answer: ${error.message})` } : outcomeUnknown,
  attempted: error !== undefined && member.inLastRequest,
});

/**
 * The provider may no longer know the batch's key (its first request was made longer ago than the
 * integration's key lifetime): a request under it could send again what an earlier one took, so the
 * batch is never asked again. Those in an earlier request end `outcome_unknown`; the others were in
 * none, and are held for a batch (and a key) of their own.
 */
export const settleExpiredKey = (members: Pick<BatchMember, "askedSeq">[]): Settlement[] =>
  members.map((m) =>
    m.askedSeq === 0
      ? { kind: "held" }
      : {
          kind: "failed",
          error: { code: outcomeUnknown.code, message: `${outcomeUnknown.message} (the batch's first request is older than the provider keeps its key, so it is not asked again)` },
          attempted: false,
        },
  );

/** Whether the batch has made one request at most (numbered 1, or not numbered: no look): none before it could have been taken. */
const firstRequest = (lastSeq: number | undefined) => lastSeq === undefined || lastSeq <= 1;

/**
 * The batch ended without a request known to be taken. Its last request was refused for good
 * (`definitive`: a 4xx), or its retries ran out (a timeout or a 5xx may have been taken), or nobody
 * was left to ask. Only a refusal of the batch's first request says for sure that nobody was mailed:
 * after earlier requests (whose answers were lost), anyone in one of them may have been.
 */
const ended = (member: BatchMember, lastSeq: number | undefined, error: DeliveryError | undefined, definitive: boolean): Settlement => {
  if (member.askedSeq === 0) return notMailed(member);
  if (member.inLastRequest && error && definitive && firstRequest(lastSeq)) return { kind: "failed", error, attempted: true };
  return unknown(member, error);
};

/**
 * Deliveries that cannot be handed to any provider (the integration is no longer configured): each
 * fails with `error`, or `outcome_unknown` when it was in a request the provider may have taken.
 */
export const settleWithoutProvider = (members: Pick<BatchMember, "askedSeq">[], error: DeliveryError): Settlement[] =>
  members.map((m) => (m.askedSeq === 0 ? { kind: "failed", error, attempted: false } : { kind: "failed", error: outcomeUnknown, attempted: false }));

/**
 * Each member's settlement (in order) from the batch's answer. `lastSeq`: the number of the last
 * request (undefined when the integration takes no look before its requests, as the sandbox).
 * A batch to be asked again gives up once a member of its last request has used its last attempt.
 */
export const settleBatch = (
  members: BatchMember[],
  answer: Exclude<BatchAnswer, { kind: "deferred" }>,
  lastSeq: number | undefined,
  maxAttempts: number,
): Settlement[] => {
  switch (answer.kind) {
    case "retry": {
      const givesUp = members.some((m) => m.inLastRequest && m.attempts + 1 >= maxAttempts);
      // Unnumbered yet in the last request: every request that held it was answered 429 (its number
      // withdrawn), so none was taken: it fails for good with that answer.
      if (givesUp) {
        return members.map((m) => (m.askedSeq === 0 && m.inLastRequest ? { kind: "failed", error: answer.error, attempted: true } : ended(m, lastSeq, answer.error, false)));
      }
      return members.map((m) => ({ kind: "retry", error: answer.error, attempted: m.inLastRequest }));
    }
    case "refused":
      return members.map((m) => ended(m, lastSeq, answer.error, !answer.earlierMayBeTaken));
    case "rejected":
      // The batch's first request, refused for one email in it: nothing was sent; the others go in a
      // batch of their own. After earlier requests (answers lost), one of those may have been taken
      // (validated as they were, not as this one), so it ends as a refusal does.
      if (!firstRequest(lastSeq) || answer.earlierMayBeTaken) return members.map((m) => ended(m, lastSeq, answer.error, false));
      return members.map((m) => (m.id === answer.deliveryId ? { kind: "failed", error: answer.error, attempted: true } : notMailed(m)));
    case "unasked":
      return members.map((m) => ended(m, lastSeq, undefined, false));
    case "answered":
      return members.map((m): Settlement => {
        const outcome = answer.outcomes.get(m.id);
        if (outcome) return outcome.kind === "sent" ? outcome : { kind: "failed", error: outcome.error, attempted: true };
        if (m.askedSeq === 0 || !answer.acceptedEarlier) return notMailed(m);
        return lastSeq !== undefined && m.askedSeq === lastSeq - 1 ? { kind: "sent", providerMessageId: null } : unknown(m);
      });
  }
};
