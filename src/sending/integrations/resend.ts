import { LEAD_MS, maxRps, type Pacer, pacerFor } from "../pacer";
import { type DeliveryError, type Integration, type OutboundEmail, outcomeUnknown, type SendOptions, type SendOutcome } from "./types";

// Resend's batch endpoint: up to 100 emails a request, every request through the account-wide pacer
// (src/sending/pacer.ts). Permissive validation makes Resend send the valid emails of a batch and
// name the rejected ones by index, so a bad recipient fails only its own delivery.

export const RESEND_BATCH_SIZE = 100;
/** A batch of 100 normally answers within a second; past this the request is given up and asked again under its key. */
export const REQUEST_TIMEOUT_MS = 5_000;
/**
 * No answer after this long: a second request under the same key, in a slot of its own, asks for
 * the batch's answer while the first may still give it (see `ask`). The least wait: when Resend is
 * answering slowly, the wait grows with its answers (`hedgeAfterMs`).
 */
export const HEDGE_AFTER_MS = 1_500;
/** How many recent answer times the wait before asking again is drawn from. */
const RECENT_ANSWERS = 32;
const recentAnswers: number[] = [];

/**
 * How long to wait for an answer before asking again: twice the 90th percentile of the answers this
 * isolate saw lately, at least HEDGE_AFTER_MS and at most a second short of the timeout. A provider
 * that takes 2 s for every batch is not asked everything twice (each ask spends a slot of the
 * account's rate); one that answers in 100 ms is asked again after 1.5 s.
 */
export const hedgeAfterMs = (answersMs: readonly number[]): number => {
  if (answersMs.length < 5) return HEDGE_AFTER_MS;
  const sorted = [...answersMs].sort((a, b) => a - b);
  const p90 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))] ?? 0;
  return Math.min(Math.max(HEDGE_AFTER_MS, 2 * p90), REQUEST_TIMEOUT_MS - 1_000);
};

const recordAnswer = (ms: number) => {
  recentAnswers.push(ms);
  if (recentAnswers.length > RECENT_ANSWERS) recentAnswers.shift();
};
/** Requests for one batch in flight at once at most (the first and its hedges). */
export const ASKS_PER_TRY = 3;
/** Tries of one batch within one queue message before the message itself is retried with backoff. */
export const TRIES_PER_STEP = 3;
/** A slot further away than this is not waited for in the invocation: the message comes back later. */
export const MAX_SLOT_WAIT_MS = 30_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Retryable = { kind: "retry"; error: DeliveryError; status?: number; retryAfterMs?: number };
/** No slot soon enough: nothing was sent. */
type Deferred = { kind: "deferred"; error: DeliveryError; retryAfterMs: number };
type Answer = { kind: "done"; outcomes: SendOutcome[] } | Retryable | Deferred;
/** A 4xx naming one message of the batch (strict validation). */
type Split = { kind: "split"; index: number; error: DeliveryError };
type Reply = Answer | Split;

const providerError = (status: number, body: { name?: unknown; message?: unknown } | undefined): DeliveryError => {
  const detail = typeof body?.message === "string" ? body.message : "";
  const code = typeof body?.name === "string" ? `resend_${body.name}` : `resend_http_${status}`;
  return { code, message: `Resend answered ${status}${detail ? `: ${detail}` : ""}` };
};

const retryAfterMs = (res: Response): number | undefined => {
  const seconds = Number(res.headers.get("retry-after"));
  return Number.isFinite(seconds) && seconds > 0 ? Math.ceil(seconds * 1000) : undefined;
};

/** The index a 4xx names ("emails[3].to …"), when it names exactly one message. */
const namedIndex = (message: unknown, count: number): number | undefined => {
  if (typeof message !== "string") return undefined;
  const found = [...message.matchAll(/\[(\d+)\]/g)].map((m) => Number(m[1]));
  const only = found[0];
  return found.length === 1 && only !== undefined && only < count ? only : undefined;
};

/** Resend's tag naming the delivery: its webhooks carry it, so feedback finds a delivery whose message id was never learnt. */
export const DELIVERY_TAG = "delivery_id";

const payload = (email: OutboundEmail) => ({
  from: email.from,
  to: [email.to],
  subject: email.subject,
  ...(email.html !== null && { html: email.html }),
  text: email.text,
  headers: email.headers,
  ...(email.replyTo !== null && { reply_to: email.replyTo }),
  tags: [{ name: DELIVERY_TAG, value: email.deliveryId }],
});

type Config = { apiKey: string; baseUrl: string; rps: number; pacer: Pacer };

/**
 * Waits for the next request slot; deferred when the slot is further away than MAX_SLOT_WAIT_MS.
 * Just before the slot (LEAD_MS, the pacer's own margin for its answer's trip) it is confirmed: a
 * 429 met by another sender meanwhile may have paused the account past it, or this caller may have
 * come so late that leaving now would crowd the senders that kept their slots; then a later slot is
 * reserved instead.
 */
const awaitSlot = async (config: Config, beforeConfirm?: () => Promise<void>): Promise<Deferred | undefined> => {
  for (;;) {
    const slot = await config.pacer.reserve(config.rps, MAX_SLOT_WAIT_MS);
    if (!slot.granted) {
      return { kind: "deferred", error: { code: "resend_paced", message: "Waiting for a free Resend request slot" }, retryAfterMs: slot.waitMs };
    }
    const untilConfirm = slot.at - LEAD_MS - Date.now();
    if (untilConfirm > 0) await sleep(untilConfirm);
    // The last look before the request (who is still to be mailed), ahead of the confirmation, so
    // that a slow look makes the request late only as the pacer knows it.
    await beforeConfirm?.();
    if (!(await config.pacer.confirm(slot.at, config.rps))) continue;
    const wait = slot.at - Date.now();
    if (wait > 0) await sleep(wait);
    return;
  }
};

const abandoned: Retryable = { kind: "retry", error: { code: "resend_abandoned", message: "Another request for this batch answered first" } };

/** One request for the batch, in a slot already waited for: what its answer means for the batch. */
const request = async (config: Config, emails: OutboundEmail[], body: string, key: string, stop: AbortSignal): Promise<Reply> => {
  if (stop.aborted) return abandoned;
  let res: Response;
  const sent = Date.now();
  try {
    res = await fetch(`${config.baseUrl}/emails/batch`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${config.apiKey}`,
        "content-type": "application/json",
        "idempotency-key": key,
        "x-batch-validation": "permissive",
      },
      body,
      signal: AbortSignal.any([stop, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]),
    });
  } catch (err) {
    if (stop.aborted) return abandoned;
    const timedOut = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
    return {
      kind: "retry",
      error: timedOut
        ? { code: "resend_timeout", message: `Resend did not answer within ${REQUEST_TIMEOUT_MS / 1000} s` }
        : { code: "resend_unreachable", message: `Resend could not be reached: ${err instanceof Error ? err.message : String(err)}` },
    };
  }
  // Only accepted batches say how long a batch takes; refusals (429, 409, 5xx) come back at once.
  if (res.ok) recordAnswer(Date.now() - sent);
  const answer = (await res.json().catch(() => undefined)) as
    | { data?: { id?: unknown }[]; errors?: { index?: unknown; message?: unknown }[]; name?: unknown; message?: unknown }
    | undefined;
  if (res.ok) {
    const rejected = new Map<number, string>();
    for (const e of answer?.errors ?? []) if (typeof e.index === "number") rejected.set(e.index, String(e.message ?? "rejected"));
    // `data` lists the accepted emails in request order, skipping the rejected ones.
    const ids = (answer?.data ?? []).map((d) => (typeof d.id === "string" ? d.id : undefined));
    let next = 0;
    const outcomes = emails.map((email, i): SendOutcome => {
      const reason = rejected.get(i);
      if (reason !== undefined) return { kind: "failed", error: { code: "resend_rejected", message: `Resend rejected this message: ${reason}` } };
      return { kind: "sent", providerMessageId: ids[next++] ?? email.deliveryId };
    });
    return { kind: "done", outcomes };
  }
  const error = providerError(res.status, answer);
  if (res.status === 429 || res.status >= 500 || error.code === "resend_concurrent_idempotent_requests") {
    return { kind: "retry", error, status: res.status, retryAfterMs: retryAfterMs(res) };
  }
  if (error.code === "resend_invalid_idempotent_request") {
    // The key already stands for a batch Resend accepted (in a request whose answer was lost) with
    // other content: a recipient left the chunk since, or a subscriber's data changed. That batch was
    // sent: sending again could mail everyone twice. Its messages' ids are unknown here.
    return { kind: "done", outcomes: emails.map(() => ({ kind: "sent", providerMessageId: null, acceptedEarlier: true })) };
  }
  const bad = namedIndex(answer?.message, emails.length);
  if (bad !== undefined && emails.length > 1) return { kind: "split", index: bad, error };
  return { kind: "done", outcomes: emails.map(() => ({ kind: "failed", error })) };
};

/**
 * One batch request in its paced slot. A request with no answer after `hedgeAfterMs` has either
 * been lost on the way back (Resend accepted the batch) or is slow: another request under the same
 * key, in a slot of its own, asks again while the first may still answer (up to ASKS_PER_TRY
 * requests, each that long after the one before), and the first reply that settles the batch
 * wins; the others are abandoned. Resend answers a key it already accepted with that batch's own
 * answer, so no message is sent twice, and a key still being processed with 409
 * `concurrent_idempotent_requests`: the first request is alive, so no further request is made. A
 * lost answer costs one more slot instead of a whole timeout. When every request has failed, the
 * failure is the answer (a 429 first, for its Retry-After).
 */
const ask = async (config: Config, batch: BatchState, list: OutboundEmail[], key: string): Promise<Reply> => {
  // Built before the slot, so the request leaves as soon as its slot comes; built again when the
  // last look before it (batch.leftOut) leaves someone out.
  let emails = list.filter((email) => !batch.left.has(email.deliveryId));
  let body = JSON.stringify(emails.map(payload));
  const hedgeAfter = hedgeAfterMs(recentAnswers);
  const look = batch.leftOut;
  const deferred = await awaitSlot(
    config,
    look &&
      (async () => {
        const gone = await look(emails.map((email) => email.deliveryId));
        if (gone.size === 0) return;
        for (const [id, error] of gone) batch.left.set(id, error);
        emails = emails.filter((email) => !batch.left.has(email.deliveryId));
        body = JSON.stringify(emails.map(payload));
      }),
  );
  if (deferred) return deferred;
  if (emails.length === 0) return { kind: "done", outcomes: list.map((email) => leftOutcome(batch, email)) };
  batch.requests++;
  for (const email of emails) batch.askedIn.set(email.deliveryId, (batch.askedIn.get(email.deliveryId) ?? 0) + 1);
  const reply = await askIn(config, emails, body, key, hedgeAfter);
  // Back to `list`'s order: the left-out ones in their places.
  if (reply.kind === "split") return { ...reply, index: list.indexOf(emails[reply.index] as OutboundEmail) };
  if (reply.kind !== "done" || emails.length === list.length) return reply;
  let next = 0;
  return { kind: "done", outcomes: list.map((email) => (batch.left.has(email.deliveryId) ? leftOutcome(batch, email) : (reply.outcomes[next++] as SendOutcome))) };
};

/** The requests of one ask, its slot already confirmed. */
const askIn = (config: Config, emails: OutboundEmail[], body: string, key: string, hedgeAfter: number): Promise<Reply> => {
  const stop = new AbortController();
  return new Promise<Reply>((resolve, reject) => {
    const failures: Retryable[] = [];
    let asked = 0;
    let pending = 0;
    let hedging = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finish = (reply: Reply) => {
      clearTimeout(timer);
      stop.abort();
      resolve(reply);
    };
    const askOnce = (slot: Promise<Deferred | undefined>) => {
      asked++;
      pending++;
      void slot
        .then((late) => {
          if (late) return late;
          if (hedging && asked < ASKS_PER_TRY && !stop.signal.aborted) timer = setTimeout(() => askOnce(awaitSlot(config)), hedgeAfter);
          return request(config, emails, body, key, stop.signal);
        })
        .then((reply) => {
          pending--;
          if (reply.kind === "done" || reply.kind === "split") return finish(reply);
          if (reply.kind === "retry" && reply !== abandoned) failures.push(reply);
          if (reply.kind === "retry" && reply.error.code === "resend_concurrent_idempotent_requests") {
            hedging = false;
            clearTimeout(timer);
          }
          if (pending === 0) finish(failures.find((r) => r.status === 429) ?? failures[0] ?? reply);
        })
        .catch((err: unknown) => {
          // The pacer could not be reached: the step fails and its message is retried.
          clearTimeout(timer);
          stop.abort();
          reject(err);
        });
    };
    askOnce(Promise.resolve(undefined));
  });
};

/**
 * One batch through its tries: who was left out of it at the last look before a request (and why),
 * and who was in a request of this step (the provider may have accepted them).
 */
type BatchState = {
  leftOut?: SendOptions["leftOut"];
  left: Map<string, DeliveryError>;
  /** Requests made in this step, and in how many of them each email was (those in none: absent). */
  requests: number;
  askedIn: Map<string, number>;
};

/** A left-out email's outcome for now: failed, unless it was in an earlier request of this step (then as the batch's). */
const leftOutcome = (batch: BatchState, email: OutboundEmail): SendOutcome => ({
  kind: "failed",
  error: batch.left.get(email.deliveryId) as DeliveryError,
  leftOut: true,
});

/** The batch's answer; a 4xx naming one message fails that one and sends the rest as a batch of their own. */
const post = async (config: Config, batch: BatchState, emails: OutboundEmail[], key: string): Promise<Answer> => {
  const reply = await ask(config, batch, emails, key);
  if (reply.kind !== "split") return reply;
  const restAnswer = await post(config, batch, emails.filter((_, i) => i !== reply.index), `${key}~${reply.index}`);
  if (restAnswer.kind !== "done") return restAnswer;
  const outcomes = [...restAnswer.outcomes];
  outcomes.splice(reply.index, 0, { kind: "failed", error: reply.error });
  return { kind: "done", outcomes };
};

/**
 * The batch, asked up to TRIES_PER_STEP times. Before each request (the first of a try, or the rest
 * of a split batch), right before its slot is confirmed, `options.leftOut` names the recipients no
 * longer to be mailed: they are left out of that request and every later one. A left-out email
 * answers `failed` with `leftOut`, or, when it was in an earlier request of this step and the batch
 * turns out to have been accepted then, `sent` like the rest; while the batch is still to be retried,
 * `retry` with `leftOut` when it was never in a request (it costs no attempt).
 */
const sendBatch = async (config: Config, emails: OutboundEmail[], key: string, options: SendOptions = {}): Promise<SendOutcome[]> => {
  const batch: BatchState = { leftOut: options.leftOut, left: new Map(), requests: 0, askedIn: new Map() };
  /** Every email's outcome when the batch is to be asked again in a later step, after `error`. */
  const retryAll = (error: DeliveryError, retryAfterSeconds: number | undefined): SendOutcome[] =>
    emails.map((email) => {
      const left = batch.left.get(email.deliveryId);
      return left && !batch.askedIn.has(email.deliveryId)
        ? { kind: "retry", error: left, retryAfterSeconds, leftOut: true }
        : { kind: "retry", error, retryAfterSeconds };
    });
  let lastError: DeliveryError | undefined;
  for (let attempt = 1; ; attempt++) {
    const answer = await post(config, batch, emails, key);
    if (answer.kind === "done") {
      const acceptedEarlier = answer.outcomes.some((o) => o.kind === "sent" && o.acceptedEarlier === true);
      if (!acceptedEarlier) return answer.outcomes;
      // An earlier request was taken. One left out only of the last request was in every earlier one
      // of this step: mailed. One left out sooner was in some and not others, and which was taken is
      // not known (a request refused with a 429 and one whose answer was lost look alike by then).
      return answer.outcomes.map((outcome, i): SendOutcome => {
        if (!(outcome.kind === "failed" && outcome.leftOut)) return outcome;
        const askedIn = batch.askedIn.get(emails[i]?.deliveryId ?? "") ?? 0;
        if (askedIn === 0) return outcome;
        return askedIn === batch.requests - 1 ? { kind: "sent", providerMessageId: null, acceptedEarlier: true } : { kind: "failed", error: outcomeUnknown, leftOut: true };
      });
    }
    if (answer.kind === "deferred") {
      // No slot soon enough. Only when no request of this step has left is that "nothing attempted"
      // (deferred, no attempt counted); after one (a 429 or 5xx that then left no slot in reach), the
      // step made a try that counts, with that request's error.
      const deferred = deferredOutcome(answer);
      if (batch.requests === 0) return emails.map(() => deferred);
      return retryAll(lastError ?? answer.error, deferred.retryAfterSeconds);
    }
    lastError = answer.error;
    // A 429 holds every sender back, not only this one: the pacer starts no request before it ends.
    if (answer.status === 429) await config.pacer.pause(answer.retryAfterMs ?? 1000);
    if (attempt >= (options.tries ?? TRIES_PER_STEP)) return retryAll(answer.error, seconds(answer.retryAfterMs));
    if (answer.status !== 429) await sleep(250 * 2 ** (attempt - 1));
  }
};

const seconds = (ms?: number) => (ms === undefined ? undefined : Math.ceil(ms / 1000));

const deferredOutcome = (deferred: Deferred): Extract<SendOutcome, { kind: "deferred" }> => ({ kind: "deferred", error: deferred.error, retryAfterSeconds: seconds(deferred.retryAfterMs) ?? 1 });

/**
 * Resend over HTTPS, one batch request per delivery chunk, at the account's rate. 429, 5xx, timeouts
 * and network errors are retried under the same Idempotency-Key: a few times within the step, then
 * by retrying the queue message with backoff.
 */
export const resendIntegration = (
  apiKey: string,
  env: Pick<Env, "RESEND_BASE_URL" | "RESEND_MAX_RPS" | "RESEND_PACER">,
  pacer: Pacer = pacerFor(env),
): Integration => {
  const config: Config = {
    apiKey,
    baseUrl: (env.RESEND_BASE_URL || "https://api.resend.com").replace(/\/+$/, ""),
    rps: maxRps(env),
    pacer,
  };
  return { slug: "resend", chunkSize: RESEND_BATCH_SIZE, sendBatch: (emails, key, options) => sendBatch(config, emails, key, options) };
};
