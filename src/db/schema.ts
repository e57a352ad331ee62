import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

// Every id is `<prefix><ULID>`, so `id DESC` is newest first and every list is a keyset scan on
// (workspace_id, [filter,] id). Timestamps are epoch milliseconds; the API renders them as ISO 8601.

export const workspaces = sqliteTable("workspaces", {
  id: text().primaryKey(),
  name: text().notNull(),
  createdAt: integer().notNull(),
});

export const credentials = sqliteTable(
  "credentials",
  {
    id: text().primaryKey(),
    name: text(),
    mode: text({ enum: ["test", "live"] }).notNull(),
    /** SHA-256 of the whole bearer token, hex. The token itself is never stored. */
    tokenHash: text().notNull(),
    scopes: text({ mode: "json" }).$type<string[]>().notNull(),
    createdAt: integer().notNull(),
    revokedAt: integer(),
  },
  (t) => [uniqueIndex("credentials_token_hash_uq").on(t.tokenHash)],
);

export const credentialWorkspaces = sqliteTable(
  "credential_workspaces",
  {
    credentialId: text()
      .notNull()
      .references(() => credentials.id),
    workspaceId: text()
      .notNull()
      .references(() => workspaces.id),
  },
  (t) => [primaryKey({ columns: [t.credentialId, t.workspaceId] })],
);

export const subscribers = sqliteTable(
  "subscribers",
  {
    id: text().primaryKey(),
    workspaceId: text()
      .notNull()
      .references(() => workspaces.id),
    email: text().notNull(),
    /** Lower-cased email: the case-insensitive identity within a workspace. */
    emailKey: text().notNull(),
    name: text(),
    status: text({ enum: ["active", "unsubscribed", "bounced", "pending"] }).notNull(),
    /**
     * What set the current status when it was not a plain create: `link` (the unsubscribe link or its
     * page), `api`, `complaint` or `bounce`. Only a subscriber who left through a link may come back
     * through one.
     */
    statusSource: text({ enum: ["link", "api", "complaint", "bounce"] }),
    /** Tags in the subscriber's own order; `subscriber_tags` indexes them for the `tag` filter. */
    tags: text({ mode: "json" }).$type<string[]>().notNull(),
    location: text(),
    source: text(),
    createdAt: integer().notNull(),
    updatedAt: integer().notNull(),
  },
  (t) => [
    uniqueIndex("subscribers_workspace_email_uq").on(t.workspaceId, t.emailKey),
    index("subscribers_workspace_id_idx").on(t.workspaceId, t.id),
    index("subscribers_workspace_status_id_idx").on(t.workspaceId, t.status, t.id),
  ],
);

export const subscriberTags = sqliteTable(
  "subscriber_tags",
  {
    workspaceId: text().notNull(),
    tag: text().notNull(),
    subscriberId: text()
      .notNull()
      .references(() => subscribers.id),
  },
  (t) => [
    primaryKey({ columns: [t.workspaceId, t.tag, t.subscriberId] }),
    index("subscriber_tags_subscriber_idx").on(t.subscriberId),
  ],
);

export const newsletters = sqliteTable(
  "newsletters",
  {
    id: text().primaryKey(),
    workspaceId: text()
      .notNull()
      .references(() => workspaces.id),
    name: text().notNull(),
    fromName: text(),
    fromEmail: text().notNull(),
    replyTo: text(),
    /** Postal address printed in every campaign's footer (anti-spam laws require one). */
    address: text(),
    createdAt: integer().notNull(),
    updatedAt: integer().notNull(),
  },
  (t) => [index("newsletters_workspace_id_idx").on(t.workspaceId, t.id)],
);

export type SegmentFilter = { tags_any?: string[]; tags_all?: string[] };

export const segments = sqliteTable(
  "segments",
  {
    id: text().primaryKey(),
    workspaceId: text()
      .notNull()
      .references(() => workspaces.id),
    name: text().notNull(),
    filter: text({ mode: "json" }).$type<SegmentFilter>().notNull(),
    createdAt: integer().notNull(),
    updatedAt: integer().notNull(),
  },
  (t) => [index("segments_workspace_id_idx").on(t.workspaceId, t.id)],
);

export const campaignStatuses = ["draft", "scheduled", "sending", "sent", "failed", "archived"] as const;

export const campaigns = sqliteTable(
  "campaigns",
  {
    id: text().primaryKey(),
    workspaceId: text()
      .notNull()
      .references(() => workspaces.id),
    newsletterId: text()
      .notNull()
      .references(() => newsletters.id),
    segmentId: text().references(() => segments.id),
    subject: text().notNull(),
    preheader: text(),
    /** Liquid templates of the message body (src/content/); null: none. */
    html: text(),
    text: text(),
    status: text({ enum: campaignStatuses }).notNull(),
    scheduledAt: integer(),
    sentAt: integer(),
    createdAt: integer().notNull(),
    updatedAt: integer().notNull(),
  },
  (t) => [
    index("campaigns_workspace_id_idx").on(t.workspaceId, t.id),
    index("campaigns_workspace_status_id_idx").on(t.workspaceId, t.status, t.id),
  ],
);

export const operations = sqliteTable(
  "operations",
  {
    id: text().primaryKey(),
    workspaceId: text()
      .notNull()
      .references(() => workspaces.id),
    campaignId: text()
      .notNull()
      .references(() => campaigns.id),
    type: text({ enum: ["campaign_send"] }).notNull(),
    status: text({ enum: ["queued", "running", "succeeded", "failed"] }).notNull(),
    /** What the client asked for. */
    integrationSlug: text().notNull(),
    /** What actually delivers: `sandbox` for test credentials whatever was asked. */
    deliveryIntegration: text().notNull(),
    mode: text({ enum: ["test", "live"] }).notNull(),
    total: integer().notNull().default(0),
    delivered: integer().notNull().default(0),
    failed: integer().notNull().default(0),
    /** Keyset position of the recipient fan-out (last subscriber id paged), null before it starts. */
    fanoutCursor: text(),
    fanoutDone: integer({ mode: "boolean" }).notNull().default(false),
    /** When the send becomes due (epoch ms): the send request's time, or the campaign's later scheduled_at. */
    startAt: integer(),
    error: text({ mode: "json" }).$type<{ code: string; message: string }>(),
    createdAt: integer().notNull(),
    updatedAt: integer().notNull(),
    completedAt: integer(),
  },
  (t) => [
    index("operations_campaign_idx").on(t.campaignId),
    index("operations_status_start_idx").on(t.status, t.startAt),
  ],
);

export const deliveryStatuses = ["queued", "sent", "delivered", "bounced", "complained", "failed"] as const;

export const deliveries = sqliteTable(
  "deliveries",
  {
    id: text().primaryKey(),
    workspaceId: text().notNull(),
    campaignId: text()
      .notNull()
      .references(() => campaigns.id),
    operationId: text()
      .notNull()
      .references(() => operations.id),
    subscriberId: text()
      .notNull()
      .references(() => subscribers.id),
    email: text().notNull(),
    /** `delivered`, `bounced`, `complained`: what the provider reported afterwards (POST /webhooks/resend). */
    status: text({ enum: deliveryStatuses }).notNull(),
    attempts: integer().notNull().default(0),
    providerMessageId: text(),
    /** The provider's `data.bounce.type` when it reported a bounce (Permanent, Transient, Undetermined). */
    bounceType: text(),
    /** First open and first click the provider reported (epoch ms). */
    openedAt: integer(),
    clickedAt: integer(),
    /** When the recipient used this message's unsubscribe link (first time only). */
    unsubscribedAt: integer(),
    error: text({ mode: "json" }).$type<{ code: string; message: string }>(),
    createdAt: integer().notNull(),
    updatedAt: integer().notNull(),
  },
  (t) => [
    // One delivery per (campaign, subscriber), whatever is redelivered or retried.
    uniqueIndex("deliveries_campaign_subscriber_uq").on(t.campaignId, t.subscriberId),
    index("deliveries_campaign_id_idx").on(t.campaignId, t.id),
    index("deliveries_operation_status_idx").on(t.operationId, t.status),
    // Provider feedback finds its delivery by the id the provider gave the message.
    index("deliveries_provider_message_idx").on(t.providerMessageId),
  ],
);

/**
 * Every Resend webhook applied, by its `svix-id`: inserted in the same batch as its effects, so a
 * redelivered event (Svix retries until it gets a 2xx) changes nothing the second time.
 */
export const webhookReceipts = sqliteTable("webhook_receipts", {
  svixId: text().primaryKey(),
  eventType: text().notNull(),
  receivedAt: integer().notNull(),
});

/**
 * One record per Idempotency-Key, written in the same D1 batch as the write it answers for (or, for an
 * outcome that wrote nothing, after it), so a key is never recorded without its write or the reverse.
 */
export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    credentialId: text().notNull(),
    key: text().notNull(),
    /** SHA-256 over method, path (without /v1) and body bytes. */
    fingerprint: text().notNull(),
    /** The answer to replay (src/idempotency/stored-response.ts): a rendered response, or a resource snapshot. */
    response: text().notNull(),
    createdAt: integer().notNull(),
    expiresAt: integer().notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.credentialId, t.key] }),
    index("idempotency_keys_expires_idx").on(t.expiresAt),
  ],
);

/**
 * Keys the service makes for itself. `signing` (32 random bytes, hex) signs cursors and every link the
 * service mails; a migration creates it, so a deployment needs no secret for it.
 */
export const serviceKeys = sqliteTable("service_keys", {
  name: text().primaryKey(),
  secret: text().notNull(),
  createdAt: integer().notNull(),
});
