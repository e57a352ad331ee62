import { z } from "zod";
import { idPattern } from "../lib/ids";

export const WEBHOOK_QUEUE = "newsletter-webhooks";
export const WEBHOOK_DEAD_LETTER_QUEUE = "newsletter-webhooks-dlq";

/**
 * Waits before each retry of a delivery: eight tries over about 27.5 hours. Each is one queue delay,
 * within the 12 h a queue message can be delayed.
 */
export const RETRY_DELAYS_SECONDS = [5, 5 * 60, 30 * 60, 2 * 3600, 5 * 3600, 10 * 3600, 10 * 3600] as const;

export const WebhookMessage = z.discriminatedUnion("type", [
  /** Creates the event's attempts (one per matching endpoint) and enqueues their first tries. */
  z.object({ type: z.literal("dispatch"), event_id: z.string().regex(idPattern("event")) }),
  /**
   * Try number `try` (0-based) of one attempt. A copy whose try the attempt has already moved past
   * is stale and does nothing, so duplicates of a message never double a try.
   */
  z.object({
    type: z.literal("deliver"),
    attempt_id: z.string().regex(idPattern("webhook_attempt")),
    try: z.number().int().min(0).max(RETRY_DELAYS_SECONDS.length),
  }),
]);

export type WebhookMessage = z.infer<typeof WebhookMessage>;
