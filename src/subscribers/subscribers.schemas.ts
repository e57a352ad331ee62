import { z } from "@hono/zod-openapi";
import type { subscribers } from "../db/schema";
import { EMAIL_MAX_LENGTH } from "../lib/email";
import { SendCampaignBody } from "../campaigns/campaigns.schemas";
import {
  afterQuery,
  emailAddress,
  idParam,
  isoDateTime,
  limitQuery,
  noAddressTwice,
  oneOffResultSchema,
  optionalText,
  queryEnum,
  queryText,
  rawText,
  TAG_MAX_LENGTH,
  tagList,
  somethingToChange,
} from "../lib/schemas";
import { iso } from "../lib/time";

const subscriberStatuses = ["active", "unsubscribed", "bounced", "pending"] as const;

export const SubscriberParams = z.object({
  workspace_id: idParam("workspace", "workspace_id"),
  subscriber_id: idParam("subscriber", "subscriber_id"),
});

const email = emailAddress("Unique in the workspace, case-insensitively; kept in the case given.");

const optionalField = optionalText(200).openapi({ description: "At most 200 characters, trimmed; `null` or blank: none." });

const tags = tagList({ minItems: 0, description: "The subscriber's tags." });

const status = z.enum(subscriberStatuses);

export const SubscriberSchema = z
  .object({
    id: z.string().openapi({ example: "sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("subscriber"),
    email: z.string().openapi({ example: "ada@example.com" }),
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
    name: optionalField,
    tags: tags.optional(),
    location: optionalField,
    source: optionalField,
    // The default is applied by the service, not declared as a schema `default`: generated clients
    // would then make the field required in their request types.
    status: status
      .optional()
      .transform((value) => value ?? "active")
      .openapi({ description: "Consent status. Omitted: `active`." }),
  })
  .openapi("CreateSubscriberRequest", { example: { email: "ada@example.com", name: "Ada Lovelace", tags: ["vip"] } });

/** The most subscribers one batch creates. */
export const SUBSCRIBER_BATCH_MAX = 1000;

export const CreateSubscriberBatchBody = z
  .strictObject({
    subscribers: z
      .array(CreateSubscriberBody)
      .min(1)
      .max(SUBSCRIBER_BATCH_MAX)
      // One address once: which of two items would the subscriber be?
      .superRefine(
        noAddressTwice(
          (item) => item.email,
          (i) => [i, "email"],
          (first) => `subscribers[${first}].email`,
        ),
      )
      .openapi({
        description: `1 to ${SUBSCRIBER_BATCH_MAX} subscribers, each as \`POST /subscribers\` takes it; no address twice (case-insensitively).`,
      }),
  })
  .openapi("CreateSubscriberBatchRequest", {
    example: { subscribers: [{ email: "ada@example.com", name: "Ada Lovelace", tags: ["vip"] }, { email: "grace@example.com" }] },
  });

const batchResults = ["created", "existing"] as const;

export const SubscriberBatchSchema = z
  .object({
    object: z.literal("subscriber_batch"),
    created: z.number().int().openapi({ description: "How many subscribers this request created." }),
    existing: z.number().int().openapi({ description: "How many addresses were subscribers already (left as they were)." }),
    results: z
      .array(
        z.object({
          index: z.number().int().openapi({ description: "The item's position in the request's `subscribers`." }),
          result: z.enum(batchResults).openapi({
            description: "`created`, or `existing`: the address was the workspace's already, and that subscriber is left unchanged (what `POST /subscribers` answers with a 409 `subscriber_exists`).",
          }),
          subscriber_id: z.string().openapi({ description: "The subscriber the address now has: the one created, or the existing one.", example: "sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
        }),
      )
      .openapi({ description: "One per item, in the request's order." }),
  })
  .openapi("SubscriberBatch");

export type SubscriberBatchRow = { index: number; created: 0 | 1; subscriber_id: string };

export const serializeSubscriberBatch = (rows: readonly SubscriberBatchRow[]): z.infer<typeof SubscriberBatchSchema> => {
  const created = rows.filter((row) => row.created === 1).length;
  return {
    object: "subscriber_batch",
    created,
    existing: rows.length - created,
    results: rows.map((row) => ({ index: row.index, result: batchResults[1 - row.created] as (typeof batchResults)[number], subscriber_id: row.subscriber_id })),
  };
};

export const UpdateSubscriberBody = somethingToChange(
  z.strictObject({
    email: email.optional(),
    name: optionalField,
    tags: tagList({ minItems: 0, description: "Replaces the whole list (`[]` clears it); not with add_tags or remove_tags." }).optional(),
    add_tags: tagList({
      minItems: 1,
      description:
        "Tags to add after the subscriber's own (one it has already stays where it is), in the write itself: two clients adding tags at once both keep theirs. The result holds at most 50 tags (a 400 naming add_tags otherwise).",
    }).optional(),
    remove_tags: tagList({
      minItems: 1,
      description: "Tags to remove, in the write itself (one it does not have is ignored; one also in add_tags ends removed).",
    }).optional(),
    location: optionalField,
    source: optionalField,
    status: status.optional().openapi({ description: "Consent status: any of the four values." }),
  }),
)
  .superRefine((body, ctx) => {
    if (body.tags !== undefined && (body.add_tags !== undefined || body.remove_tags !== undefined)) {
      ctx.addIssue({ code: "custom", path: [body.add_tags !== undefined ? "add_tags" : "remove_tags"], message: "cannot be given with tags, which replaces the whole list" });
    }
  })
  .openapi("UpdateSubscriberRequest", {
    minProperties: 1,
    example: { name: "Ada King", add_tags: ["vip"] },
    // What the refinement says: `tags` replaces the list, so it comes alone.
    not: { anyOf: [{ required: ["tags", "add_tags"] }, { required: ["tags", "remove_tags"] }] },
  });


export const ListSubscribersQuery = z.strictObject({
  limit: limitQuery,
  after: afterQuery,
  status: queryEnum(subscriberStatuses).optional().openapi({ description: "Only subscribers with this status." }),
  // Filters are trimmed as the stored values were, then held to the same characters and lengths; the
  // email filter is not validated as an address: a value no subscriber can have simply matches nothing.
  tag: queryText(TAG_MAX_LENGTH)
    .transform((tag) => tag.normalize("NFC"))
    .optional()
    .openapi({ description: "Only subscribers having exactly this tag (case-sensitive; trimmed; compared in Unicode NFC, as tags are kept)." }),
  email: queryText(EMAIL_MAX_LENGTH)
    .optional()
    .openapi({ description: "Only the subscriber with this email (case-insensitive; trimmed)." }),
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

export const RequestConfirmationBody = z
  .strictObject({
    newsletter_id: rawText(100).openapi({
      description: "The newsletter the subscriber is asked to confirm: its name is on the page and in the mail, which comes from its sender.",
      example: "nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T",
    }),
    send: z.boolean().optional().openapi({
      description: "Omitted or `true`: the service mails the link now. `false`: it only makes the link, for a mail of your own.",
    }),
    integration_slug: SendCampaignBody.shape.integration_slug,
  })
  .openapi("RequestConfirmationRequest", { example: { newsletter_id: "nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T" } });

export const ConfirmationSchema = z
  .object({
    object: z.literal("subscriber_confirmation"),
    subscriber_id: z.string(),
    newsletter_id: z.string(),
    email: z.string().openapi({ description: "The address the link confirms (a link for an address the subscriber no longer has confirms nothing)." }),
    confirmation_url: z.string().openapi({
      description: "`{PUBLIC_BASE_URL}/c/{token}`: its page asks, its button confirms (`pending` → `active`). It does not expire.",
      example: "https://news.example.com/c/c3ViXzAx…",
    }),
    result: oneOffResultSchema({})
      .nullable()
      .openapi("ConfirmationSendResult", { description: "What came of mailing the link; `null` with `send: false`." }),
  })
  .openapi("SubscriberConfirmation");
