import type { Context } from "hono";
import type { BatchItem, BatchResponse } from "drizzle-orm/batch";
import { ApiError } from "../errors/api-error";
import {
  dropExpiredRecord,
  findLiveRecord,
  type IdempotencyRecord,
  type IdempotentRequest,
  renderedRecord,
  snapshotRecord,
} from "../idempotency/idempotency";
import type { ResourceKind } from "../idempotency/resources";
import { enqueueDispatch } from "../events/outbox";
import { type CommitEvent, writeEvents } from "../events/write-events";
import { replayResponse, type StoredResponse } from "../idempotency/stored-response";
import type { AppEnv } from "../lib/types";

/**
 * What a write answers when it applies: the resource row `id` of `resource` (snapshotted in the
 * batch, replayed through its serializer), or a body computed before the write.
 */
export type Answer = { status: 200 | 201 | 202; resource: ResourceKind; id: string } | { status: 200 | 201 | 202; body: unknown };

/**
 * The one write path: a request's statements commit in ONE D1 batch (one round trip, atomic),
 * together with its Idempotency-Key record when it has a key, so that no crash can separate a write
 * from the answer a retry will get. The decisive statement goes last: the record is written only if
 * that statement changed something. When it did not, the handler finds out why (reads are fine on
 * that path) and throws; the idempotency middleware records that answer instead.
 *
 * When the key already has a live record (a retry whose first try committed), the batch fails on the
 * record's primary key and leaves nothing behind; the request then answers with that record instead
 * (a replay), or 422 when the record belongs to another request. Returns the statements' results.
 *
 * `events` (the outbox, src/events) go into the same batch, after the statements and before the
 * record: each is written iff the write applied (and its own conditions hold), so no change is
 * without its event and no event without its change; a replayed or failed write writes none. The
 * events written are handed to the webhook queue after the commit, off the response's path.
 */
export const commit = async <T extends BatchItem<"sqlite">[]>(
  c: Context<AppEnv>,
  statements: readonly [...T],
  answer: Answer,
  options: { events?: readonly CommitEvent[] } = {},
): Promise<BatchResponse<T>> => {
  if (options.events && options.events.length > 0) return commitWithEvents(c, statements, answer, options.events);
  const { db } = c.var;
  const request = c.var.idempotency;
  if (!request) {
    if (statements.length === 0) return [] as unknown as BatchResponse<T>;
    return (await db.batch(statements as unknown as [BatchItem<"sqlite">])) as unknown as BatchResponse<T>;
  }
  const now = Date.now();
  const record =
    "resource" in answer
      ? snapshotRecord(db, request, now, answer)
      : renderedRecord(db, request, now, { status: answer.status, body: JSON.stringify(answer.body) } satisfies StoredResponse);
  let results: unknown[];
  try {
    results = await db.batch([dropExpiredRecord(db, request, now), ...statements, record] as unknown as [BatchItem<"sqlite">]);
  } catch (err) {
    const existing = await findLiveRecord(db, request, Date.now());
    if (!existing) throw err;
    throw answeredBefore(request, existing);
  }
  const recorded = results.at(-1) as { meta?: { changes?: number } } | undefined;
  if ((recorded?.meta?.changes ?? 0) > 0 || !("resource" in answer)) request.state = "committed";
  return results.slice(1, -1) as unknown as BatchResponse<T>;
};

/**
 * `commit` for a write with events: [marks before] statements [mark, events] record [clear]. The
 * record asks the mark whether the write applied, since `changes()` then speaks of the last event.
 */
const commitWithEvents = async <T extends BatchItem<"sqlite">[]>(
  c: Context<AppEnv>,
  statements: readonly [...T],
  answer: Answer,
  list: readonly CommitEvent[],
): Promise<BatchResponse<T>> => {
  const { db } = c.var;
  const request = c.var.idempotency;
  const now = Date.now();
  const events = writeEvents(db, list, now);
  const head = request ? [dropExpiredRecord(db, request, now), ...events.before] : events.before;
  const record = !request
    ? []
    : "resource" in answer
      ? [snapshotRecord(db, request, now, answer, events.applied)]
      : [renderedRecord(db, request, now, { status: answer.status, body: JSON.stringify(answer.body) } satisfies StoredResponse)];
  const batch = [...head, ...statements, ...events.after, ...record, events.clear];
  let results: unknown[];
  try {
    results = await db.batch(batch as unknown as [BatchItem<"sqlite">]);
  } catch (err) {
    const existing = request ? await findLiveRecord(db, request, Date.now()) : undefined;
    if (!request || !existing) throw err;
    throw answeredBefore(request, existing);
  }
  const changed = (i: number) => ((results[i] as { meta?: { changes?: number } } | undefined)?.meta?.changes ?? 0) > 0;
  const firstEvent = head.length + statements.length + 1;
  const written = events.ids.filter((_, i) => changed(firstEvent + i));
  if (request && (changed(firstEvent - 1) || !("resource" in answer))) request.state = "committed";
  if (written.length > 0) c.executionCtx.waitUntil(enqueueDispatch(c.env.WEBHOOK_QUEUE, written));
  return results.slice(head.length, head.length + statements.length) as unknown as BatchResponse<T>;
};

/** The request is answered by the key's record: replayed if it is the same request, else 422. */
export const answeredBefore = (request: IdempotentRequest, record: IdempotencyRecord): Error => {
  if (record.fingerprint !== request.fingerprint) {
    request.state = "rejected";
    return keyReused();
  }
  request.state = "replayed";
  return new ReplayInstead(replayResponse(JSON.parse(record.response) as StoredResponse));
};

export const keyReused = () =>
  new ApiError(
    "idempotency_key_reused",
    "This Idempotency-Key was already used with another method, path or body; use a new key for a new request",
    { param: "Idempotency-Key" },
  );

/** Thrown to answer a request with an earlier request's stored response; rendered by the error hook as is. */
export class ReplayInstead extends Error {
  constructor(readonly response: Response) {
    super("answered by an earlier request with the same Idempotency-Key");
    this.name = "ReplayInstead";
  }
}
