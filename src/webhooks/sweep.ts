import { sendAll } from "../lib/chunks";
import { purgeInRounds } from "../lib/purge";
import { deleteExpiredEvents, findStalledAttempts, findUndispatchedEvents } from "./attempts.repository";
import { deleteConfirmationMessagesBefore, deleteReceiptsBefore } from "../feedback/feedback.repository";
import type { WebhookMessage } from "./messages";

const MINUTE = 60_000;
/**
 * How long a provider event's receipt is kept: Resend (Svix) stops redelivering an event within a few
 * days. A copy arriving later still changes nothing that moved on, since effects only move forward.
 */
export const RECEIPT_TTL_MS = 7 * 24 * 60 * MINUTE;

/**
 * How long a confirmation mail's message id is kept for the feedback about it: a bounce comes within
 * days, a complaint within weeks of the mail.
 */
export const CONFIRMATION_MESSAGE_TTL_MS = 30 * 24 * 60 * MINUTE;

/**
 * How long events (GET /events) and their endpoints' attempts are kept, as Stripe keeps its events:
 * far past the last retry (about 28 h), and what an integrator reconciling a missed delivery needs,
 * while the outbox, whose campaign events carry a whole campaign, does not grow for ever.
 */
export const EVENT_TTL_MS = 30 * 24 * 60 * MINUTE;

/**
 * The most events, and the most attempts, one sweep hands back to the queue: a lost enqueue of a
 * 1,000-subscriber import is caught up in one run (one read of ids each, then 10 sendBatch calls).
 */
export const SWEEP_TAKE = 1_000;

/**
 * The cron's part for webhooks: events whose dispatch was never enqueued (a crash between a write's
 * commit and its enqueue) a minute after their write, and pending attempts whose next try is five
 * minutes overdue (its message was lost), oldest first, SWEEP_TAKE of each a run. Both messages are
 * safe to receive twice. And the purges.
 */
export const sweepWebhooks = async (env: Env, now: number): Promise<void> => {
  const [events, stalled] = await Promise.all([
    findUndispatchedEvents(env.DB, now - MINUTE, SWEEP_TAKE),
    findStalledAttempts(env.DB, now - 5 * MINUTE, SWEEP_TAKE),
  ]);
  const requests: MessageSendRequest<WebhookMessage>[] = [
    ...events.map((id) => ({ body: { type: "dispatch", event_id: id } as const })),
    ...stalled.map((a) => ({ body: { type: "deliver", attempt_id: a.id, try: a.attempts } as const })),
  ];
  await sendAll(env.WEBHOOK_QUEUE, requests);
  // Receipts, events and attempts, and confirmation mail records, older than their TTL, so the tables do not grow for ever (up to
  // 10,000 rows of each a sweep).
  await purgeInRounds((size) => deleteReceiptsBefore(env.DB, now - RECEIPT_TTL_MS, size));
  await purgeInRounds((size) => deleteExpiredEvents(env.DB, now - EVENT_TTL_MS, size));
  await purgeInRounds((size) => deleteConfirmationMessagesBefore(env.DB, now - CONFIRMATION_MESSAGE_TTL_MS, size));
};

