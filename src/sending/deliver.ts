import { TemplateError } from "../content";
import { backoffSeconds } from "../lib/backoff";
import { log } from "../lib/log";
import { ByteBudget, type InvocationBudget, Turns } from "../lib/byte-budget";
import { sha256Hex } from "../lib/crypto";
import { type BatchMember, type Settlement, settleBatch, settleExpiredKey, settleWithoutProvider } from "./batch-settlement";
import { type Composer, composeEmail } from "./compose";
import { type DeliveryResults, lookBeforeRequest, type QueuedDelivery, queuedChunk, recordDeliveryResults, hedgeStillAskable, withdrawRequestNumber } from "./deliveries.repository";
import type { BatchAnswer, DeliveryError, Integration, OutboundEmail } from "./integrations/types";
import { MAX_QUEUE_DELAY_SECONDS } from "./messages";
import { markOperationWaiting, loadOperationState } from "./send.repository";
import { type Attempt, chunkSizeOf, enqueue, integrationFor, loadComposer, type StepDeps, type StepResult, yieldToEventLoop } from "./step";

// The delivery step of a send: one chunk of queued deliveries handed to the integration as one
// provider batch, under the batch's idempotency key, and what came of it recorded in one write.

/** Messages rendered between two yields to the isolate's other work (a few ms of CPU). */
const RENDERS_BETWEEN_YIELDS = 10;

/**
 * Bytes of rendered mail (subject, html and text, in UTF-8 and JSON-escaped, as the request carries them) one batch
 * carries at most: a request's body and the step's memory stay bounded whatever the template renders
 * to (a message may be 3 MiB of characters; an isolate has 128 MB). The first message always goes;
 * those that would pass the bound go in a batch of their own, as members held back do.
 */
export const MAX_BATCH_BYTES = 8 * 1024 * 1024;

/** The UTF-8 length of `text` as a JSON string's content (its quotes, backslashes and controls escaped), without encoding it. */
export const jsonBytes = (text: string): number => {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff) {
      // A surrogate pair: 4 bytes for its 2 units.
      bytes += 2;
      i++;
    } else if (code >= 0x800) bytes += 2;
    else if (code >= 0x80) bytes += 1;
    else if (code === 0x22 || code === 0x5c || code === 0x08 || code === 0x0c || code === 0x0a || code === 0x0d || code === 0x09) bytes += 1;
    else if (code < 0x20) bytes += 5;
  }
  return bytes;
};

/**
 * Rendered mail the delivery steps of one queue batch hold at once, counted as MAX_BATCH_BYTES
 * counts it: the queue runs up to 25 steps side by side, each holding its batch (and the request's
 * body made from it) until its request is answered, which for large newsletters would pass an
 * isolate's 128 MB. Steps render one at a time, taking from this budget as they go
 * (src/lib/byte-budget.ts); a full batch and half another fit, and a batch of small messages never
 * waits. The isolate's heap holds some four times what the budget counts (the rendered strings, each
 * request's JSON body and its bytes): three full batches (24 MiB) reached 107 to 113 MB of the 128.
 */
export const HELD_MAIL_BYTES = (3 * MAX_BATCH_BYTES) / 2;

/** The budget one queue batch's delivery steps share (per invocation: InvocationBudget says why). */
export const deliveryBudget = (): InvocationBudget => ({ bytes: new ByteBudget(HELD_MAIL_BYTES), turns: new Turns() });

/** Provider attempts per delivery before a retryable error (429, 5xx, network) fails it for good. */
export const MAX_DELIVERY_ATTEMPTS = 5;

const recipientInactive: DeliveryError = {
  code: "recipient_inactive",
  message: "The subscriber was no longer active when the delivery's turn came; nothing was sent",
};

const recipientChanged: DeliveryError = {
  code: "recipient_changed",
  message: "The subscriber's address changed after the delivery was created; nothing was sent to the old one",
};

const renderFailed = (err: TemplateError): DeliveryError => ({
  code: "render_failed",
  message: `The ${err.field} template could not be rendered for this subscriber: ${err.message}`,
});

const notConfigured = (slug: string): DeliveryError => ({
  code: "integration_not_configured",
  message: `The ${slug} integration is not configured in this deployment`,
});

export const deliver = async (deps: StepDeps, operationId: string, from: string | null, to: string | null, attempt: Attempt): Promise<StepResult> => {
  const op = await loadOperationState(deps.d1, operationId);
  if (!op || op.status !== "running") return;
  const integration = integrationFor(deps, op.deliveryIntegration);
  const chunk = chunkSizeOf(integration);
  // The first chunk with queued rows in the range, as the fan-out planned it (so its key is the one
  // every earlier request for it used, whatever range this message names).
  const { rows, more, after } = await queuedChunk(deps.d1, op.campaignId, from, to, chunk + 1);
  if (rows.length === 0) return;
  const composer = integration ? await loadComposer(deps, op.campaignId) : undefined;
  // The operation's campaign was just read: a missing one is a fault, retried and then dead-lettered
  // (which fails the operation), never a message acked with its rows left queued.
  if (integration && !composer) throw new Error(`campaign ${op.campaignId} of operation ${op.id} has no message context`);

  const latest = Math.max(0, ...rows.map((row) => row.askedSeq));
  const settled = !integration || !composer
    ? { settlements: settleWithoutProvider(rows, notConfigured(op.deliveryIntegration)), lastSeq: latest }
    : keyExpired(integration, rows, deps.now())
      ? { settlements: settleExpiredKey(rows), lastSeq: latest }
      : await handOver(deps, integration, composer, op.id, rows, latest);
  if ("deferred" in settled) {
    // Nothing was handed over (no provider slot soon enough): the rows stay as they are, and a fresh
    // message asks again later, so waiting for the provider's rate costs no attempt and no retry of
    // this message. A copy left by a crash before the ack reads the same rows and asks under the same key.
    await enqueue(deps, [{ type: "deliver", operation_id: op.id, from, to }], Math.min(settled.deferred.retryAfterSeconds, MAX_QUEUE_DELAY_SECONDS));
    await markOperationWaiting(deps.d1, op.id, deps.now());
    return;
  }

  const results: DeliveryResults = { sent: [], failed: [], retry: [], held: [] };
  settled.settlements.forEach((s, i) => {
    const id = rows[i]?.id;
    if (id === undefined) return;
    if (s.kind === "sent") results.sent.push({ id, providerMessageId: s.providerMessageId });
    else if (s.kind === "failed") results.failed.push({ id, error: s.error, attempted: s.attempted });
    else if (s.kind === "retry") results.retry.push({ id, error: s.error, attempted: s.attempted });
    else results.held.push(id);
  });
  await recordDeliveryResults(deps.d1, op, results, deps.now(), { ids: rows.map((row) => row.id), seq: settled.lastSeq });

  // The batch is asked again by the retried message (its rows still queued, so under the same key).
  if (results.retry.length > 0) {
    const retryAfterSeconds = Math.max(settled.retryAfterSeconds ?? 0, backoffSeconds(attempt.attempts));
    // The provider's trouble, not the service's: a warning saying what it answered (the deliveries keep it too).
    log("warn", "delivery_retry", { operation_id: op.id, deliveries: results.retry.length, attempt: attempt.attempts, retry_after_seconds: retryAfterSeconds, error: results.retry[0]?.error });
    return { retryAfterSeconds };
  }
  // Settled, with members held for a batch of their own: the same range again reads only them.
  if (results.held.length > 0) await enqueue(deps, [{ type: "deliver", operation_id: op.id, from, to }]);
  // The range holds more than this chunk (the sweeper's whole-campaign restart, say): go on after the
  // range's first queued row once it was taken (every other stood after it), else from the range's start.
  else if (more) await enqueue(deps, [{ type: "deliver", operation_id: op.id, from: after, to }]);
};

/** Whether the chunk's first request is older than the integration keeps a batch's key (src/db/schema.ts, first_asked_at). */
const keyExpired = (integration: Integration, rows: QueuedDelivery[], now: number): boolean => {
  const firstAsked = Math.min(...rows.map((row) => row.firstAskedAt ?? Infinity));
  return integration.keyLifetimeMs !== undefined && now - firstAsked >= integration.keyLifetimeMs;
};

/**
 * The provider's key for a chunk: its operation, first and last delivery, and a digest of every
 * delivery in it. A retried or redelivered message reads the same queued rows, so it asks under the
 * same key; a chunk whose rows changed (some settled since) is another batch with another key.
 */
const batchKey = async (operationId: string, deliveryIds: string[]): Promise<string> => {
  const digest = (await sha256Hex(deliveryIds.join(","))).slice(0, 16);
  return `${operationId}:${deliveryIds[0] ?? ""}..${deliveryIds.at(-1) ?? ""}:${digest}`;
};

/**
 * Renders the chunk's messages and hands the sendable ones to the integration as one batch; then
 * settles every row of the chunk from the answer (src/sending/batch-settlement.ts). A row not handed
 * over (its subscriber left or moved, its template fails) stays part of the batch and its key until
 * the batch settles, so a retry reads the same rows and asks under the same key. Once a request of
 * the batch has left, the key stands for its members: the batch only ever asks for those of its
 * latest request (fewer, never more).
 */
const handOver = async (
  { d1, now, budget = deliveryBudget() }: Pick<StepDeps, "d1" | "now" | "budget">,
  integration: Integration,
  composer: Composer,
  operationId: string,
  rows: QueuedDelivery[],
  latest: number,
): Promise<{ deferred: Extract<BatchAnswer, { kind: "deferred" }> } | { settlements: Settlement[]; lastSeq: number; retryAfterSeconds?: number }> => {
  const local = new Map<string, DeliveryError>();
  const emails: OutboundEmail[] = [];
  let bytes = 0;
  // Before the batch's first request, the batch is what fits in MAX_BATCH_BYTES; after it, its
  // members are fixed (they fitted then).
  let full = false;
  // Taken from the queue batch's budget (given back once the request is answered, or on an error).
  let heldBytes = 0;
  const { bytes: heldMail, turns } = budget;
  const endTurn = await turns.acquire();
  try {
    for (const [i, row] of rows.entries()) {
      // Unsubscribed (or bounced) since the fan-out created this delivery: never mail them; nor
      // an old address (the subscriber's is another now), with the new one's data.
      if (!row.active) local.set(row.id, recipientInactive);
      else if (!row.sameAddress) local.set(row.id, recipientChanged);
      // Not in the batch's latest request: never asked under its key again. Past the bound: left for
      // a batch of its own (never asked under this key either).
      else if (row.askedSeq < latest || full) continue;
      else {
        if (i > 0 && i % RENDERS_BETWEEN_YIELDS === 0) await yieldToEventLoop();
        let email: OutboundEmail;
        try {
          email = await composeEmail(composer, { id: row.subscriberId, email: row.email, ...row.fields }, row.id);
        } catch (err) {
          if (!(err instanceof TemplateError)) throw err;
          local.set(row.id, renderFailed(err));
          continue;
        }
        const size = jsonBytes(email.subject) + jsonBytes(email.html ?? "") + jsonBytes(email.text);
        if (latest === 0 && emails.length > 0 && bytes + size > MAX_BATCH_BYTES) {
          full = true;
          continue;
        }
        bytes += size;
        heldBytes += await heldMail.take(size);
        emails.push(email);
      }
    }
  } catch (err) {
    heldMail.give(heldBytes);
    throw err;
  } finally {
    endTurn();
  }

  // Right before each request leaves (it may wait for the provider's rate first), one D1 batch looks
  // at consent again and numbers the request's members (deliveries.asked_seq).
  const askedSeq = new Map(rows.map((row) => [row.id, row.askedSeq]));
  const chunkIds = rows.map((row) => row.id);
  let lastSeq: number | undefined;
  // The last request before the one the latest look numbered, for a withdrawal to go back to.
  let beforeLook: number | undefined;
  const beforeRequest = async (ids: string[]) => {
    const look = await lookBeforeRequest(d1, ids, chunkIds, now());
    for (const gone of look.gone) local.set(gone.id, gone.active ? recipientChanged : recipientInactive);
    // Every row's number as the look left it (another runner may have numbered some since the read).
    for (const [id, seq] of look.seqs) askedSeq.set(id, seq);
    if (look.seq !== undefined) {
      beforeLook = lastSeq;
      lastSeq = look.seq;
    }
    // Those no longer to be mailed, and those another runner of this chunk has already left out.
    return new Set([...look.gone.map((gone) => gone.id), ...look.behind]);
  };
  // The request numbered last did not leave: its number is withdrawn, unless another runner went on since.
  const requestWithdrawn = async () => {
    if (lastSeq === undefined || lastSeq === beforeLook) return;
    const seq = lastSeq;
    const back = await withdrawRequestNumber(d1, chunkIds, seq);
    if (back.length === 0) return;
    for (const id of back) askedSeq.set(id, seq - 1);
    lastSeq = beforeLook;
  };
  let answer: BatchAnswer;
  try {
    answer =
      emails.length === 0
        ? { kind: "unasked" }
        : await integration.sendBatch(emails, await batchKey(operationId, chunkIds), {
            beforeRequest,
            requestWithdrawn,
            // A hedge asks for the request the last look numbered, while all of it is still to be asked.
            beforeHedge: async (ids) => lastSeq !== undefined && hedgeStillAskable(d1, ids, chunkIds, lastSeq),
          });
  } finally {
    heldMail.give(heldBytes);
  }
  if (answer.kind === "deferred") return { deferred: answer };

  const handedOver = new Set(emails.map((email) => email.deliveryId));
  const members = rows.map((row): BatchMember => {
    const seq = askedSeq.get(row.id) ?? 0;
    return {
      id: row.id,
      askedSeq: seq,
      // An integration that takes no look (the sandbox) numbers no request: its last held every email handed over.
      inLastRequest: lastSeq === undefined ? handedOver.has(row.id) && !local.has(row.id) : seq === lastSeq,
      attempts: row.attempts,
      local: local.get(row.id),
    };
  });
  return {
    settlements: settleBatch(members, answer, lastSeq, MAX_DELIVERY_ATTEMPTS),
    lastSeq: lastSeq ?? latest,
    retryAfterSeconds: answer.kind === "retry" ? answer.retryAfterSeconds : undefined,
  };
};
