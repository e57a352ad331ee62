import { Hono } from "hono";
import { WebhookVerificationError } from "standardwebhooks";
import { ApiError, noRoute } from "../errors/api-error";
import { idPrefixes } from "../lib/ids";
import type { AppEnv } from "../lib/types";
import { readCapped } from "../middleware/request-context";
import { requestOutbox } from "../events/outbox";
import { DELIVERY_TAG } from "../sending/integrations/resend";
import { feedbackVerifier } from "../sending/integrations/resend-config";
import { applyFeedback, type FeedbackEvent } from "./feedback.repository";

// POST /webhooks/resend: Resend's delivery feedback, signed as Svix signs (the Standard Webhooks
// scheme under `svix-` header names). No bearer credential: the signature is the authority.

/** Resend's events are a few KB; anything near this is not one of them. */
const MAX_WEBHOOK_BYTES = 256 * 1024;

const invalidSignature = (why: string) => new ApiError("invalid_signature", `The webhook signature could not be verified: ${why}`);

/**
 * Checks svix-id / svix-timestamp (within 5 minutes) / svix-signature against the raw body; the
 * verified body, parsed (the library parses it once the signature holds).
 */
const verify = (secret: string, headers: Headers, body: string): unknown => {
  const webhook = feedbackVerifier(secret);
  if (!webhook) throw new ApiError("configuration_error", "RESEND_WEBHOOK_SECRET is not a valid whsec_ signing secret; set it to the one Resend shows");
  const missing = ["svix-id", "svix-timestamp", "svix-signature"].filter((name) => !headers.get(name));
  if (missing.length > 0) {
    // Resend signs with Svix's header names; the Standard Webhooks names carry the same values.
    const standard = headers.get("webhook-signature") ? " (this request has webhook-* headers: Resend sends svix-id, svix-timestamp and svix-signature)" : "";
    throw invalidSignature(`missing ${missing.join(", ")}${standard}`);
  }
  const timestamp = headers.get("svix-timestamp") ?? "";
  // Signed as sent: the library reads the header with parseInt and checks a signature of the number
  // it read, so `1795787292abc` would pass with the signature of `1795787292`.
  if (timestamp !== "" && !/^\d{1,12}$/.test(timestamp)) throw invalidSignature("the svix-timestamp header is not a whole number of seconds");
  try {
    return webhook.verify(body, {
      "webhook-id": headers.get("svix-id") ?? "",
      "webhook-timestamp": timestamp,
      "webhook-signature": headers.get("svix-signature") ?? "",
    });
  } catch (err) {
    if (err instanceof WebhookVerificationError) throw invalidSignature(err.message.toLowerCase());
    // The library parses the body once the signature holds: a signed body that is not JSON.
    if (err instanceof SyntaxError) throw new ApiError("invalid_json", "The webhook body is not valid JSON");
    throw err;
  }
};

const stringOrNull = (v: unknown) => (typeof v === "string" && v.length > 0 ? v : null);

/**
 * The delivery id the service tagged the message with (DELIVERY_TAG): Resend lists an email's tags
 * as `[{name, value}]` (older payloads: as an object of name → value).
 */
const deliveryTagOf = (tags: unknown): string | null => {
  const value = Array.isArray(tags)
    ? (tags.find((t): t is { value?: unknown } => typeof t === "object" && t !== null && t.name === DELIVERY_TAG)?.value)
    : tags !== null && typeof tags === "object"
      ? (tags as Record<string, unknown>)[DELIVERY_TAG]
      : undefined;
  return typeof value === "string" && value.startsWith(idPrefixes.delivery) ? value : null;
};

/** The fields this service reads from an event; everything else in it is ignored. */
const toEvent = (svixId: string, parsed: unknown, now: number): FeedbackEvent => {
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new ApiError("invalid_json", "The webhook body must be a JSON object");
  }
  const { type, created_at, data } = parsed as { type?: unknown; created_at?: unknown; data?: unknown };
  const d = (data !== null && typeof data === "object" ? data : {}) as { email_id?: unknown; bounce?: { type?: unknown } | null; tags?: unknown };
  const at = typeof created_at === "string" ? Date.parse(created_at) : Number.NaN;
  return {
    svixId,
    type: typeof type === "string" ? type : "",
    emailId: stringOrNull(d.email_id),
    bounceType: stringOrNull(d.bounce?.type),
    deliveryId: deliveryTagOf(d.tags),
    at: Number.isFinite(at) ? at : now,
  };
};

/**
 * The body as the text it is: UTF-8 (Resend's), its bytes kept (a byte-order mark too), so the
 * signature the library checks over the text is the signature of the raw body. Bytes that are not
 * UTF-8 have no text to check a signature over: they cannot be what Resend signed.
 */
const utf8Text = (bytes: Uint8Array): string => {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw invalidSignature("the body is not UTF-8 text, which is what Resend signs");
  }
};

export const resendWebhookRouter = new Hono<AppEnv>().post("/webhooks/resend", async (c) => {
  const secret = c.env.RESEND_WEBHOOK_SECRET;
  if (!secret) throw noRoute("POST", new URL(c.req.url).pathname);
  // Named for the access log only where the route exists (without the secret it is an unknown path).
  c.set("route", "POST /webhooks/resend");
  const bytes = await readCapped(c, MAX_WEBHOOK_BYTES);
  const body = utf8Text(bytes);
  const parsed = verify(secret, c.req.raw.headers, body);
  const now = Date.now();
  const event = toEvent(c.req.header("svix-id") ?? "", parsed, now);
  // 2xx for everything verified, so Resend stops retrying; `result` says what happened.
  const result = await applyFeedback(requestOutbox(c), event, now);
  if (result === "in_flight") {
    // Not a 2xx, so Resend sends the event again (first after a few seconds); by then the answer is in.
    throw new ApiError(
      "delivery_in_flight",
      "This event reports a message whose request to Resend is not answered yet; nothing was changed. Resend sends the event again, and it is applied then",
      { headers: { "Retry-After": "5" } },
    );
  }
  return c.json({ data: { object: "webhook_receipt", id: event.svixId, type: event.type, result } }, 200);
});
