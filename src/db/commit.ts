import type { SQL } from "drizzle-orm";
import type { Context } from "hono";
import type { BatchItem, BatchResponse } from "drizzle-orm/batch";
import { ApiError } from "../errors/api-error";
import {
  compositeRecord,
  dropExpiredRecord,
  findLiveRecord,
  type IdempotencyRecord,
  type IdempotentRequest,
  renderedRecord,
  snapshotRecord,
} from "../idempotency/idempotency";
import type { CompositeKind, ResourceKind } from "../idempotency/resources";
import { undispatchedIn } from "../events/event-statement";
import { enqueueDispatch } from "../events/outbox";
import { type CommitEvent, writeEvents } from "../events/write-events";
import { opened, replayResponse, type SealedResponse, type StoredResponse, storable } from "../idempotency/stored-response";
import type { AppEnv } from "../lib/types";

/**
 * What a write answers when it applies: the resource row `id` of `resource` (snapshotted in the
 * batch, replayed through its serializer), a body computed before it (for a request with no
 * statements, or whose statements `always` apply: plain inserts; nothing then decides whether it
 * applied), or a `composite` answer about many rows
 * (`elements`: SQL for the JSON it renders from, snapshotted in the batch; such a write always applies).
 */
type Answer =
  | { status: 200 | 201 | 202; resource: ResourceKind; id: string }
  | { status: 200 | 201 | 202; body: unknown; always?: true }
  | { status: 200 | 201 | 202; composite: CompositeKind; elements: SQL };

/**
 * The one write path: a request's statements commit in ONE D1 batch (one round trip, atomic),
 * together with its Idempotency-Key record when it has a key, so that no crash can separate a write
 * from the answer a retry will get. The decisive statement goes last: the record is written only if
 * that statement changed something. When it did not, the handler finds out why (reads are fine on
 * that path: writeExplained) and throws; the idempotency middleware records that answer instead.
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
  const { db } = c.var;
  const request = c.var.idempotency;
  const list = options.events ?? [];
  // A body answer has no statement to decide whether it applied: it is for a request that writes
  // nothing but its answer (a test send), whose record is written unconditionally.
  if ("body" in answer && statements.length > 0 && !answer.always) throw new Error("commit: a body answer is for statements that always apply");
  // A sealed scope's records are rendered answers: a snapshot is built in SQL, where nothing seals it.
  if (request?.sealer && !("body" in answer)) throw new Error("commit: a sealed scope records body answers only");
  if (!request && list.length === 0) {
    if (statements.length === 0) return [] as unknown as BatchResponse<T>;
    return (await db.batch(statements as unknown as [BatchItem<"sqlite">])) as unknown as BatchResponse<T>;
  }
  const now = Date.now();
  // With events: [marks before] statements [mark?, events] record [clear?] (src/events/write-events.ts).
  const events = list.length > 0 ? writeEvents(db, list, now) : undefined;
  const head = [...(request ? [dropExpiredRecord(db, request, now)] : []), ...(events?.before ?? [])];
  const record = !request
    ? []
    : "resource" in answer
      ? [snapshotRecord(db, request, now, answer, events?.applied)]
      : "composite" in answer
        ? [compositeRecord(db, request, now, answer)]
        : [renderedRecord(db, request, now, await storable({ status: answer.status, body: JSON.stringify(answer.body) }, request.sealer))];
  const batch = [...head, ...statements, ...(events?.after ?? []), ...record, ...(events?.clear ?? [])];
  let results: unknown[];
  try {
    results = await db.batch(batch as unknown as [BatchItem<"sqlite">]);
  } catch (err) {
    const existing = request ? await findLiveRecord(db, request, Date.now()) : undefined;
    if (!request || !existing) throw err;
    throw await answeredBefore(request, existing);
  }
  // A statement's result: rows when it returns them (an event), else its meta.
  const changed = (i: number) => {
    const result = results[i];
    return Array.isArray(result) ? result.length > 0 : ((result as { meta?: { changes?: number } } | undefined)?.meta?.changes ?? 0) > 0;
  };
  // Right after the statements: the mark or the first event (with events) or the record (without)
  // says whether the write applied.
  const decisive = head.length + statements.length;
  if (request && (changed(decisive) || !("resource" in answer))) request.state = "committed";
  const written = events?.ids.filter((_, i) => undispatchedIn(results[decisive + events.eventsAt + i])) ?? [];
  if (written.length > 0) c.executionCtx.waitUntil(enqueueDispatch(c.env.WEBHOOK_QUEUE, written));
  return results.slice(head.length, decisive) as unknown as BatchResponse<T>;
};

/** What a write's explanation returns when the state it read does not explain why nothing was written. */
export const AGAIN: unique symbol = Symbol("write again");

const WRITE_TRIES = 8;

/**
 * A conditional write that wrote nothing is explained by a read after its batch, which can see a
 * later state: another request's write may have come between (a subscriber's email freed, a value
 * changed back). `attempt` commits, and when nothing was written reads why; if the state it reads
 * does not explain it (no conflict, and the values given are not all there), the reason the write
 * was refused has gone, and it returns AGAIN: the write is tried again on the state as it is now.
 * So every answer is one some order of the requests gives: the write applied, or refused for a
 * reason that held, or a no-op on values that were there. Only under contention is there a second
 * round trip.
 */
export const writeExplained = async <R>(attempt: () => Promise<R | typeof AGAIN>): Promise<R> => {
  for (let i = 0; i < WRITE_TRIES; i++) {
    const result = await attempt();
    if (result !== AGAIN) return result;
  }
  throw new Error(`the resource changed under the write ${WRITE_TRIES} times in a row`);
};

/** The request is answered by the key's record: replayed if it is the same request, else 422. */
export const answeredBefore = async (request: IdempotentRequest, record: IdempotencyRecord): Promise<Error> => {
  if (record.fingerprint !== request.fingerprint) {
    request.state = "rejected";
    return keyReused();
  }
  request.state = "replayed";
  return new ReplayInstead(replayResponse(await opened(JSON.parse(record.response) as StoredResponse | SealedResponse, request.sealer)));
};

export const keyReused = () =>
  new ApiError(
    "idempotency_key_reused",
    "This Idempotency-Key was already used with another method, path or body (bodies are compared byte for byte: no body and {} differ, as do two spacings of one JSON); use a new key for a new request",
    { param: "Idempotency-Key" },
  );

/** Thrown to answer a request with an earlier request's stored response; rendered by the error hook as is. */
export class ReplayInstead extends Error {
  constructor(readonly response: Response) {
    super("answered by an earlier request with the same Idempotency-Key");
    this.name = "ReplayInstead";
  }
}
