import { requireResendBaseUrl, resendRate } from "./resend-config";
import { type Pacer, pacerFor } from "../pacer";
import { askIn, awaitSlot, hedgeAfterMs, type Reply, type ResendConfig, sleep } from "./resend-requests";
import { type BatchAnswer, type Integration, noOutcome, type OutboundEmail, type SendOptions } from "./types";

// Resend's batch endpoint: up to 100 emails a request, every request through the account-wide pacer
// (src/sending/pacer.ts, requests: resend-requests.ts). This module is what a batch's requests add
// up to: its tries, who is left out of which request, and the batch's answer.

const RESEND_BATCH_SIZE = 100;
/**
 * Resend keeps an idempotency key for 24 hours; a batch is asked again under its key only within 23
 * of its first request (an hour's margin for clocks and a request's own time).
 */
export const RESEND_KEY_LIFETIME_MS = 23 * 60 * 60 * 1000;
/** Tries of one batch within one queue message before the message itself is retried with backoff. */
export const TRIES_PER_STEP = 3;

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

/** Never aborted: the first request of a try waits for its slot whatever happens. */
const ALWAYS = new AbortController().signal;

/** One batch through its tries: who was left out of its requests, and how many requests left. */
type BatchState = Pick<SendOptions, "beforeRequest" | "requestWithdrawn" | "beforeHedge"> & { left: Set<string>; requests: number };

/** One request of the batch (with its hedges), and the emails it held. */
const ask = async (config: ResendConfig, batch: BatchState, all: OutboundEmail[], key: string): Promise<{ reply: Reply; held: OutboundEmail[] } | undefined> => {
  // Built before the slot, so the request leaves as soon as its slot comes; built again when the
  // last look before it leaves someone out.
  let held = all.filter((email) => !batch.left.has(email.deliveryId));
  let body = JSON.stringify(held.map(payload));
  const look = batch.beforeRequest;
  const slot = await awaitSlot(
    config,
    ALWAYS,
    look &&
      (async () => {
        const gone = await look(held.map((email) => email.deliveryId));
        if (gone.size > 0) {
          for (const id of gone) batch.left.add(id);
          held = held.filter((email) => !batch.left.has(email.deliveryId));
          body = JSON.stringify(held.map(payload));
        }
        return held.length > 0;
      }),
    batch.requestWithdrawn,
  );
  // Everyone was left out at the last look: no request.
  if (!slot) return undefined;
  if (slot.kind !== "leave") return { reply: slot, held: [] };
  batch.requests++;
  const { beforeHedge } = batch;
  const ids = held.map((email) => email.deliveryId);
  return { reply: await askIn(config, slot, held, body, key, hedgeAfterMs(), beforeHedge && (() => beforeHedge(ids))), held };
};

/**
 * The batch, asked up to `options.tries` times (TRIES_PER_STEP). Right before each request's slot is
 * confirmed, `options.beforeRequest` names the recipients no longer to be mailed: they are left out
 * of that request and every later one. The answer is the facts: what the provider said for the last
 * request, or that the batch is to be asked again, or that nothing left.
 */
const sendBatch = async (shared: ResendConfig, emails: OutboundEmail[], key: string, options: SendOptions = {}): Promise<BatchAnswer> => {
  const config = options.urgent ? { ...shared, urgent: true } : shared;
  const batch: BatchState = { ...options, left: new Set(), requests: 0 };
  let lastError: Extract<Reply, { kind: "retry" }> | undefined;
  for (let attempt = 1; ; attempt++) {
    const asked = await ask(config, batch, emails, key);
    if (!asked) return { kind: "unasked" };
    const { reply, held } = asked;
    if (reply.kind === "done") {
      const outcomes = new Map(held.map((email, i) => [email.deliveryId, reply.outcomes[i] ?? noOutcome] as const));
      return { kind: "answered", outcomes, acceptedEarlier: reply.acceptedEarlier };
    }
    if (reply.kind === "refused") return { kind: "refused", error: reply.error, earlierMayBeTaken: reply.afterOthers === true };
    if (reply.kind === "rejected") {
      const named = held[reply.index];
      // (The index was read as one of the request's own.)
      if (!named) throw new Error(`Resend named email ${reply.index} of a request of ${held.length}`);
      return { kind: "rejected", deliveryId: named.deliveryId, error: reply.error, earlierMayBeTaken: reply.afterOthers === true };
    }
    if (reply.kind === "deferred") {
      // No slot soon enough. Only when no request of this step has left is that "nothing attempted";
      // after one (a 429 or 5xx that then left no slot in reach), the step made a try that counts,
      // with that request's error.
      const retryAfterSeconds = seconds(reply.retryAfterMs) ?? 1;
      if (batch.requests === 0) return { kind: "deferred", error: reply.error, retryAfterSeconds };
      return { kind: "retry", error: lastError?.error ?? reply.error, retryAfterSeconds };
    }
    lastError = reply;
    // Only 429s, so Resend took none of the ask's requests: its number goes back, and the next request
    // of the batch is numbered as if it had not been made.
    if (reply.untaken) await batch.requestWithdrawn?.();
    // A 429 holds every sender back, not only this one: the pacer starts no request before it ends.
    if (reply.status === 429) await config.pacer.pause(reply.retryAfterMs ?? 1000);
    if (attempt >= (options.tries ?? TRIES_PER_STEP)) return { kind: "retry", error: reply.error, retryAfterSeconds: seconds(reply.retryAfterMs) };
    if (reply.status !== 429) await sleep(250 * 2 ** (attempt - 1));
  }
};

const seconds = (ms?: number) => (ms === undefined ? undefined : Math.ceil(ms / 1000));

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
  const config: ResendConfig = {
    apiKey,
    baseUrl: requireResendBaseUrl(env),
    rps: resendRate(env).rps,
    pacer,
  };
  return { slug: "resend", chunkSize: RESEND_BATCH_SIZE, keyLifetimeMs: RESEND_KEY_LIFETIME_MS, reportsFeedback: true, sendBatch: (emails, key, options) => sendBatch(config, emails, key, options) };
};
