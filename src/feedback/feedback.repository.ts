import { sql } from "drizzle-orm";
import type { EventSpec } from "../events/event-statement";
import { outboxStatement } from "../events/outbox";

// Resend's delivery feedback applied to deliveries and subscribers. Every effect of one event and
// its receipt (by svix-id) commit in one atomic batch; each effect runs only while the receipt is
// absent, and the receipt comes after every effect, so a redelivered event changes nothing.

export type FeedbackEvent = {
  svixId: string;
  type: string;
  emailId: string | null;
  bounceType: string | null;
  /** The delivery the message was tagged with (`data.tags`), when the event carries it. */
  deliveryId: string | null;
  /** When the provider says it happened (epoch ms). */
  at: number;
};

/** Delivery statuses a provider event may move, in order: an event only ever moves a delivery forward. */
const RANK = `CASE status WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 WHEN 'bounced' THEN 3 WHEN 'complained' THEN 4 ELSE 0 END`;
const rankOf = { delivered: 2, complained: 4 } as const;

// ?1 svix id, ?2 provider message id, ?3 event time, ?4 now, ?5 bounce type, ?6 tagged delivery id:
// the same bindings for every statement (each binds those up to the highest it names).
const UNSEEN = `NOT EXISTS (SELECT 1 FROM webhook_receipts WHERE svix_id = ?1)`;
const OF_MESSAGE = `provider_message_id = ?2 AND ${UNSEEN}`;

/**
 * The two kinds of message feedback names, each found by its provider message id: a campaign's
 * delivery, and a confirmation mail (no delivery row: POST /subscribers/{id}/confirmation records its
 * message id). `complainedAbout`: the condition on the message's row once a complaint was reported
 * about it. `complaintFollowsPerson`: a complaint reaches the subscriber whatever their address now
 * (a delivery's); else only while they keep the address the mail went to (a confirmation's record is
 * of that address).
 */
type Mail = { table: "deliveries" | "confirmation_messages"; complainedAbout: string; complaintFollowsPerson: boolean };
const CAMPAIGN_MAIL: Mail = { table: "deliveries", complainedAbout: "status = 'complained'", complaintFollowsPerson: true };
const CONFIRMATION_MAIL: Mail = { table: "confirmation_messages", complainedAbout: "complained_at IS NOT NULL", complaintFollowsPerson: false };

/**
 * The subscriber a message went to; `atAddress`: only while they still have the address it went to
 * (case aside: addresses are ASCII, and SQLite's lower() folds ASCII letters as the service's key
 * does), as a bounce says that address is dead, not the one the subscriber has moved to since.
 */
const subscriberOf = (mail: Mail, atAddress: boolean) =>
  `id IN (SELECT subscriber_id FROM ${mail.table} WHERE provider_message_id = ?2) AND ${UNSEEN}` +
  (atAddress ? ` AND email_key = (SELECT lower(email) FROM ${mail.table} WHERE provider_message_id = ?2)` : "");

/** The subscriber's id for the outgoing event, as the message's row names it. */
const subscriberIdOf = (mail: Mail, emailId: string) => sql`(SELECT subscriber_id FROM ${sql.raw(mail.table)} WHERE provider_message_id = ${emailId})`;

/**
 * A permanent bounce: the subscriber `bounced`. A complaint stays what it is: a bounce for the very
 * message complained about changes nothing (whatever the API did to the status since), and one for
 * another message leaves an address the complaint keeps out as it is.
 */
const bounceSubscriber = (mail: Mail, emailId: string): Effect => ({
  sql: `UPDATE subscribers SET status = 'bounced', status_source = 'bounce', updated_at = ?4
         WHERE ${subscriberOf(mail, true)} AND status IN ('active', 'pending', 'unsubscribed') AND status_source IS NOT 'complaint'
           AND NOT EXISTS (SELECT 1 FROM ${mail.table} WHERE provider_message_id = ?2 AND ${mail.complainedAbout})`,
  event: { type: "subscriber.bounced", resource: "subscriber", id: subscriberIdOf(mail, emailId) },
});

/** A complaint: the subscriber `unsubscribed`, the complaint what keeps them out. */
const complainingSubscriber = (mail: Mail, emailId: string): Effect[] => {
  const who = subscriberOf(mail, !mail.complaintFollowsPerson);
  return [
    {
      sql: `UPDATE subscribers SET status = 'unsubscribed', status_source = 'complaint', updated_at = ?4
             WHERE ${who} AND status IN ('active', 'pending')`,
      event: { type: "subscriber.unsubscribed", resource: "subscriber", id: subscriberIdOf(mail, emailId) },
    },
    // Already unsubscribed (through a link, say): the complaint is now what keeps them out, so
    // no unsubscribe link can bring them back. Nothing the API shows changes.
    { sql: `UPDATE subscribers SET status_source = 'complaint' WHERE ${who} AND status = 'unsubscribed' AND status_source IS NOT 'complaint'` },
  ];
};

const moveDelivery = (status: keyof typeof rankOf) =>
  `UPDATE deliveries SET status = '${status}', updated_at = ?4
    WHERE ${OF_MESSAGE} AND status IN ('sent', 'delivered', 'bounced', 'complained') AND ${RANK} < ${rankOf[status]}`;

/**
 * A report of the message (delivered, bounced, complained) proves it was sent: a delivery recorded
 * `outcome_unknown` (in a request Resend may have taken) is `sent` after all, and its operation's
 * counters follow (one failed less, one handed over more). Its operation's and campaign's own
 * statuses stay as they ended. The move the report makes comes next, as for any sent delivery.
 */
const SENT_AFTER_ALL: Effect[] = [
  {
    sql: `UPDATE deliveries SET status = 'sent', error = NULL, attempts = max(attempts, 1), updated_at = ?4
           WHERE ${OF_MESSAGE} AND status = 'failed' AND json_extract(error, '$.code') = 'outcome_unknown'`,
  },
  {
    sql: `UPDATE operations SET failed = failed - changes(), delivered = delivered + changes(), updated_at = ?4
           WHERE changes() > 0 AND id = (SELECT operation_id FROM deliveries WHERE provider_message_id = ?2)`,
  },
];

/**
 * The first open (or click): the earliest report, whatever order the reports arrive in, its time
 * kept between the delivery's creation and now (a report's clock is not this service's).
 */
const firstTime = (column: "opened_at" | "clicked_at") => {
  const at = `max(created_at, min(?3, ?4))`;
  return `UPDATE deliveries SET ${column} = ${at}, updated_at = ?4
           WHERE ${OF_MESSAGE} AND (${column} IS NULL OR ${column} > ${at})`;
};

/** One change an event makes, and the outgoing event (outbox) that reports it when it applies. */
type Effect = { sql: string; event?: EventSpec };

/** The SQL of each effect an event has; none for an event type this service does not act on. */
const effectsOf = (event: FeedbackEvent): Effect[] => {
  const emailId = event.emailId ?? "";
  const delivery = sql`(SELECT id FROM deliveries WHERE provider_message_id = ${emailId})`;
  switch (event.type) {
    case "email.delivered":
      return [...SENT_AFTER_ALL, { sql: moveDelivery("delivered") }];
    case "email.bounced": {
      const effects: Effect[] = [
        ...SENT_AFTER_ALL,
        // The move to `bounced` carries the bounce's type; afterwards only a Permanent bounce
        // replaces a softer one (never the other way round, never on a complained delivery). Either
        // is a change of the delivery, reported by its event.
        {
          sql: `UPDATE deliveries SET status = 'bounced', bounce_type = ?5, updated_at = ?4
                 WHERE ${OF_MESSAGE} AND (status IN ('sent', 'delivered') OR (status = 'bounced' AND ?5 = 'Permanent' AND bounce_type IS NOT 'Permanent'))`,
          event: { type: "delivery.bounced", resource: "delivery", id: delivery },
        },
      ];
      // Only a permanent bounce says the address is dead; others are recorded on the delivery.
      if (event.bounceType !== "Permanent") return effects;
      return [...effects, bounceSubscriber(CAMPAIGN_MAIL, emailId), bounceSubscriber(CONFIRMATION_MAIL, emailId)];
    }
    case "email.complained":
      return [
        ...SENT_AFTER_ALL,
        { sql: moveDelivery("complained"), event: { type: "delivery.complained", resource: "delivery", id: delivery } },
        ...complainingSubscriber(CAMPAIGN_MAIL, emailId),
        // A confirmation mail's complaint is recorded on it (a later bounce of it then changes nothing).
        { sql: `UPDATE confirmation_messages SET complained_at = ?4 WHERE ${OF_MESSAGE} AND complained_at IS NULL` },
        ...complainingSubscriber(CONFIRMATION_MAIL, emailId),
      ];
    case "email.opened":
      return [{ sql: firstTime("opened_at") }];
    case "email.clicked":
      return [{ sql: firstTime("clicked_at") }];
    default:
      return [];
  }
};

/** How many of the shared bindings (?1 … ?6) a statement uses: D1 refuses more values than it names. */
const placeholders = (query: string) => Math.max(...[...query.matchAll(/\?(\d)/g)].map((m) => Number(m[1])));

/**
 * A delivery whose message id was never learnt (Resend accepted its batch in a request whose answer
 * was lost) is found by the delivery id the message was tagged with, and learns its id first, so the
 * effects that follow find it by message id as any other.
 */
const LEARN_MESSAGE_ID = `UPDATE deliveries SET provider_message_id = ?2, updated_at = ?4
  WHERE id = ?6 AND provider_message_id IS NULL AND status <> 'queued' AND ${UNSEEN}
    AND NOT EXISTS (SELECT 1 FROM deliveries WHERE provider_message_id = ?2)`;

/**
 * The one place that builds an event's statements: each effect followed by the outgoing event that
 * reports it (written only if the effect changed a row: subscriber.bounced, subscriber.unsubscribed,
 * delivery.bounced, delivery.complained), then the receipt.
 */
const feedbackStatements = (d1: D1Database, event: FeedbackEvent, now: number): D1PreparedStatement[] => {
  const effects = event.emailId === null ? [] : effectsOf(event);
  const learn: Effect[] = effects.length > 0 && event.deliveryId !== null ? [{ sql: LEARN_MESSAGE_ID }] : [];
  const bindings = [event.svixId, event.emailId, event.at, now, event.bounceType, event.deliveryId];
  const statements = [...learn, ...effects].flatMap(({ sql: query, event: outgoing }) => [
    d1.prepare(query).bind(...bindings.slice(0, placeholders(query))),
    ...(outgoing ? [outboxStatement(d1, outgoing, now)] : []),
  ]);
  // Not while the tagged delivery is in flight: no receipt, so the event is taken when Resend sends it again.
  const inFlight = learn.length > 0 ? IN_FLIGHT : "0";
  const receipt = d1
    .prepare(
      `INSERT INTO webhook_receipts (svix_id, event_type, received_at) SELECT ?1, ?7, ?4 WHERE NOT (${inFlight})
         ON CONFLICT (svix_id) DO NOTHING RETURNING svix_id`,
    )
    .bind(...bindings, event.type);
  const pending = d1.prepare(`SELECT ${inFlight} AS in_flight`).bind(...bindings.slice(0, placeholders(inFlight)));
  return [...statements, receipt, pending];
};

/**
 * A report of a message Resend took in a request whose answer is not recorded yet: the delivery
 * named by its tag is still `queued`, was in a request, and no delivery has the message's id. Its
 * effects would find nothing (they match the message id, which the answer brings), so it is not
 * taken now, nor recorded as seen: Resend sends it again (it retries an event that is not answered
 * 2xx), and by then the answer is recorded.
 */
const IN_FLIGHT = `(EXISTS (SELECT 1 FROM deliveries WHERE id = ?6 AND status = 'queued' AND provider_message_id IS NULL AND asked_seq > 0)
  AND NOT EXISTS (SELECT 1 FROM deliveries WHERE provider_message_id = ?2))`;

/**
 * Applies an event: `duplicate` when its svix-id was seen before, `ignored` when it changed nothing,
 * `in_flight` when it reports a message whose request's answer is not recorded yet (nothing done).
 */
export const applyFeedback = async (
  d1: D1Database,
  event: FeedbackEvent,
  now: number,
): Promise<"applied" | "ignored" | "duplicate" | "in_flight"> => {
  // `d1` is an outbox (withOutbox): the events the batch writes are dispatched once it commits.
  const results = await d1.batch(feedbackStatements(d1, event, now));
  const [receipt, pending] = results.slice(-2);
  if ((pending?.results[0] as { in_flight?: number } | undefined)?.in_flight === 1) return "in_flight";
  if ((receipt?.results.length ?? 0) === 0) return "duplicate";
  const changed = results.slice(0, -2).reduce((sum, r) => sum + (r.meta.changes ?? 0), 0);
  return changed > 0 ? "applied" : "ignored";
};

/** Deletes up to `take` rows of `table` made before `before` (by `at`), oldest first; returns how many. */
const deleteOldest =
  (table: string, key: string, at: string) =>
  async (d1: D1Database, before: number, take: number): Promise<number> => {
    const { meta } = await d1
      .prepare(`DELETE FROM ${table} WHERE ${key} IN (SELECT ${key} FROM ${table} WHERE ${at} < ?1 ORDER BY ${at} LIMIT ?2)`)
      .bind(before, take)
      .run();
    return meta.changes;
  };

/** Receipts received before a time: no redelivery comes that late. */
export const deleteReceiptsBefore = deleteOldest("webhook_receipts", "svix_id", "received_at");

/** Confirmation mail records made before a time: no feedback comes that late. */
export const deleteConfirmationMessagesBefore = deleteOldest("confirmation_messages", "provider_message_id", "created_at");
