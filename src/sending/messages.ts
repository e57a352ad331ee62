import { z } from "zod";
import { sendAll } from "../lib/chunks";
import { idPattern } from "../lib/ids";

export const SEND_DEAD_LETTER_QUEUE = "newsletter-send-dlq";

/** The longest delivery delay Cloudflare Queues accepts; later starts are left to the cron sweeper. */
export const MAX_QUEUE_DELAY_SECONDS = 12 * 60 * 60;

const operationId = z.string().regex(idPattern("operation"));
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

/**
 * The queue that carries a message. A delivery step waits for the provider's rate (a batch of 25
 * of them holds its consumer for about 12 s at 2 requests a second), so delivery chunks have a queue
 * of their own (`DELIVERY_QUEUE`): a send's start and fan-out pages (a few D1 calls each) never wait
 * behind another send's deliveries, and a sandbox send finishes while a Resend send is under way.
 * Both queues share the consumer and the dead-letter queue.
 */
const queueFor = (env: Pick<Env, "SEND_QUEUE" | "DELIVERY_QUEUE">, message: SendMessage): Queue =>
  message.type === "deliver" ? env.DELIVERY_QUEUE : env.SEND_QUEUE;

/** Sends each message to its queue (`queueFor`), in order, QUEUE_BATCH_MAX a call. */
export const enqueueAll = async (env: Pick<Env, "SEND_QUEUE" | "DELIVERY_QUEUE">, requests: readonly MessageSendRequest<SendMessage>[]): Promise<void> => {
  const byQueue = new Map<Queue, MessageSendRequest<SendMessage>[]>();
  for (const request of requests) {
    const queue = queueFor(env, request.body);
    const list = byQueue.get(queue);
    if (list) list.push(request);
    else byQueue.set(queue, [request]);
  }
  for (const [queue, list] of byQueue) await sendAll(queue, list);
};
