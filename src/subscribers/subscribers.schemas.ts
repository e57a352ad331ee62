import { z } from "@hono/zod-openapi";
import type { subscribers } from "../db/schema";
import { afterQuery, idParam, isoDateTime, limitQuery } from "../lib/schemas";
import { iso } from "../lib/time";

export const subscriberStatuses = ["active", "unsubscribed", "bounced", "pending"] as const;

export const SubscriberParams = z.object({
  workspace_id: idParam("workspace", "workspace_id"),
  subscriber_id: idParam("subscriber", "subscriber_id"),
});

const email = z
  .string()
  .trim()
  .min(1)
  .max(254)
  .pipe(z.email({ pattern: z.regexes.rfc5322Email }))
  .openapi({ type: "string", format: "email", maxLength: 254, example: "ada@example.com" });

const optionalText = z.string().trim().max(200).nullable().optional();

const tags = z
  .array(z.string().trim().min(1).max(40))
  .max(50)
  .transform((list) => [...new Set(list)])
  .openapi({
    type: "array",
    items: { type: "string", minLength: 1, maxLength: 40 },
    maxItems: 50,
    description: "Up to 50 tags of 1 to 40 characters (trimmed); duplicates are dropped, order is kept.",
    example: ["weekly", "beta"],
  });

const status = z.enum(subscriberStatuses);

export const SubscriberSchema = z
  .object({
    id: z.string().openapi({ example: "sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("subscriber"),
    email: z.string().openapi({ format: "email" }),
    name: z.string().nullable(),
    status,
    tags: z.array(z.string()),
    location: z.string().nullable(),
    source: z.string().nullable(),
    created_at: isoDateTime,
    updated_at: isoDateTime,
  })
  .openapi("Subscriber");

export type Subscriber = z.infer<typeof SubscriberSchema>;

export const CreateSubscriberBody = z
  .strictObject({
    email,
    name: optionalText,
    tags: tags.optional(),
    location: optionalText,
    source: optionalText,
    status: status.default("active").openapi({ description: "Consent status; defaults to active." }),
  })
  .openapi("CreateSubscriberRequest");

const updatable = ["email", "name", "tags", "location", "source", "status"] as const;

export const UpdateSubscriberBody = z
  .strictObject({
    email: email.optional(),
    name: optionalText,
    tags: tags.optional(),
    location: optionalText,
    source: optionalText,
    status: status.optional().openapi({ description: "Consent status: any of the four values." }),
  })
  .refine((body) => Object.keys(body).length > 0, {
    error: `Request body must contain at least one of: ${updatable.join(", ")}`,
  })
  .openapi("UpdateSubscriberRequest", { minProperties: 1 });

export type CreateSubscriberInput = z.infer<typeof CreateSubscriberBody>;
export type UpdateSubscriberInput = z.infer<typeof UpdateSubscriberBody>;

export const ListSubscribersQuery = z.strictObject({
  limit: limitQuery,
  after: afterQuery,
  status: status.optional().openapi({ description: "Only subscribers with this status." }),
  tag: z.string().min(1).max(40).optional().openapi({ description: "Only subscribers having exactly this tag." }),
  email: z
    .string()
    .min(1)
    .max(254)
    .optional()
    .openapi({ description: "Only the subscriber with this email (case-insensitive)." }),
});

export const serializeSubscriber = (row: typeof subscribers.$inferSelect): Subscriber => ({
  id: row.id,
  object: "subscriber",
  email: row.email,
  name: row.name,
  status: row.status,
  tags: row.tags,
  location: row.location,
  source: row.source,
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
});
