import { TemplateError } from "../content";
import { backoffSeconds } from "../lib/backoff";
import { sha256Hex } from "../lib/crypto";
import { newId } from "../lib/ids";
import { signerFor } from "../lib/signing";
import { type Composer, composeEmail, composerFor } from "./compose";
import { resolveIntegration, isIntegrationSlug } from "./integrations";
import { type DeliveryError, type Integration, type OutboundEmail, outcomeUnknown, type SendOutcome } from "./integrations/types";
import { MAX_QUEUE_DELAY_SECONDS, type SendMessage } from "./messages";
import {
  advanceFanout,
  type Candidate,
  deliveryStatements,
  type DeliveryResults,
  type NewDelivery,
  type QueuedDelivery,
  queuedChunk,
  lookBeforeRequest,
  recipientWindow,
  recordDeliveryResults,
} from "./deliveries.repository";
import {
  loadMessageContext,
  loadOperationState,
  markOperationRunning,
  markOperationWaiting,
  type OperationState,
} from "./send.repository";

/** The campaign's composer, its templates parsed once for the whole queue message. */
const loadComposer = async (deps: StepDeps, campaignId: string): Promise<Composer | undefined> => {
  const context = await loadMessageContext(deps.d1, campaignId);
  return context && composerFor(context, deps.env, signerFor(deps.env));
};

const RENDER_FAILED = "render_failed";

const renderFailed = (err: TemplateError): DeliveryError => ({
  code: RENDER_FAILED,
  message: `The ${err.field} template could not be rendered for this subscriber: ${err.message}`,
});

/** Active subscribers scanned per fan-out window (matching or not): one read, one batched insert. */
export const FANOUT_WINDOW = 500;
/**
 * Windows one fan-out message works through before enqueueing the next: fewer queue hops and
 * operation reads per recipient, while a message still does a small, bounded amount of work
 * (about 15 D1 and queue calls, well under a second).
 */
export const FANOUT_WINDOWS_PER_MESSAGE = 4;
/** Provider attempts per delivery before a retryable error (429, 5xx, network) fails it for good. */
export const MAX_DELIVERY_ATTEMPTS = 5;
const FALLBACK_CHUNK = 25;

export type StepDeps = { d1: D1Database; queue: Queue; env: Env; now: () => number };
/** What the consumer does with the message once the step returns: ack, or retry after a delay. */
export type StepResult = { retryAfterSeconds: number } | undefined;

type Attempt = { attempts: number };

export const runStep = (deps: StepDeps, message: SendMessage, attempt: Attempt): Promise<StepResult> => {
  switch (message.type) {
    case "start":
      return start(deps, message.operation_id);
    case "fanout":
      return fanout(deps, message.operation_id, message.after, attempt);
    case "deliver":
      return deliver(deps, message.operation_id, message.from, message.to, attempt);
  }
};

const send = (deps: StepDeps, messages: SendMessage[]) =>
  messages.length === 0 ? Promise.resolve() : deps.queue.sendBatch(messages.map((body) => ({ body })));

const integrationFor = (deps: StepDeps, slug: string): Integration | undefined =>
  isIntegrationSlug(slug) ? resolveIntegration(slug, deps.env) : undefined;

const start = async (deps: StepDeps, operationId: string): Promise<StepResult> => {
  const op = await loadOperationState(deps.d1, operationId);
  // Gone (e.g. deleted data) or already over: nothing left to do for this message.
  if (!op || op.status === "succeeded" || op.status === "failed") return;
  if (op.status === "queued") {
    const wait = Math.ceil(((op.startAt ?? 0) - deps.now()) / 1000);
    if (wait > 0) {
      // Woken early (a sweep ahead of time): sleep again rather than start a scheduled send early.
      await deps.queue.send({ type: "start", operation_id: op.id } satisfies SendMessage, {
        delaySeconds: Math.min(wait, MAX_QUEUE_DELAY_SECONDS),
      });
      return;
    }
    if (!(await markOperationRunning(deps.d1, op, deps.now()))) return;
  } else if (op.fanoutCursor !== null || op.fanoutDone) {
    // A duplicate start of a fan-out that is under way: its own chain carries on.
    return;
  }
  // First start, or a duplicate of one whose first fan-out message may never have been sent.
  await send(deps, [{ type: "fanout", operation_id: op.id, after: null }]);
};

/**
 * Works through up to FANOUT_WINDOWS_PER_MESSAGE windows from `after`, each committed on its own
 * (deliveries, then the position), and hands the rest to the next message. Every window is a
 * bounded unit of work, so a message that dies part-way has lost nothing: its redelivery resumes
 * from the last committed position.
 */
const fanout = async (deps: StepDeps, operationId: string, after: string | null, attempt: Attempt): Promise<StepResult> => {
  const op = await loadOperationState(deps.d1, operationId);
  if (!op || op.status !== "running" || op.fanoutDone) return;
  if (op.fanoutCursor !== after) {
    // Another copy of this message already moved the position on. A redelivered copy may be the
    // one whose follow-up was never enqueued (crash after commit): resume from where it stands.
    if (attempt.attempts > 1) await send(deps, [{ type: "fanout", operation_id: op.id, after: op.fanoutCursor }]);
    return;
  }
  const integration = integrationFor(deps, op.deliveryIntegration);
  // Only a fan-out that settles deliveries as it creates them hands messages over (renders) itself.
  const composer = integration?.settleAtCreation ? await loadComposer(deps, op.campaignId) : undefined;
  let position = after;
  let read = recipientWindow(deps.d1, op, position, FANOUT_WINDOW);
  for (let i = 0; i < FANOUT_WINDOWS_PER_MESSAGE; i++) {
    const candidates = await read;
    // The next window's read goes out now, so it overlaps this window's rendering and writes (a read
    // changes nothing: if this window does not advance, it is dropped). Its subscribers all sort
    // after this window's, whatever this window writes.
    if (candidates.length === FANOUT_WINDOW && i + 1 < FANOUT_WINDOWS_PER_MESSAGE) {
      read = recipientWindow(deps.d1, op, candidates.at(-1)?.id ?? position, FANOUT_WINDOW);
      read.catch(() => undefined); // awaited (and its error thrown) on the next turn, if there is one
    }
    const window = await fanoutWindow(deps, op, integration, composer, position, candidates, attempt);
    // Not advanced: a duplicate of this message got there first and carries on from there.
    if (!window.advanced || window.done) return;
    position = window.last;
  }
  await send(deps, [{ type: "fanout", operation_id: op.id, after: position }]);
};

/** One window (`window`: the next FANOUT_WINDOW active subscribers after `after`): its deliveries, then the position. */
const fanoutWindow = async (
  deps: StepDeps,
  op: OperationState,
  integration: Integration | undefined,
  composer: Composer | undefined,
  after: string | null,
  window: Candidate[],
  attempt: Attempt,
): Promise<{ advanced: boolean; done: boolean; last: string | null }> => {
  const done = window.length < FANOUT_WINDOW;
  const last = window.at(-1)?.id ?? after;
  const now = deps.now();
  const matched = window.filter((c) => c.matches);
  const chunk = integration?.chunkSize ?? FALLBACK_CHUNK;
  // Each delivery records the last member of its provider batch (see queuedChunk).
  const chunkEndOf = (i: number) => matched[Math.min(Math.floor(i / chunk) * chunk + chunk - 1, matched.length - 1)]?.id;
  const settle = integration?.settleAtCreation;
  // Rows settled at creation (the sandbox) are never read by chunk: they get no chunk_end, and their
  // JSON stays as small as it was.
  const rows: NewDelivery[] = matched.map((c, i) => ({ id: newId("delivery", now), subscriberId: c.id, email: c.email, ...(!settle && { chunkEnd: chunkEndOf(i) }) }));
  // A delivery settled at creation is handed over here: its message is rendered as any other
  // (what the sandbox measures is what a provider send costs). One that cannot be rendered is
  // created queued instead, and the delivery step records why it failed.
  let unsettled: typeof rows = [];
  let settled = rows;
  if (settle && composer) {
    const rendered = await Promise.all(
      matched.map((c, i) =>
        composeEmail(composer, { id: c.id, email: c.email, ...c.fields }, rows[i]?.id ?? "").then(
          () => true,
          (err: unknown) => {
            if (err instanceof TemplateError) return false;
            throw err;
          },
        ),
      ),
    );
    settled = rows.filter((_, i) => rendered[i]);
    unsettled = rows.flatMap((row, i) => (rendered[i] ? [] : [{ ...row, chunkEnd: chunkEndOf(i) }]));
  }
  const deliveries = deliveryStatements(deps.d1, op, now, { settled, queued: unsettled, settle });

  // Deliveries settled at creation need no work: they and the position commit in one batch.
  const needsWork = (!settle && (matched.length > 0 || attempt.attempts > 1)) || unsettled.length > 0;
  if (!needsWork) {
    const advanced = await advanceFanout(deps.d1, op, after, last, done, deps.now(), deliveries);
    return { advanced, done, last };
  }
  if (deliveries.length > 0) await deps.d1.batch(deliveries);

  // Delivery work is enqueued before the position moves: if this invocation dies in between, the
  // redelivered message redoes this window and enqueues it again, so no delivery is left without
  // work. A redelivery enqueues even when nothing matches now, in case an earlier try created rows.
  const bounds: (string | null)[] = [];
  for (let i = chunk - 1; i < matched.length - 1; i += chunk) bounds.push(matched[i]?.id ?? null);
  bounds.push(done ? null : last);
  let from = after;
  const work: SendMessage[] = bounds.map((to) => {
    const message: SendMessage = { type: "deliver", operation_id: op.id, from, to };
    from = to;
    return message;
  });
  for (let i = 0; i < work.length; i += 100) await send(deps, work.slice(i, i + 100));

  const advanced = await advanceFanout(deps.d1, op, after, last, done, deps.now());
  return { advanced, done, last };
};

const recipientInactive: DeliveryError = {
  code: "recipient_inactive",
  message: "The subscriber was no longer active when the delivery's turn came; nothing was sent",
};

const batchDropped: DeliveryError = {
  code: "batch_dropped",
  message: "Left out of a later request of its batch than one it was in: it waits for what the provider answers",
};

const batchHeld: DeliveryError = {
  code: "batch_held",
  message: "Not in the requests already made for its batch: it is sent in a batch of its own once that one settles",
};

const recipientChanged: DeliveryError = {
  code: "recipient_changed",
  message: "The subscriber's address changed after the delivery was created; nothing was sent to the old one",
};

const noOutcome: DeliveryError = { code: "provider_no_answer", message: "The provider gave no outcome for this message" };

const notConfigured = (slug: string): DeliveryError => ({
  code: "integration_not_configured",
  message: `The ${slug} integration is not configured in this deployment`,
});

const deliver = async (
  deps: StepDeps,
  operationId: string,
  from: string | null,
  to: string | null,
  attempt: Attempt,
): Promise<StepResult> => {
  const op = await loadOperationState(deps.d1, operationId);
  if (!op || op.status !== "running") return;
  const integration = integrationFor(deps, op.deliveryIntegration);
  const chunk = integration?.chunkSize ?? FALLBACK_CHUNK;
  // The first chunk with queued rows in the range, as the fan-out planned it (so its key is the one
  // every earlier request for it used, whatever range this message names).
  const { rows, chunkEnd, more } = await queuedChunk(deps.d1, op.campaignId, from, to, chunk + 1);
  if (rows.length === 0) return;
  const composer = integration ? await loadComposer(deps, op.campaignId) : undefined;
  // The operation's campaign was just read: a missing one is a fault, retried and then dead-lettered
  // (which fails the operation), never a message acked with its rows left queued.
  if (integration && !composer) throw new Error(`campaign ${op.campaignId} of operation ${op.id} has no message context`);

  const outcomes: SendOutcome[] =
    integration && composer
      ? await handOver(deps.d1, integration, composer, op.id, rows)
      : rows.map(() => ({ kind: "failed", error: notConfigured(op.deliveryIntegration) }));
  const deferred = outcomes.find((o): o is Extract<SendOutcome, { kind: "deferred" }> => o.kind === "deferred");
  if (deferred) {
    // Nothing was handed over (no provider slot soon enough): the rows stay as they are, and a fresh
    // message asks again later, so waiting for the provider's rate costs no attempt and no retry of
    // this message. A copy left by a crash before the ack reads the same rows and asks under the same key.
    await deps.queue.send({ type: "deliver", operation_id: op.id, from, to } satisfies SendMessage, {
      delaySeconds: Math.min(deferred.retryAfterSeconds, MAX_QUEUE_DELAY_SECONDS),
    });
    await markOperationWaiting(deps.d1, op.id, deps.now());
    return;
  }

  const results: DeliveryResults = { sent: [], failed: [], retry: [] };
  let retryAfter = 0;
  const outcomeAt = (i: number): SendOutcome => outcomes[i] ?? { kind: "retry", error: noOutcome };
  // The batch gives up once a row that was in its request has used its last attempt: then the rows
  // that sat its retries out settle with it (failed, for the reason they were left out), so no row
  // asked under this batch's key is ever asked under another. Held rows (never asked) go on.
  const givesUp = rows.some((row, i) => {
    const outcome = outcomeAt(i);
    return outcome.kind === "retry" && outcome.leftOut !== true && row.attempts + 1 >= MAX_DELIVERY_ATTEMPTS;
  });
  rows.forEach((row, i) => {
    const outcome = outcomeAt(i);
    // Left out of the request (held, or skipped while its batch is retried): it costs no attempt.
    const costsAttempt = !(outcome.kind === "retry" && outcome.leftOut === true);
    const held = outcome.kind === "retry" && outcome.error.code === batchHeld.code;
    if (outcome.kind === "sent") results.sent.push({ id: row.id, providerMessageId: outcome.providerMessageId });
    else if (outcome.kind === "failed" || (givesUp && !held)) {
      // Attempted: handed to the integration (not skipped as inactive, moved, unrenderable or unconfigured).
      const attempted = integration !== undefined && costsAttempt && !LEFT_OUT.has(outcome.error.code);
      // A dropped row of a batch that gives up: any of its requests may have been taken.
      const error = outcome.error.code === batchDropped.code ? outcomeUnknown : outcome.error;
      results.failed.push({ id: row.id, error, attempted });
    } else {
      results.retry.push({ id: row.id, error: outcome.error, attempted: costsAttempt });
      retryAfter = Math.max(retryAfter, outcome.retryAfterSeconds ?? 0);
    }
  });
  await recordDeliveryResults(deps.d1, op, results, deps.now());

  // Still-queued rows of this range are picked up again by the retried message.
  if (results.retry.length > 0) return { retryAfterSeconds: Math.max(retryAfter, backoffSeconds(attempt.attempts)) };
  // The range holds more than this chunk (the sweeper's whole-campaign restart, say): continue after it.
  if (more) await send(deps, [{ type: "deliver", operation_id: op.id, from: chunkEnd ?? rows.at(-1)?.subscriberId ?? from, to }]);
};

/**
 * The provider's key for a chunk: its operation, first and last delivery, and a digest of every
 * delivery in it. A retried or redelivered message reads the same queued rows, so it asks under the
 * same key; a chunk whose rows changed (some settled since) is another batch with another key.
 */
export const batchKey = async (operationId: string, deliveryIds: string[]): Promise<string> => {
  const digest = (await sha256Hex(deliveryIds.join(","))).slice(0, 16);
  return `${operationId}:${deliveryIds[0] ?? ""}..${deliveryIds.at(-1) ?? ""}:${digest}`;
};

/** Errors recorded for a row that was left out of its batch's request (never handed over). */
const LEFT_OUT = new Set([recipientInactive.code, recipientChanged.code, RENDER_FAILED, outcomeUnknown.code]);

/**
 * Renders the chunk's messages and hands the sendable ones to the integration as one batch. A row
 * skipped here (subscriber no longer active, template error) is still part of the batch's key, and
 * is failed only together with an answer for the batch: while the batch is being retried it stays
 * queued, so the retry reads the same rows and asks under the same key. A subscriber who left while
 * the batch was being retried is left out of the retry; if the provider then says the batch was
 * accepted earlier (with them in it), they were mailed by that request, and are recorded as sent.
 */
const handOver = async (d1: D1Database, integration: Integration, composer: Composer, operationId: string, rows: QueuedDelivery[]): Promise<SendOutcome[]> => {
  // Once a request of the batch has left, its key stands for its members: the batch only ever asks
  // for those (fewer, never more). Someone in none of them waits for a batch (and key) of their own.
  const frozen = rows.some((row) => row.asked);
  const local: (SendOutcome | OutboundEmail)[] = await Promise.all(
    rows.map(async (row): Promise<SendOutcome | OutboundEmail> => {
      // Unsubscribed (or bounced) since the fan-out created this delivery: never mail them; nor
      // an old address (the subscriber's is another now), with the new one's data.
      if (!row.active) return { kind: "failed", error: recipientInactive };
      if (!row.sameAddress) return { kind: "failed", error: recipientChanged };
      // Left out of a later request of the batch than one it was in: never asked under its key again
      // (settled below, from what the provider answers).
      if (frozen && row.dropped) return { kind: "retry", error: batchDropped, leftOut: true };
      if (frozen && !row.asked) return { kind: "retry", error: batchHeld, leftOut: true };
      try {
        return await composeEmail(composer, { id: row.subscriberId, email: row.email, ...row.fields }, row.id);
      } catch (err) {
        if (err instanceof TemplateError) return { kind: "failed", error: renderFailed(err) };
        throw err;
      }
    }),
  );
  const emails = local.filter((x): x is OutboundEmail => !("kind" in x));
  // Looked at again right before the request leaves (it may wait for the provider's rate first).
  // Marks the members that stay `asked` in the same batch.
  const chunkIds = rows.map((row) => row.id);
  const leftOut = async (ids: string[]) =>
    new Map((await lookBeforeRequest(d1, ids, chunkIds)).map((gone) => [gone.id, gone.active ? recipientChanged : recipientInactive] as const));
  const sent = emails.length === 0 ? [] : await integration.sendBatch(emails, await batchKey(operationId, rows.map((r) => r.id)), { leftOut });
  const pending = sent.find((o) => o.kind === "retry" || o.kind === "deferred");
  const acceptedEarlier = sent.some((o) => o.kind === "sent" && o.acceptedEarlier === true);
  // This step's request was the one taken (a fresh answer, or its own replayed).
  const acceptedNow = sent.some((o) => o.kind === "sent" && o.acceptedEarlier !== true);
  let next = 0;
  return local.map((x, i): SendOutcome => {
    // Skipped here, or left out of the request itself at the last look: the same rules.
    const outcome = "kind" in x ? x : (sent[next++] ?? { kind: "retry", error: noOutcome });
    if (!("kind" in x) && !(outcome.kind === "failed" && outcome.leftOut)) return outcome;
    if (outcome.kind === "retry" && outcome.error.code === batchDropped.code && !pending) {
      // The request taken was this step's, so not one it was in: it was never mailed, and waits for
      // a batch of its own. Otherwise an earlier request was taken, one it may have been in: it is
      // never sent again, rather than risk a second copy.
      return acceptedNow && !acceptedEarlier ? { kind: "retry", error: batchHeld, leftOut: true } : { kind: "failed", error: outcomeUnknown, leftOut: true };
    }
    // Never in a request: a retry of its batch costs it no attempt.
    if (outcome.kind === "retry") return { ...outcome, leftOut: true };
    if (pending?.kind === "deferred") return pending;
    const row = rows[i];
    // In a request of an earlier step of the batch, and the provider says one of its requests was
    // accepted: recorded sent (had the accepted one been a later request without them, they were
    // left out of it for leaving; either way nobody mails them again).
    if (acceptedEarlier && row?.asked) {
      return { kind: "sent", providerMessageId: null, acceptedEarlier: true };
    }
    return pending?.kind === "retry" && outcome.kind === "failed"
      ? { kind: "retry", error: outcome.error, retryAfterSeconds: pending.retryAfterSeconds, leftOut: true }
      : outcome;
  });
};
