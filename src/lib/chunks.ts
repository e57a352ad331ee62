/** The list cut into consecutive runs of at most `size` (the last may be shorter). */
export const chunksOf = <T>(items: readonly T[], size: number): T[][] => {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
};

/** The most messages one `Queue.sendBatch` call takes (a Cloudflare Queues limit). */
export const QUEUE_BATCH_MAX = 100;

/** Sends every message to the queue, QUEUE_BATCH_MAX a call, in order. */
export const sendAll = async <T>(queue: Queue<T>, requests: readonly MessageSendRequest<T>[]): Promise<void> => {
  for (const part of chunksOf(requests, QUEUE_BATCH_MAX)) await queue.sendBatch(part);
};
