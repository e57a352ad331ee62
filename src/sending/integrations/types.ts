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

/** One email's outcome in a request the provider answered. */
export type EmailOutcome =
  /**
   * Accepted. `providerMessageId` null: the provider took the batch in an earlier request whose
   * answer was lost, so the message's id is not known here; the provider's feedback names the
   * delivery by its tag (src/feedback/feedback.repository.ts).
   */
  | { kind: "sent"; providerMessageId: string | null }
  /** Will never be sent as it is (rejected address, bad request). */
  | { kind: "failed"; error: DeliveryError };

/** An email of an answered request that the answer says nothing about. */
export const noOutcome: Extract<EmailOutcome, { kind: "failed" }> = { kind: "failed", error: { code: "provider_no_answer", message: "The provider gave no outcome for this message" } };

/**
 * What came of handing a batch over, as facts about its requests; what they mean for each delivery
 * (a recipient left out of some of them included) is decided in one place, src/sending/batch-settlement.ts.
 */
export type BatchAnswer =
  /**
   * The provider answered for the batch's last request: an outcome for each email that was in it (by
   * delivery id; one left out of it at the last look has none). `acceptedEarlier`: the provider says
   * the key already stands for a batch it took in an earlier request (whose answer was lost) with
   * other content; every email of the last request is then `sent`, and which request was taken is
   * not known.
   */
  | { kind: "answered"; outcomes: Map<string, EmailOutcome>; acceptedEarlier: boolean }
  /**
   * The provider refused the last request for good (a 4xx): nothing in it was sent. `earlierMayBeTaken`:
   * another request with the same number left beside it (a hedge) and may have been taken unanswered.
   */
  | { kind: "refused"; error: DeliveryError; earlierMayBeTaken?: boolean }
  /**
   * The provider refused the last request because of one email in it (strict validation naming it):
   * nothing in it was sent. (Whether an earlier request of the batch was taken, validated as it was
   * then, the answer does not say: batch-settlement.ts trusts it for the batch's first request only.)
   */
  | { kind: "rejected"; deliveryId: string; error: DeliveryError; earlierMayBeTaken?: boolean }
  /**
   * A request left and got no answer that settles the batch (rate limited, provider or network
   * trouble, the provider may even have taken it): the batch is to be asked again, under its key.
   */
  | { kind: "retry"; error: DeliveryError; retryAfterSeconds?: number }
  /** No request left at all (no provider slot soon enough): nothing was attempted. */
  | { kind: "deferred"; error: DeliveryError; retryAfterSeconds: number }
  /** No request left: the last look before it left everyone out. */
  | { kind: "unasked" };

export type SendOptions = {
  /**
   * Called before each request of the batch, once its slot of the provider's rate has come and just
   * before the slot is confirmed, with the delivery ids it would hold: those to leave out of it and of
   * every later request. A recipient who unsubscribed while the batch waited is not mailed.
   */
  beforeRequest?: (deliveryIds: string[]) => Promise<ReadonlySet<string>>;
  /**
   * Called when the request `beforeRequest` last looked at does not leave after all (its slot was
   * taken back, by a 429 pause say): the next look is for the request that does.
   */
  requestWithdrawn?: () => Promise<void>;
  /**
   * Called before a second ask of a request (a hedge, made when the first has no answer yet) leaves,
   * with the delivery ids it holds: false when one of them is no longer to be mailed (they left,
   * the send was canceled), and then no hedge leaves.
   */
  beforeHedge?: (deliveryIds: string[]) => Promise<boolean>;
  /**
   * Tries before answering `retry` (each with its backoff and its own asks): a queue step takes
   * several; a request a person waits for (a test send) one, so trouble answers in seconds.
   */
  tries?: number;
  /**
   * A client is waiting for the answer (a test send, a confirmation mail): its requests take the
   * account's first free moment, ahead of the slots handed out to sends, which move back by one.
   */
  urgent?: boolean;
};

export interface Integration {
  readonly slug: string;
  /** Deliveries handed over per queue message: one provider batch at most. */
  readonly chunkSize: number;
  /**
   * How long after a batch's first request the provider still answers for its idempotency key (with
   * a margin): a batch asked first longer ago than this is never asked again under that key, since the
   * provider may have forgotten it and would send what it already took. Unset: keys do not expire.
   */
  readonly keyLifetimeMs?: number;
  /**
   * Set only by an integration whose hand-over involves no I/O and cannot fail (sandbox): the
   * outcome is known before the delivery exists, so the fan-out creates each delivery already
   * `sent`, with the provider message id this returns, in the very statement that creates it.
   */
  readonly settleAtCreation?: (deliveryId: string) => string;
  /**
   * The provider reports what became of a message (bounces, complaints: POST /webhooks/resend) by
   * the id it answered with: a mail sent outside a send (a confirmation) is recorded by that id.
   */
  readonly reportsFeedback?: true;
  /**
   * Hands a batch over (at most `chunkSize` emails). `idempotencyKey` names the batch: the same key
   * on every retry of the same batch, so a provider that already accepted it answers as before
   * instead of sending again. Every request of the batch holds the emails of the one before it, or
   * fewer (those `beforeRequest` leaves out), never another.
   */
  sendBatch(emails: OutboundEmail[], idempotencyKey: string, options?: SendOptions): Promise<BatchAnswer>;
}
