import { sql } from "drizzle-orm";
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
    /**
     * With `statusSource` 'link': the campaign whose unsubscribe link set the status, the only link
     * that may bring the subscriber back (POST /u/{token}/resubscribe).
     */
    statusCampaignId: text(),
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
    /**
     * The last time the pipeline worked on the send without changing it (a chunk waiting for a
     * provider slot): the sweeper counts it as progress, so it does not start a second delivery
     * chain for a send that is only waiting. Internal; `updated_at` keeps meaning a change.
     */
    heartbeatAt: integer(),
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
    /**
     * The number of the latest provider request of its batch that held the delivery (0: none yet).
     * Set right before each request leaves, in the same D1 batch as the last look at consent, to one
     * more than any of its batch (src/sending/deliveries.repository.ts, lookBeforeRequest). A batch
     * only ever loses members from one request to the next, so a delivery numbered n was in every
     * request 1..n of its batch and in none after: that is all there is to know when the provider
     * answers for the batch's key (src/sending/batch-settlement.ts).
     */
    askedSeq: integer().notNull().default(0),
    /**
     * When the first request of its batch was numbered (epoch ms; null: none yet). The provider keeps
     * a batch's idempotency key for 24 hours: a batch whose first request is older than the
     * integration's key lifetime (Resend: 23 hours, RESEND_KEY_LIFETIME_MS in
     * src/sending/integrations/resend.ts) is never asked again under it (src/sending/deliver.ts).
     */
    firstAskedAt: integer(),
    /**
     * The subscriber id of the last member of the provider batch (chunk) this delivery was planned
     * in: every later read of its chunk, however its work message came (redelivery, the sweeper),
     * takes the same rows, so the batch is asked for under the same idempotency key.
     */
    chunkEnd: text(),
    error: text({ mode: "json" }).$type<{ code: string; message: string }>(),
    createdAt: integer().notNull(),
    updatedAt: integer().notNull(),
  },
  (t) => [
    // One delivery per (campaign, subscriber), whatever is redelivered or retried.
    uniqueIndex("deliveries_campaign_subscriber_uq").on(t.campaignId, t.subscriberId),
    index("deliveries_campaign_id_idx").on(t.campaignId, t.id),
    // GET …/deliveries?status=: the failed deliveries of a large send without reading the others.
    index("deliveries_campaign_status_idx").on(t.campaignId, t.status, t.id),
    index("deliveries_operation_status_idx").on(t.operationId, t.status),
    // Provider feedback finds its delivery by the id the provider gave the message.
    index("deliveries_provider_message_idx").on(t.providerMessageId),
    // A delivery step reads its chunk whole, wherever its members stand (src/sending/deliveries.repository.ts).
    index("deliveries_campaign_chunk_idx").on(t.campaignId, t.chunkEnd),
  ],
);

/**
 * Every Resend webhook applied, by its `svix-id`: inserted in the same batch as its effects, so a
 * redelivered event (Svix retries until it gets a 2xx) changes nothing the second time.
 */
export const webhookReceipts = sqliteTable(
  "webhook_receipts",
  {
    svixId: text().primaryKey(),
    eventType: text().notNull(),
    receivedAt: integer().notNull(),
  },
  // The sweeper drops receipts past any redelivery (src/webhooks/sweep.ts), oldest first.
  (t) => [index("webhook_receipts_received_at_idx").on(t.receivedAt)],
);

/**
 * A confirmation mail the provider took (POST /subscribers/{id}/confirmation): its message id, so
 * Resend's feedback about it (a hard bounce, a complaint) reaches the subscriber and address it went
 * to, as a campaign delivery's does. Written in the batch that records the request's answer; the
 * sweeper drops rows older than any feedback (src/webhooks/sweep.ts).
 */
export const confirmationMessages = sqliteTable(
  "confirmation_messages",
  {
    providerMessageId: text().primaryKey(),
    workspaceId: text().notNull(),
    subscriberId: text().notNull(),
    email: text().notNull(),
    createdAt: integer().notNull(),
    /** When Resend reported a complaint about it: a later bounce of the same mail then changes nothing. */
    complainedAt: integer(),
  },
  (t) => [index("confirmation_messages_created_at_idx").on(t.createdAt)],
);

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

// ---- Outgoing events (src/events, src/webhooks) ----

/** Every type an event can have; `webhook.test` only ever goes to the endpoint being tested. */
export const eventTypes = [
  "subscriber.created",
  "subscriber.updated",
  "subscriber.unsubscribed",
  "subscriber.bounced",
  "campaign.sending",
  "campaign.sent",
  "campaign.failed",
  "delivery.bounced",
  "delivery.complained",
  "webhook.test",
] as const;

/**
 * The outbox: one row per change worth telling integrators about, written in the same D1 batch as the
 * change (src/events/outbox.ts), holding a snapshot of the resource row as that batch left it.
 */
export const events = sqliteTable(
  "events",
  {
    id: text().primaryKey(),
    workspaceId: text().notNull(),
    type: text({ enum: eventTypes }).notNull(),
    /** The resource kind of the snapshot (src/idempotency/resources.ts), e.g. `subscriber`. */
    resource: text().notNull(),
    resourceId: text().notNull(),
    /** The row as SQLite's json_object() wrote it; rendered with the resource's serializer. */
    snapshot: text().notNull(),
    createdAt: integer().notNull(),
    /** When its webhook attempts were created; null until then (the sweeper looks for those). */
    dispatchedAt: integer(),
  },
  (t) => [
    index("events_workspace_id_idx").on(t.workspaceId, t.id),
    index("events_workspace_type_id_idx").on(t.workspaceId, t.type, t.id),
    index("events_undispatched_idx").on(t.createdAt).where(sql`dispatched_at IS NULL`),
  ],
);

/**
 * One row per write that has events, alive only inside that write's batch: it records whether the
 * write's decisive statement changed something (or a condition on a row before the write), so every
 * event and the Idempotency-Key record after it can ask (src/db/commit.ts). The batch deletes it.
 */
export const writeMarks = sqliteTable("write_marks", { id: text().primaryKey() });

export const webhookEndpoints = sqliteTable(
  "webhook_endpoints",
  {
    id: text().primaryKey(),
    workspaceId: text()
      .notNull()
      .references(() => workspaces.id),
    url: text().notNull(),
    /** Event types, or ["*"]. */
    events: text({ mode: "json" }).$type<string[]>().notNull(),
    description: text(),
    enabled: integer({ mode: "boolean" }).notNull(),
    /** `whsec_…`: kept as is because it signs; never shown after create and rotate_secret. */
    secret: text().notNull(),
    /**
     * The secret before the last rotate_secret: it signs every delivery beside the new one until
     * `previousSecretExpiresAt` (24 h after the rotation), so a receiver can switch without failing.
     */
    previousSecret: text(),
    previousSecretExpiresAt: integer(),
    createdAt: integer().notNull(),
    updatedAt: integer().notNull(),
    /** Deleted endpoints are kept (their attempts refer to them) but receive and show nothing. */
    deletedAt: integer(),
  },
  (t) => [index("webhook_endpoints_workspace_id_idx").on(t.workspaceId, t.id)],
);

export const webhookAttempts = sqliteTable(
  "webhook_attempts",
  {
    id: text().primaryKey(),
    workspaceId: text().notNull(),
    endpointId: text()
      .notNull()
      .references(() => webhookEndpoints.id),
    eventId: text()
      .notNull()
      .references(() => events.id),
    status: text({ enum: ["pending", "succeeded", "failed"] }).notNull(),
    attempts: integer().notNull().default(0),
    lastStatusCode: integer(),
    lastError: text(),
    nextAttemptAt: integer(),
    createdAt: integer().notNull(),
    updatedAt: integer().notNull(),
  },
  (t) => [
    // One attempt row per (endpoint, event), however often the event is dispatched.
    uniqueIndex("webhook_attempts_endpoint_event_uq").on(t.endpointId, t.eventId),
    index("webhook_attempts_endpoint_id_idx").on(t.endpointId, t.id),
    index("webhook_attempts_pending_idx").on(t.nextAttemptAt).where(sql`status = 'pending'`),
    // The purge keeps an event while an attempt refers to it (src/webhooks/attempts.repository.ts).
    index("webhook_attempts_event_id_idx").on(t.eventId),
  ],
);
