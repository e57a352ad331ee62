// The cron sweeper's queries: operations whose work is due, or whose messages were lost.

type SweepCandidates = {
  /** Queued operations that should have started: their start message was lost or never sent. */
  overdue: string[];
  /** Scheduled beyond the queue's longest delay and due within the next sweep interval. */
  dueSoon: { id: string; startAt: number }[];
  /** Running, no progress for a while: the fan-out chain broke (e.g. an enqueue failed). */
  stalledFanout: { id: string; cursor: string | null }[];
  /**
   * Running, fan-out done, no progress for a long while (nor a step that waited for the provider:
   * `heartbeat_at`): deliveries left queued with no message.
   */
  stalledDelivery: string[];
};

export const findSweepCandidates = async (
  d1: D1Database,
  now: number,
  limits: { overdueAfterMs: number; horizonMs: number; maxDelayMs: number; fanoutStallMs: number; deliveryStallMs: number; take: number },
): Promise<SweepCandidates> => {
  const [overdue, dueSoon, stalled] = await d1.batch<Record<string, unknown>>([
    d1
      .prepare(`SELECT id FROM operations WHERE status = 'queued' AND start_at <= ?1 ORDER BY start_at LIMIT ?2`)
      .bind(now - limits.overdueAfterMs, limits.take),
    d1
      .prepare(
        `SELECT id, start_at FROM operations
          WHERE status = 'queued' AND start_at > ?1 AND start_at <= ?2 AND start_at - created_at > ?3
          ORDER BY start_at LIMIT ?4`,
      )
      .bind(now - limits.overdueAfterMs, now + limits.horizonMs, limits.maxDelayMs, limits.take),
    d1
      .prepare(
        `SELECT id, fanout_cursor, fanout_done FROM operations
          WHERE status = 'running'
            AND ((fanout_done = 0 AND updated_at <= ?1) OR (fanout_done = 1 AND MAX(updated_at, COALESCE(heartbeat_at, 0)) <= ?2))
          ORDER BY updated_at LIMIT ?3`,
      )
      .bind(now - limits.fanoutStallMs, now - limits.deliveryStallMs, limits.take),
  ]);
  const stalledRows = (stalled?.results ?? []) as { id: string; fanout_cursor: string | null; fanout_done: number }[];
  return {
    overdue: ((overdue?.results ?? []) as { id: string }[]).map((r) => r.id),
    dueSoon: ((dueSoon?.results ?? []) as { id: string; start_at: number }[]).map((r) => ({ id: r.id, startAt: r.start_at })),
    stalledFanout: stalledRows.filter((r) => r.fanout_done === 0).map((r) => ({ id: r.id, cursor: r.fanout_cursor })),
    stalledDelivery: stalledRows.filter((r) => r.fanout_done === 1).map((r) => r.id),
  };
};
