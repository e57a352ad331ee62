import { z } from "@hono/zod-openapi";
import type { webhookAttempts } from "../db/schema";
import { afterQuery, isoDateTime, limitQuery } from "../lib/schemas";
import { iso } from "../lib/time";

export const AttemptSchema = z
  .object({
    id: z.string().openapi({ example: "wa_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("webhook_attempt"),
    endpoint_id: z.string(),
    event_id: z.string(),
    status: z.enum(["pending", "succeeded", "failed"]),
    attempts: z.number().int().openapi({ description: "Tries made so far (at most 8)." }),
    last_status_code: z.number().int().nullable().openapi({ description: "The HTTP status of the last try; null when none answered, or when the attempt was stopped since (see last_error)." }),
    last_error: z.string().nullable().openapi({ description: "Why the last try failed (status and the start of the body, timeout, network error), or why the attempt was stopped before its next try (the endpoint was disabled or deleted)." }),
    next_attempt_at: isoDateTime.nullable().openapi({ description: "When the next try is due, for a `pending` attempt." }),
    created_at: isoDateTime,
    updated_at: isoDateTime,
  })
  .openapi("WebhookAttempt");

export const ListAttemptsQuery = z.strictObject({ limit: limitQuery, after: afterQuery });

export const serializeAttempt = (row: typeof webhookAttempts.$inferSelect): z.infer<typeof AttemptSchema> => ({
  id: row.id,
  object: "webhook_attempt",
  endpoint_id: row.endpointId,
  event_id: row.eventId,
  status: row.status,
  attempts: row.attempts,
  last_status_code: row.lastStatusCode,
  last_error: row.lastError,
  next_attempt_at: iso(row.nextAttemptAt),
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
});
