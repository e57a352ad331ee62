import type { Pacer } from "../pacer";
import { LATE_MS, LEAD_MS } from "../pacing";
import type { DeliveryError, EmailOutcome, OutboundEmail } from "./types";

// One request to Resend's batch endpoint, in a slot of the account-wide pacer (src/sending/pacer.ts),
// with the asks that hedge against an answer lost on the way back. What a batch's requests add up
// to is src/sending/integrations/resend.ts.

/** A batch of 100 normally answers within a second; past this the request is given up and asked again under its key. */
export const REQUEST_TIMEOUT_MS = 5_000;
/**
 * No answer after this long: a second request under the same key, in a slot of its own, asks for
 * the batch's answer while the first may still give it (see `askIn`). The least wait: when Resend is
 * answering slowly, the wait grows with its answers (`hedgeAfterMs`).
 */
export const HEDGE_AFTER_MS = 1_500;
/** Requests for one batch in flight at once at most (the first and its hedges). */
export const ASKS_PER_TRY = 3;
/** A slot further away than this is not waited for in the invocation: the message comes back later. */
const MAX_SLOT_WAIT_MS = 30_000;
/**
 * The most a confirmed start may lie after the last look (whether everyone in the request is still
 * to be mailed) before the request looks again: the look's own lead (LEAD_MS) and the confirmation's
 * round trip, with room to spare. So a request leaves at most about this long after the look it
 * carries, however the pacer moved it.
 */
export const FRESH_LOOK_MS = 150;
/** Times a request late for its start asks the pacer for another before it leaves on the last one. */
const RESTARTS = 2;
/** How many recent answer times the wait before asking again is drawn from. */
const RECENT_ANSWERS = 32;
const recentAnswers: number[] = [];

/**
 * How long to wait for an answer before asking again: twice the 90th percentile of the answers this
 * isolate saw lately, at least HEDGE_AFTER_MS and at most a second short of the timeout. A provider
 * that takes 2 s for every batch is not asked everything twice (each ask spends a slot of the
 * account's rate); one that answers in 100 ms is asked again after 1.5 s.
 */
export const hedgeAfterMs = (answersMs: readonly number[] = recentAnswers): number => {
  if (answersMs.length < 5) return HEDGE_AFTER_MS;
  const sorted = [...answersMs].sort((a, b) => a - b);
  const p90 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.9))] ?? 0;
  return Math.min(Math.max(HEDGE_AFTER_MS, 2 * p90), REQUEST_TIMEOUT_MS - 1_000);
};

const recordAnswer = (ms: number) => {
  recentAnswers.push(ms);
  if (recentAnswers.length > RECENT_ANSWERS) recentAnswers.shift();
};

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export type ResendConfig = {
  apiKey: string;
  baseUrl: string;
  rps: number;
  pacer: Pacer;
  /** The slots of this batch's requests (and hedges) are urgent ones (SendOptions.urgent). */
  urgent?: boolean;
};

/**
 * Worth asking again under the key. `untaken`: every request of the ask that left was answered 429
 * (rate limited: Resend processed none of them), so none of them can have been taken.
 */
type Retryable = { kind: "retry"; error: DeliveryError; status?: number; retryAfterMs?: number; untaken?: boolean };
/** The request may leave: the pacer recorded it as leaving at `start`. */
export type Leave = { kind: "leave"; start: number };
/** No slot soon enough: nothing was sent. */
type Deferred = { kind: "deferred"; error: DeliveryError; retryAfterMs: number };
/**
 * The request's answer settles the batch: an outcome per email (in request order), or a refusal of
 * the whole request; `acceptedEarlier`: the key stands for a batch taken in an earlier request.
 */
type Settled =
  | { kind: "done"; outcomes: EmailOutcome[]; acceptedEarlier: boolean }
  /**
   * A 4xx: nothing in the request it answers was sent. `afterOthers`: another request of the same ask
   * (a hedge, or the one it hedged) left too and may have been taken (answered with a 5xx, or timed
   * out; a refusal waits for the answers of the others on their way).
   */
  | { kind: "refused"; error: DeliveryError; afterOthers?: boolean }
  /** A 4xx naming one email of the request (strict validation): nothing in it was sent. */
  | { kind: "rejected"; index: number; error: DeliveryError; afterOthers?: boolean };
export type Reply = Settled | Retryable | Deferred;

const providerError = (status: number, body: { name?: unknown; message?: unknown } | undefined): DeliveryError => {
  const detail = typeof body?.message === "string" ? body.message : "";
  const code = typeof body?.name === "string" ? `resend_${body.name}` : `resend_http_${status}`;
  return { code, message: `Resend answered ${status}${detail ? `: ${detail}` : ""}` };
};

/** The index a 4xx names ("emails[3].to …"), when it names exactly one email of the request. */
const namedIndex = (message: unknown, count: number): number | undefined => {
  if (typeof message !== "string") return undefined;
  const found = [...message.matchAll(/\[(\d+)\]/g)].map((m) => Number(m[1]));
  const only = found[0];
  return found.length === 1 && only !== undefined && only < count ? only : undefined;
};

const retryAfterMs = (res: Response): number | undefined => {
  const seconds = Number(res.headers.get("retry-after"));
  return Number.isFinite(seconds) && seconds > 0 ? Math.ceil(seconds * 1000) : undefined;
};

/** A request given up because another of its batch answered first (or the batch was settled). */
const abandoned: Retryable = { kind: "retry", error: { code: "resend_abandoned", message: "Another request for this batch answered first" } };

/** A hedge that did not leave: someone in its request is no longer to be mailed. */
const notAsked: Retryable = { kind: "retry", error: { code: "resend_hedge_not_asked", message: "A recipient of the request is no longer to be mailed" } };

/**
 * Waits for the next request slot; deferred when the slot is further away than MAX_SLOT_WAIT_MS.
 * Just before the slot (LEAD_MS, the pacer's own margin for its answer's trip) it is confirmed: a
 * 429 met by another sender meanwhile may have paused the account past it (then a later slot is
 * reserved), or this caller may have come so late that leaving now would crowd the senders that kept
 * their slots (then it leaves as much later as it must, when the pacer says). `beforeConfirm` is the last look before the request (whether anyone is still
 * to be mailed), ahead of the confirmation, so that a slow look makes the request late only as the pacer
 * knows it; when the start the pacer gives is more than FRESH_LOOK_MS after it, it looks again just
 * before that start. Once `stop` is aborted (the batch was answered meanwhile) no slot is confirmed: an
 * abandoned ask spends none of the account's rate. Nothing (undefined) when the last look found
 * nobody left to ask.
 */
export const awaitSlot = async (
  config: ResendConfig,
  stop: AbortSignal,
  beforeConfirm?: () => Promise<boolean>,
  /** The slot `beforeConfirm` looked for was taken back: the request it looked at does not leave. */
  withdrawn?: () => Promise<void>,
): Promise<Deferred | Retryable | Leave | undefined> => {
  for (;;) {
    const slot = await config.pacer.reserve(config.rps, MAX_SLOT_WAIT_MS, config.urgent);
    if (!slot.granted) {
      return { kind: "deferred", error: { code: "resend_paced", message: "Waiting for a free Resend request slot" }, retryAfterMs: slot.waitMs };
    }
    const untilConfirm = slot.at - LEAD_MS - Date.now();
    if (untilConfirm > 0) await sleep(untilConfirm);
    if (stop.aborted) return abandoned;
    // Nobody left to ask: the slot is not confirmed (it lapses).
    if (beforeConfirm && !(await beforeConfirm())) return;
    let looked = Date.now();
    if (stop.aborted) return abandoned;
    let start = await config.pacer.confirm(slot.at, config.rps, config.urgent);
    for (let restarts = 0; start !== null; restarts++) {
      if (beforeConfirm && start - looked > FRESH_LOOK_MS) {
        // The pacer put the start well after the look (this caller came late, or was moved): look
        // again just before it, so nobody who left in between is in the request. The number the
        // stale look gave is withdrawn first; the new look numbers the request that leaves.
        const untilLook = start - LEAD_MS - Date.now();
        if (untilLook > 0) await sleep(untilLook);
        if (stop.aborted) return abandoned;
        await withdrawn?.();
        if (!(await beforeConfirm())) return;
        looked = Date.now();
      }
      const wait = start - Date.now();
      if (wait > 0) await sleep(wait);
      if (stop.aborted) return abandoned;
      const late = Date.now() - start;
      if (late <= LATE_MS) return { kind: "leave", start };
      // Past the start the pacer recorded (woken late while the isolate was busy, or its answer came
      // back slowly): leaving now could put one start too many into a second. The pacer moves it, as
      // far ahead as this caller was late; after a few moves (a pacer whose answers keep coming back
      // later than that) the request leaves on the start last recorded for it.
      if (restarts === RESTARTS) return { kind: "leave", start };
      start = await config.pacer.restart(start, config.rps, late);
    }
    // No start: the pacer took the slot back (a 429 paused the account past it). Nothing left.
    if (beforeConfirm && withdrawn) await withdrawn();
  }
};

/**
 * One request for the batch, in a slot already waited for (recorded as leaving at `start`): what its
 * answer means for the batch. Any answer says the request reached Resend by then, which the pacer is
 * told (not waited for: the worst a lost word costs is the later requests keeping clear of
 * ARRIVAL_MS instead).
 */
const request = async (config: ResendConfig, emails: OutboundEmail[], body: string, key: string, stop: AbortSignal, start: number): Promise<Reply> => {
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
        // Resend sends the valid emails and names the rejected ones by index: a bad recipient
        // fails only its own delivery.
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
  config.pacer.answered?.(start, Date.now() - start).catch(() => undefined);
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
    const outcomes = emails.map((_email, i): EmailOutcome => {
      const reason = rejected.get(i);
      if (reason !== undefined) return { kind: "failed", error: { code: "resend_rejected", message: `Resend rejected this message: ${reason}` } };
      return { kind: "sent", providerMessageId: ids[next++] ?? null };
    });
    return { kind: "done", outcomes, acceptedEarlier: false };
  }
  const error = providerError(res.status, answer);
  if (res.status === 429 || res.status >= 500 || error.code === "resend_concurrent_idempotent_requests") {
    return { kind: "retry", error, status: res.status, retryAfterMs: retryAfterMs(res) };
  }
  if (error.code === "resend_invalid_idempotent_request") {
    // The key already stands for a batch Resend accepted (in a request whose answer was lost) with
    // other content: a recipient left the chunk since, or a subscriber's data changed. That batch was
    // sent: sending again could mail everyone twice. Its messages' ids are unknown here.
    return { kind: "done", outcomes: emails.map(() => ({ kind: "sent", providerMessageId: null })), acceptedEarlier: true };
  }
  // Resend validates strictly when it does not take the permissive header: one bad email is then
  // named by index and nothing is sent.
  const named = namedIndex(answer?.message, emails.length);
  if (named !== undefined && emails.length > 1) return { kind: "rejected", index: named, error };
  return { kind: "refused", error };
};

/**
 * The requests of one ask, its first slot already confirmed (`first`). A request with no answer after
 * `hedgeAfter` has either been lost on the way back (Resend accepted the batch) or is slow: another
 * request under the same key, in a slot of its own, asks again while the first may still answer (up
 * to ASKS_PER_TRY requests, each that long after the one before), and the first reply that settles
 * the batch wins; the others are abandoned. Resend answers a key it already accepted with that
 * batch's own answer, so no message is sent twice, and a key still being processed with 409
 * `concurrent_idempotent_requests`: the first request is alive, so no further request is made. A
 * lost answer costs one more slot instead of a whole timeout. When every request has failed, the
 * failure is the answer (a 429 first, for its Retry-After).
 */
export const askIn = (
  config: ResendConfig,
  first: Leave,
  emails: OutboundEmail[],
  body: string,
  key: string,
  hedgeAfter: number,
  /** Before a hedge's slot is confirmed: whether everyone in the request is still to be asked. */
  beforeHedge?: () => Promise<boolean>,
): Promise<Reply> => {
  const stop = new AbortController();
  return new Promise<Reply>((resolve, reject) => {
    const failures: Retryable[] = [];
    let asked = 0;
    /** Requests that left for Resend (an ask whose slot never came, or came too late, did not). */
    let left = 0;
    /** Of those, the ones still on their way. */
    let inFlight = 0;
    /** Of those, the ones answered in a way that does not say they were not taken (a 5xx, a timeout, a lost connection). */
    let uncertain = 0;
    /** The first refusal (a 4xx) of a request of the ask: proof only once no other request may have been taken. */
    let refusal: Extract<Reply, { kind: "refused" | "rejected" }> | undefined;
    let pending = 0;
    let hedging = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finish = (reply: Reply) => {
      clearTimeout(timer);
      stop.abort();
      resolve(reply);
    };
    const stopHedging = () => {
      hedging = false;
      clearTimeout(timer);
    };
    // A hedge waits for a slot of its own, and looks first: one who left since the request (or a
    // canceled send) stops it, and every later one; the request already on its way answers alone.
    const hedgeSlot = async (): Promise<Deferred | Retryable | Leave> => {
      const slot = await awaitSlot(config, stop.signal, beforeHedge);
      if (slot) return slot;
      stopHedging();
      return notAsked;
    };
    const askOnce = (slot: Promise<Deferred | Retryable | Leave>) => {
      asked++;
      pending++;
      let leaves = false;
      void slot
        .then((got) => {
          if (got.kind !== "leave") return got;
          // A refusal is awaiting the others' answers: no new request.
          if (refusal) return notAsked;
          if (hedging && asked < ASKS_PER_TRY && !stop.signal.aborted) timer = setTimeout(() => askOnce(hedgeSlot()), hedgeAfter);
          if (!stop.signal.aborted) {
            leaves = true;
            left++;
            inFlight++;
          }
          return request(config, emails, body, key, stop.signal, got.start);
        })
        .then((reply) => {
          pending--;
          if (leaves) inFlight--;
          if (reply.kind === "done") return finish(reply);
          if (reply.kind === "refused" || reply.kind === "rejected") {
            // A refusal took nothing; another request of the ask still on its way decides whether it is proof.
            refusal ??= reply;
            stopHedging();
          } else if (leaves && reply.kind === "retry" && reply.status !== 429 && reply.error.code !== "resend_concurrent_idempotent_requests") {
            // (Rate limited, or turned away while another request under the key was in progress: not taken.)
            uncertain++;
          }
          if (refusal) {
            // Proof once nobody else may have been taken; none at all once one may have been.
            if (uncertain > 0) return finish({ ...refusal, afterOthers: true });
            if (inFlight === 0) return finish(refusal);
            return;
          }
          if (reply.kind === "retry" && reply !== abandoned && reply !== notAsked) failures.push(reply);
          if (reply.kind === "retry" && reply.error.code === "resend_concurrent_idempotent_requests") stopHedging();
          if (pending === 0) {
            const last = failures.find((r) => r.status === 429) ?? failures[0] ?? reply;
            const untaken = left > 0 && failures.length === left && failures.every((r) => r.status === 429);
            finish(untaken && last.kind === "retry" ? { ...last, untaken } : last);
          }
        })
        .catch((err: unknown) => {
          // The pacer could not be reached: the step fails and its message is retried.
          clearTimeout(timer);
          stop.abort();
          reject(err);
        });
    };
    askOnce(Promise.resolve(first));
  });
};
