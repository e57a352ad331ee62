import { backoffSeconds } from "../lib/backoff";
import {
  createAttempts,
  findEventForDispatch,
  loadTry,
  matchingEndpointIds,
  recordTry,
  stopAttempt,
} from "./attempts.repository";
import { issuesOf, logError } from "../lib/log";
import { postEvent } from "./delivery";
import { isDevelopmentDeployment, nonPublicUrlProblem } from "./url-rules";
import { WEBHOOK_DEAD_LETTER_QUEUE, WebhookMessage } from "./messages";


/**
 * The `queue` handler of the webhook queue and its dead-letter queue. Messages of a batch run side by
 * side, so a slow endpoint (at most 10 s a try) holds up no other delivery of the batch. A delivery's
 * retries are its own chain of delayed messages (messages.ts); the queue's retries are for a consumer
 * that threw (D1 unavailable, say).
 */
export const handleWebhookBatch = async (batch: MessageBatch<unknown>, env: Env): Promise<void> => {
  if (batch.queue === WEBHOOK_DEAD_LETTER_QUEUE) return handleDeadLetters(batch, env);
  await Promise.all(
    batch.messages.map(async (message) => {
      const parsed = WebhookMessage.safeParse(message.body);
      if (!parsed.success) {
        logError("webhook_message_malformed", { message_id: message.id }, issuesOf(parsed.error));
        message.ack();
        return;
      }
      try {
        if (parsed.data.type === "dispatch") await dispatchEvent(env, parsed.data.event_id, Date.now());
        else await deliverTry(env, parsed.data.attempt_id, parsed.data.try);
        message.ack();
      } catch (err) {
        logError("webhook_step_failed", { message_id: message.id, attempts: message.attempts }, err);
        message.retry({ delaySeconds: backoffSeconds(message.attempts) });
      }
    }),
  );
};

/** Creates the event's attempts and enqueues their first tries; an event already dispatched is left alone. */
const dispatchEvent = async (env: Env, eventId: string, now: number): Promise<void> => {
  const event = await findEventForDispatch(env.DB, eventId);
  if (!event || event.dispatchedAt !== null) return;
  // Every enabled endpoint that takes the type (a test event never gets here: it is born dispatched,
  // with its one attempt at the endpoint tested).
  const endpoints = await matchingEndpointIds(env.DB, event.workspaceId, event.type);
  const created = await createAttempts(env.DB, event, endpoints, now);
  if (created.length === 0) return;
  try {
    await env.WEBHOOK_QUEUE.sendBatch(created.map((id) => ({ body: { type: "deliver", attempt_id: id, try: 0 } satisfies WebhookMessage })));
  } catch (err) {
    // The attempts are recorded as due now: the sweeper sends what was not enqueued.
    logError("webhook_enqueue_failed", { event_id: eventId, attempt_ids: created }, err);
  }
};

/**
 * Try `tryNumber` of an attempt: skipped when a copy of this message got there first; the attempt
 * ends failed, untried, when its endpoint was deleted or (but for a test event's first try) disabled since. Otherwise the event is
 * posted, the outcome recorded, and the next try (if any) enqueued with its delay.
 */
export const deliverTry = async (env: Env, attemptId: string, tryNumber: number): Promise<void> => {
  const context = await loadTry(env.DB, attemptId);
  if (!context || context.status !== "pending" || context.attempts !== tryNumber) return;
  // A test event is asked for by name: its first try goes to a disabled endpoint too (to check it
  // before enabling it); its retries, like any event's, go only to an enabled one.
  const askedByName = context.event.type === "webhook.test" && tryNumber === 0;
  if (context.endpoint.deleted || (!context.endpoint.enabled && !askedByName)) {
    const reason = context.endpoint.deleted
      ? "The endpoint was deleted; nothing more is delivered to it"
      : "The endpoint was disabled; pending deliveries to it were stopped";
    await stopAttempt(env.DB, attemptId, reason, Date.now());
    return;
  }
  // On a deployed service, an endpoint at a local or private address (registered under an earlier
  // rule, or while the service ran as local development) is never called.
  const problem = isDevelopmentDeployment(env) ? undefined : nonPublicUrlProblem(context.endpoint.url);
  if (problem) {
    await stopAttempt(env.DB, attemptId, `The endpoint's URL ${problem} on a deployed service; nothing is delivered to it`, Date.now());
    return;
  }
  const outcome = await postEvent(context, Date.now());
  const delay = await recordTry(env.DB, attemptId, tryNumber, outcome, Date.now());
  if (!delay) return;
  try {
    await env.WEBHOOK_QUEUE.send({ type: "deliver", attempt_id: attemptId, try: tryNumber + 1 } satisfies WebhookMessage, {
      delaySeconds: delay,
    });
  } catch (err) {
    logError("webhook_enqueue_failed", { attempt_id: attemptId }, err);
  }
};

/** A message that exhausted the queue's retries: its attempt ends failed rather than pending forever. */
const handleDeadLetters = async (batch: MessageBatch<unknown>, env: Env): Promise<void> => {
  for (const message of batch.messages) {
    const parsed = WebhookMessage.safeParse(message.body);
    if (!parsed.success) logError("webhook_dead_letter_malformed", { message_id: message.id }, issuesOf(parsed.error));
    try {
      if (parsed.success && parsed.data.type === "deliver") {
        await stopAttempt(env.DB, parsed.data.attempt_id, "The delivery could not be processed after several tries", Date.now());
      }
      // A dispatch that never ran leaves its event undispatched: the sweeper tries it again.
      message.ack();
    } catch (err) {
      logError("webhook_dead_letter_failed", { message_id: message.id }, err);
      message.retry({ delaySeconds: backoffSeconds(message.attempts) });
    }
  }
};
