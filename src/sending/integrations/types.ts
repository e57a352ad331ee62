/** What a provider is asked to send: one email to one recipient. */
export type OutboundEmail = {
  /** Also the provider's idempotency key, so a repeated call never sends a second email. */
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

export type SendOutcome =
  | { kind: "sent"; providerMessageId: string }
  /** Worth trying again later (rate limited, provider or network trouble). */
  | { kind: "retry"; error: DeliveryError; retryAfterSeconds?: number }
  /** Will never succeed as sent (rejected address, bad request). */
  | { kind: "failed"; error: DeliveryError };

export interface Integration {
  readonly slug: string;
  /** Deliveries handed over per queue message: bounded by the subrequests one invocation may make. */
  readonly chunkSize: number;
  /** Provider calls in flight at once within a chunk. */
  readonly concurrency: number;
  /**
   * Set only by an integration whose hand-over involves no I/O and cannot fail (sandbox): the
   * outcome is known before the delivery exists, so the fan-out creates each delivery already
   * `sent`, with the provider message id this returns, in the very statement that creates it.
   */
  readonly settleAtCreation?: (deliveryId: string) => string;
  send(email: OutboundEmail): Promise<SendOutcome>;
}
