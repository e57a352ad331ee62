import { maxRps, type Pacer, pacerFor } from "../pacer";
import type { DeliveryError, Integration, OutboundEmail, SendOutcome } from "./types";

// Resend's batch endpoint: up to 100 emails a request, every request through the account-wide pacer
// (src/sending/pacer.ts). Permissive validation makes Resend send the valid emails of a batch and
// name the rejected ones by index, so a bad recipient fails only its own delivery.

export const RESEND_BATCH_SIZE = 100;
/** A batch of 100 normally answers within a second; past this the request is retried under its key. */
export const REQUEST_TIMEOUT_MS = 5_000;
/** Tries of one batch within one queue message before the message itself is retried with backoff. */
export const TRIES_PER_STEP = 3;
/** A slot further away than this is not waited for in the invocation: the message comes back later. */
export const MAX_SLOT_WAIT_MS = 30_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Retryable = { kind: "retry"; error: DeliveryError; status?: number; retryAfterMs?: number };
type Answer = { kind: "done"; outcomes: SendOutcome[] } | Retryable;

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

const payload = (email: OutboundEmail) => ({
  from: email.from,
  to: [email.to],
  subject: email.subject,
  ...(email.html !== null && { html: email.html }),
  text: email.text,
  headers: email.headers,
  ...(email.replyTo !== null && { reply_to: email.replyTo }),
});

type Config = { apiKey: string; baseUrl: string; rps: number; pacer: Pacer };

/** One request in its paced slot: the batch's outcomes, or a reason to try the whole batch again. */
const post = async (config: Config, emails: OutboundEmail[], key: string): Promise<Answer> => {
  const slot = await config.pacer.reserve(config.rps, MAX_SLOT_WAIT_MS);
  if (!slot.granted) {
    return { kind: "retry", error: { code: "resend_paced", message: "Waiting for a free Resend request slot" }, retryAfterMs: slot.waitMs };
  }
  if (slot.waitMs > 0) await sleep(slot.waitMs);
  let res: Response;
  try {
    res = await fetch(`${config.baseUrl}/emails/batch`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${config.apiKey}`,
        "content-type": "application/json",
        "idempotency-key": key,
        "x-batch-validation": "permissive",
      },
      body: JSON.stringify(emails.map(payload)),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    const timedOut = err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
    return {
      kind: "retry",
      error: timedOut
        ? { code: "resend_timeout", message: `Resend did not answer within ${REQUEST_TIMEOUT_MS / 1000} s` }
        : { code: "resend_unreachable", message: `Resend could not be reached: ${err instanceof Error ? err.message : String(err)}` },
    };
  }
  const body = (await res.json().catch(() => undefined)) as
    | { data?: { id?: unknown }[]; errors?: { index?: unknown; message?: unknown }[]; name?: unknown; message?: unknown }
    | undefined;
  if (res.ok) {
    const rejected = new Map<number, string>();
    for (const e of body?.errors ?? []) if (typeof e.index === "number") rejected.set(e.index, String(e.message ?? "rejected"));
    // `data` lists the accepted emails in request order, skipping the rejected ones.
    const ids = (body?.data ?? []).map((d) => (typeof d.id === "string" ? d.id : undefined));
    let next = 0;
    const outcomes = emails.map((email, i): SendOutcome => {
      const reason = rejected.get(i);
      if (reason !== undefined) return { kind: "failed", error: { code: "resend_rejected", message: `Resend rejected this message: ${reason}` } };
      return { kind: "sent", providerMessageId: ids[next++] ?? email.deliveryId };
    });
    return { kind: "done", outcomes };
  }
  const error = providerError(res.status, body);
  if (res.status === 429 || res.status >= 500 || error.code === "resend_concurrent_idempotent_requests") {
    return { kind: "retry", error, status: res.status, retryAfterMs: retryAfterMs(res) };
  }
  if (error.code === "resend_invalid_idempotent_request") {
    // The key already stands for an accepted batch (whose answer this service never recorded) with
    // other content: a recipient left the batch since. Sending again could mail the others twice.
    const conflict: DeliveryError = {
      code: "resend_idempotency_conflict",
      message: "Resend already accepted this batch in an earlier attempt whose answer was lost; it is not sent again",
    };
    return { kind: "done", outcomes: emails.map(() => ({ kind: "failed", error: conflict })) };
  }
  // A 4xx naming one message (strict validation): that one fails, the rest go as a batch of their own.
  const bad = namedIndex(body?.message, emails.length);
  if (bad !== undefined && emails.length > 1) {
    const rest = emails.filter((_, i) => i !== bad);
    const restAnswer = await post(config, rest, `${key}~${bad}`);
    if (restAnswer.kind === "retry") return restAnswer;
    const outcomes = [...restAnswer.outcomes];
    outcomes.splice(bad, 0, { kind: "failed", error });
    return { kind: "done", outcomes };
  }
  return { kind: "done", outcomes: emails.map(() => ({ kind: "failed", error })) };
};

const sendBatch = async (config: Config, emails: OutboundEmail[], key: string): Promise<SendOutcome[]> => {
  const retryAll = (error: DeliveryError, afterMs?: number): SendOutcome[] =>
    emails.map(() => ({ kind: "retry", error, retryAfterSeconds: afterMs === undefined ? undefined : Math.ceil(afterMs / 1000) }));
  for (let attempt = 1; ; attempt++) {
    const answer = await post(config, emails, key);
    if (answer.kind === "done") return answer.outcomes;
    // A 429 holds every sender back, not only this one: the pacer starts no request before it ends.
    if (answer.status === 429) await config.pacer.pause(answer.retryAfterMs ?? 1000);
    if (attempt >= TRIES_PER_STEP || answer.error.code === "resend_paced") return retryAll(answer.error, answer.retryAfterMs);
    if (answer.status !== 429) await sleep(250 * 2 ** (attempt - 1));
  }
};

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
  return { slug: "resend", chunkSize: RESEND_BATCH_SIZE, sendBatch: (emails, key) => sendBatch(config, emails, key) };
};
