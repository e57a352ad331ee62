import { withOutbox } from "../events/outbox";
import { issuesOf, logError } from "../lib/log";
import { backoffSeconds } from "../lib/backoff";
import { deliveryBudget } from "./deliver";
import { runStep, type StepDeps } from "./pipeline";
import { SEND_DEAD_LETTER_QUEUE, SendMessage } from "./messages";
import { failOperation } from "./send.repository";

const messageFields = (message: Message) => ({ message_id: message.id, attempts: message.attempts });

/**
 * The `queue` handler for the send queue, the delivery queue and their dead-letter queue. Every message is acked
 * or retried explicitly; a failure retries that message alone, with exponential backoff.
 */
export const handleQueueBatch = async (batch: MessageBatch<unknown>, env: Env): Promise<void> => {
  if (batch.queue === SEND_DEAD_LETTER_QUEUE) return handleDeadLetters(batch, env);
  // Events the pipeline's batches write are dispatched once each batch commits.
  // Messages of a batch run side by side: each delivery step waits for its own provider slot, and
  // all of them share one budget of rendered mail (never another batch's: deliver.ts).
  const deps: StepDeps = { d1: withOutbox(env.DB, env.WEBHOOK_QUEUE), env, now: Date.now, budget: deliveryBudget() };
  await Promise.all(batch.messages.map((message) => handleMessage(deps, message)));
};

const handleMessage = async (deps: StepDeps, message: Message<unknown>): Promise<void> => {
  const parsed = SendMessage.safeParse(message.body);
  if (!parsed.success) {
    // No retry can make a malformed message valid.
    logError("send_message_malformed", messageFields(message), issuesOf(parsed.error));
    message.ack();
    return;
  }
  try {
    const result = await runStep(deps, parsed.data, message);
    if (result) message.retry({ delaySeconds: result.retryAfterSeconds });
    else message.ack();
  } catch (err) {
    logError("send_step_failed", messageFields(message), err);
    message.retry({ delaySeconds: backoffSeconds(message.attempts) });
  }
};

/**
 * A message that exhausted its retries took part of a send with it: the operation cannot reach
 * every recipient, so it ends `failed` (and its campaign too) rather than stay `running` forever.
 */
const handleDeadLetters = async (batch: MessageBatch<unknown>, env: Env): Promise<void> => {
  for (const message of batch.messages) {
    const parsed = SendMessage.safeParse(message.body);
    if (!parsed.success) {
      logError("send_dead_letter_malformed", messageFields(message), issuesOf(parsed.error));
      message.ack();
      continue;
    }
    try {
      await failOperation(
        withOutbox(env.DB, env.WEBHOOK_QUEUE),
        parsed.data.operation_id,
        {
          code: "send_step_exhausted",
          message: `A ${parsed.data.type} step of this send failed after every retry; some recipients may not have been reached.`,
        },
        Date.now(),
      );
      message.ack();
    } catch (err) {
      logError("send_dead_letter_failed", messageFields(message), err);
      message.retry({ delaySeconds: backoffSeconds(message.attempts) });
    }
  }
};
