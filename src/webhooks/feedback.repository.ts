// Resend's delivery feedback applied to deliveries and subscribers. Every effect of one event and
// its receipt (by svix-id) commit in one atomic batch; each effect runs only while the receipt is
// absent, and the receipt is the batch's last statement, so a redelivered event changes nothing.

export type FeedbackEvent = {
  svixId: string;
  type: string;
  emailId: string | null;
  bounceType: string | null;
  /** When the provider says it happened (epoch ms). */
  at: number;
};

/** Delivery statuses a provider event may move, in order: an event only ever moves a delivery forward. */
const RANK = `CASE status WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 WHEN 'bounced' THEN 3 WHEN 'complained' THEN 4 ELSE 0 END`;
const rankOf = { delivered: 2, bounced: 3, complained: 4 } as const;

// ?1 svix id, ?2 provider message id, ?3 event time, ?4 now: the same bindings for every statement.
const UNSEEN = `NOT EXISTS (SELECT 1 FROM webhook_receipts WHERE svix_id = ?1)`;
const OF_MESSAGE = `provider_message_id = ?2 AND ${UNSEEN}`;
const SUBSCRIBER_OF_MESSAGE = `id IN (SELECT subscriber_id FROM deliveries WHERE provider_message_id = ?2) AND ${UNSEEN}`;

const moveDelivery = (status: keyof typeof rankOf, extra = "") =>
  `UPDATE deliveries SET status = '${status}'${extra}, updated_at = ?4
    WHERE ${OF_MESSAGE} AND status IN ('sent', 'delivered', 'bounced', 'complained') AND ${RANK} < ${rankOf[status]}`;

/** The SQL of each effect an event has; none for an event type this service does not act on. */
const effectsSql = (event: FeedbackEvent): string[] => {
  switch (event.type) {
    case "email.delivered":
      return [moveDelivery("delivered")];
    case "email.bounced": {
      const delivery = `UPDATE deliveries SET bounce_type = ?5, updated_at = ?4 WHERE ${OF_MESSAGE}`;
      // Only a permanent bounce says the address is dead; others are recorded on the delivery.
      if (event.bounceType !== "Permanent") return [delivery, moveDelivery("bounced")];
      return [
        delivery,
        moveDelivery("bounced"),
        `UPDATE subscribers SET status = 'bounced', status_source = 'bounce', updated_at = ?4
          WHERE ${SUBSCRIBER_OF_MESSAGE} AND status IN ('active', 'pending', 'unsubscribed')`,
      ];
    }
    case "email.complained":
      return [
        moveDelivery("complained"),
        `UPDATE subscribers SET status = 'unsubscribed', status_source = 'complaint', updated_at = ?4
          WHERE ${SUBSCRIBER_OF_MESSAGE} AND status IN ('active', 'pending')`,
      ];
    case "email.opened":
      return [`UPDATE deliveries SET opened_at = ?3, updated_at = ?4 WHERE ${OF_MESSAGE} AND opened_at IS NULL`];
    case "email.clicked":
      return [`UPDATE deliveries SET clicked_at = ?3, updated_at = ?4 WHERE ${OF_MESSAGE} AND clicked_at IS NULL`];
    default:
      return [];
  }
};

/**
 * The one place that builds an event's statements (effects, then the receipt). Outgoing events
 * (subscriber.bounced, delivery.bounced, delivery.complained) belong here too, appended to the same
 * list so they commit with the effects they describe.
 */
export const feedbackStatements = (d1: D1Database, event: FeedbackEvent, now: number): D1PreparedStatement[] => {
  const effects =
    event.emailId === null
      ? []
      : effectsSql(event).map((sql) =>
          d1.prepare(sql).bind(event.svixId, event.emailId, event.at, now, ...(sql.includes("?5") ? [event.bounceType] : [])),
        );
  // Outbox: the outgoing events for these effects are appended here, before the receipt.
  const receipt = d1
    .prepare(`INSERT INTO webhook_receipts (svix_id, event_type, received_at) VALUES (?1, ?2, ?3) ON CONFLICT (svix_id) DO NOTHING RETURNING svix_id`)
    .bind(event.svixId, event.type, now);
  return [...effects, receipt];
};

/** Applies an event: `duplicate` when its svix-id was seen before, `ignored` when it changed nothing. */
export const applyFeedback = async (d1: D1Database, event: FeedbackEvent, now: number): Promise<"applied" | "ignored" | "duplicate"> => {
  const results = await d1.batch(feedbackStatements(d1, event, now));
  if ((results.at(-1)?.results.length ?? 0) === 0) return "duplicate";
  const changed = results.slice(0, -1).reduce((sum, r) => sum + (r.meta.changes ?? 0), 0);
  return changed > 0 ? "applied" : "ignored";
};
