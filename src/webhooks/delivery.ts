import { Webhook } from "standardwebhooks";
import { eventObject } from "../events/events.schemas";
import { iso } from "../lib/time";
import type { TryContext, TryOutcome } from "./attempts.repository";

/** A receiver has this long to answer (headers and all) before the try counts as failed. */
const DELIVERY_TIMEOUT_MS = 10_000;
/** Of a failed try's response body, only this much is read (for last_error); the rest is cancelled. */
const ERROR_BODY_BYTES = 256;

/** The event as delivered: the Standard Webhooks body `{type, timestamp, data}`. */
const eventPayload = (event: TryContext["event"]) =>
  JSON.stringify({ type: event.type, timestamp: iso(event.createdAt), data: { object: eventObject(event) } });

/**
 * The Standard Webhooks headers for `body`, signed now with each of the endpoint's secrets: after a
 * rotation, a signature per secret, space-separated, so a receiver holding either verifies it.
 */
const signedHeaders = (secrets: readonly string[], eventId: string, body: string, now: number) => {
  const timestamp = new Date(Math.floor(now / 1000) * 1000);
  return {
    "content-type": "application/json",
    "user-agent": "newsletter-service-webhooks/1",
    "webhook-id": eventId,
    "webhook-timestamp": String(timestamp.getTime() / 1000),
    "webhook-signature": secrets.map((secret) => new Webhook(secret).sign(eventId, timestamp, body)).join(" "),
  };
};

/**
 * One try: POST the signed event, no redirects followed (a 3xx fails), 10 s for the answer. Only a
 * 2xx succeeds. A body is never buffered: a success's is cancelled unread, a failure's read up to a
 * few hundred bytes for the error, so a huge or never-ending answer costs nothing.
 */
export const postEvent = async (context: TryContext, now: number): Promise<TryOutcome> => {
  const body = eventPayload(context.event);
  const signal = AbortSignal.timeout(DELIVERY_TIMEOUT_MS);
  let res: Response;
  try {
    res = await fetch(context.endpoint.url, {
      method: "POST",
      headers: signedHeaders(context.endpoint.secrets, context.event.id, body, now),
      body,
      redirect: "manual",
      signal,
    });
  } catch (err) {
    const timedOut = signal.aborted;
    return {
      ok: false,
      statusCode: null,
      error: timedOut ? `no answer within ${DELIVERY_TIMEOUT_MS / 1000} s` : `request failed: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
  if (res.status >= 200 && res.status < 300) {
    await res.body?.cancel().catch(() => {});
    return { ok: true, statusCode: res.status, error: null };
  }
  const start = await readStart(res, signal);
  const redirect = res.status >= 300 && res.status < 400 ? ` (redirects are not followed; location: ${res.headers.get("location") ?? "none"})` : "";
  return { ok: false, statusCode: res.status, error: `HTTP ${res.status}${redirect}${start ? `: ${start}` : ""}`.slice(0, 500) };
};

/** The first bytes of a body, as text, within the try's time; the rest is cancelled. */
const readStart = async (res: Response, signal: AbortSignal): Promise<string> => {
  const reader = res.body?.getReader();
  if (!reader) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  const abandon = new Promise<"timeout">((resolve) => {
    if (signal.aborted) resolve("timeout");
    signal.addEventListener("abort", () => resolve("timeout"), { once: true });
  });
  try {
    while (size < ERROR_BODY_BYTES) {
      const next = await Promise.race([reader.read(), abandon]);
      if (next === "timeout" || next.done) break;
      chunks.push(next.value);
      size += next.value.byteLength;
    }
  } catch {
    // A body that breaks off says no more than the status already did.
  } finally {
    reader.cancel().catch(() => {});
  }
  const bytes = new Uint8Array(Math.min(size, ERROR_BODY_BYTES));
  let offset = 0;
  for (const chunk of chunks) {
    const part = chunk.subarray(0, bytes.length - offset);
    bytes.set(part, offset);
    offset += part.length;
    if (offset >= bytes.length) break;
  }
  return new TextDecoder().decode(bytes).replace(/\s+/g, " ").trim();
};
