/** What a provider is asked to send: one email to one recipient. */
export type OutboundEmail = {
  deliveryId: string;
  to: string;
  from: string;
  replyTo: string | null;
  subject: string;
  /** null: a text-only message (the campaign has no html). */
  html: string | null;
  text: string;
  /** List-Unsubscribe and List-Unsubscribe-Post. */
  headers: Record<string, string>;
};

export type DeliveryError = { code: string; message: string };

/**
 * A delivery left out of a later request of its batch than one it was in, when the provider says an
 * earlier request of the batch was taken and which one is not known: it is never sent again.
 */
export const outcomeUnknown: DeliveryError = {
  code: "resend_outcome_unknown",
  message:
    "It was in a request of its batch that Resend may have taken (its answer never came), and was left out of a later one: it is not sent again, so that nobody gets two copies",
};

export type SendOutcome =
  /**
   * Accepted. `providerMessageId` null: the provider accepted the batch in an earlier request whose
   * answer was lost (`acceptedEarlier`), so the message's id is not known here; the provider's
   * feedback names the delivery by its tag (src/webhooks/feedback.repository.ts).
   */
  | { kind: "sent"; providerMessageId: string | null; acceptedEarlier?: boolean }
  /**
   * Worth trying again later (rate limited, provider or network trouble). `leftOut`: this one was in
   * no request (its recipient left, SendOptions.leftOut): the retry costs it no attempt.
   */
  | { kind: "retry"; error: DeliveryError; retryAfterSeconds?: number; leftOut?: boolean }
  /**
   * Will never succeed as sent (rejected address, bad request). `leftOut`: not in the request at all,
   * its recipient having left (or moved) just before it left (SendOptions.leftOut).
   */
  | { kind: "failed"; error: DeliveryError; leftOut?: boolean }
  /**
   * Not handed over at all (no free provider slot soon enough): nothing was attempted, so it costs
   * the delivery none of its attempts. The batch is asked for again after `retryAfterSeconds`.
   */
  | { kind: "deferred"; error: DeliveryError; retryAfterSeconds: number };

export type SendOptions = {
  /**
   * Asked right before the batch's request leaves (after any wait for the provider's rate): the
   * deliveries to leave out of it, with why. A recipient who unsubscribed while the batch waited is
   * not mailed.
   */
  leftOut?: (deliveryIds: string[]) => Promise<Map<string, DeliveryError>>;
  /**
   * Tries before answering `retry` (each with its backoff and its own asks): a queue step takes
   * several; a request a person waits for (a test send) one, so trouble answers in seconds.
   */
  tries?: number;
};

export interface Integration {
  readonly slug: string;
  /** Deliveries handed over per queue message: one provider batch at most. */
  readonly chunkSize: number;
  /**
   * Set only by an integration whose hand-over involves no I/O and cannot fail (sandbox): the
   * outcome is known before the delivery exists, so the fan-out creates each delivery already
   * `sent`, with the provider message id this returns, in the very statement that creates it.
   */
  readonly settleAtCreation?: (deliveryId: string) => string;
  /**
   * Hands a batch over (at most `chunkSize` emails) and answers one outcome per email, in order.
   * `idempotencyKey` names the batch: the same key on every retry of the same batch, so a provider
   * that already accepted it answers as before instead of sending again.
   */
  sendBatch(emails: OutboundEmail[], idempotencyKey: string, options?: SendOptions): Promise<SendOutcome[]>;
}
