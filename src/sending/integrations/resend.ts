import type { DeliveryError, Integration, OutboundEmail, SendOutcome } from "./types";

const ENDPOINT = "https://api.resend.com/emails";
const TIMEOUT_MS = 15_000;

const providerError = async (res: Response): Promise<DeliveryError> => {
  let detail = "";
  try {
    const body = (await res.json()) as { name?: unknown; message?: unknown };
    detail = typeof body.message === "string" ? body.message : "";
    if (typeof body.name === "string") return { code: `resend_${body.name}`, message: `Resend answered ${res.status}: ${detail}` };
  } catch {
    // Not JSON: the status alone says enough.
  }
  return { code: `resend_http_${res.status}`, message: `Resend answered ${res.status}${detail ? `: ${detail}` : ""}` };
};

const retryAfter = (res: Response): number | undefined => {
  const seconds = Number(res.headers.get("retry-after"));
  return Number.isFinite(seconds) && seconds > 0 ? Math.ceil(seconds) : undefined;
};

const send = async (apiKey: string, email: OutboundEmail): Promise<SendOutcome> => {
  let res: Response;
  try {
    res = await fetch(ENDPOINT, {
      method: "POST",
      headers: {
        authorization: `Bearer ${apiKey}`,
        "content-type": "application/json",
        "idempotency-key": email.deliveryId,
      },
      body: JSON.stringify({
        from: email.from,
        to: [email.to],
        subject: email.subject,
        ...(email.html !== null && { html: email.html }),
        text: email.text,
        headers: email.headers,
        ...(email.replyTo !== null && { reply_to: email.replyTo }),
      }),
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
  } catch (err) {
    return {
      kind: "retry",
      error: { code: "resend_unreachable", message: `Resend could not be reached: ${err instanceof Error ? err.message : String(err)}` },
    };
  }
  if (res.ok) {
    const body = (await res.json().catch(() => ({}))) as { id?: unknown };
    return { kind: "sent", providerMessageId: typeof body.id === "string" ? body.id : email.deliveryId };
  }
  const error = await providerError(res);
  // A concurrent request with the same idempotency key is still in flight at Resend: its outcome is not known yet.
  const concurrent = res.status === 409 && error.code === "resend_concurrent_idempotent_requests";
  if (res.status === 429 || res.status >= 500 || concurrent) return { kind: "retry", error, retryAfterSeconds: retryAfter(res) };
  return { kind: "failed", error };
};

/**
 * Resend over HTTPS. Chunks stay small because every email is one subrequest, and the
 * concurrency low because Resend's default rate limit is a few requests per second per team
 * (429s are retried with backoff, honouring Retry-After).
 */
export const resendIntegration = (apiKey: string): Integration => ({
  slug: "resend",
  chunkSize: 25,
  concurrency: 4,
  send: (email) => send(apiKey, email),
});
