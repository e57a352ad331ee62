import { purgeExpiredRecords } from "../idempotency/idempotency";
import { purgeInRounds } from "../lib/purge";
import { enqueueAll, MAX_QUEUE_DELAY_SECONDS, type SendMessage } from "./messages";
import { findSweepCandidates } from "./sweep.repository";

const MINUTE = 60_000;

/**
 * The cron trigger (every minute): starts sends scheduled beyond the queue's longest delay,
 * re-enqueues work that a lost or failed enqueue left behind, and purges expired Idempotency-Key
 * records. Every message it sends is safe to receive twice, so a sweep that races the normal flow
 * only costs a little duplicate reading.
 */
export const sweep = async (env: Env, now: number): Promise<void> => {
  const found = await findSweepCandidates(env.DB, now, {
    overdueAfterMs: MINUTE,
    horizonMs: 2 * MINUTE,
    maxDelayMs: MAX_QUEUE_DELAY_SECONDS * 1000,
    fanoutStallMs: 2 * MINUTE,
    deliveryStallMs: 10 * MINUTE,
    take: 100,
  });
  const requests: MessageSendRequest<SendMessage>[] = [
    ...found.overdue.map((id) => ({ body: { type: "start", operation_id: id } as const })),
    ...found.dueSoon.map(({ id, startAt }) => ({
      body: { type: "start", operation_id: id } as const,
      delaySeconds: Math.max(0, Math.ceil((startAt - now) / 1000)),
    })),
    ...found.stalledFanout.map(({ id, cursor }) => ({ body: { type: "fanout", operation_id: id, after: cursor } as const })),
    ...found.stalledDelivery.map((id) => ({ body: { type: "deliver", operation_id: id, from: null, to: null } as const })),
  ];
  await enqueueAll(env, requests);
  // Idempotency-Key records past their 24 h: up to 10,000 a minute, enough for any ordinary write rate.
  await purgeInRounds((size) => purgeExpiredRecords(env.DB, now, size));
};

