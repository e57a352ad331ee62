import { z } from "zod";

export const SEND_DEAD_LETTER_QUEUE = "newsletter-send-dlq";

/** The longest delivery delay Cloudflare Queues accepts; later starts are left to the cron sweeper. */
export const MAX_QUEUE_DELAY_SECONDS = 12 * 60 * 60;

const operationId = z.string().regex(/^op_[0-9A-Za-z]{1,64}$/);
/** A subscriber id bounding a keyset range; null is the open end. */
const position = z.string().min(1).max(100).nullable();

// Every message names a bounded piece of work by position, never a list of recipients, so its
// size is constant whatever the audience.
export const SendMessage = z.discriminatedUnion("type", [
  /** Moves a queued operation to running and starts the fan-out. */
  z.object({ type: z.literal("start"), operation_id: operationId }),
  /** Creates the deliveries of the next page of recipients after `after`. */
  z.object({ type: z.literal("fanout"), operation_id: operationId, after: position }),
  /** Hands the queued deliveries of subscribers in (`from`, `to`] to the integration. */
  z.object({ type: z.literal("deliver"), operation_id: operationId, from: position, to: position }),
]);

export type SendMessage = z.infer<typeof SendMessage>;
