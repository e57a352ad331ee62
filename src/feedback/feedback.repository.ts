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
const SUBSCRIBER_OF_MESSAGE = `id IN (SELECT subscriber_id FROM deliveries WHERE provider_message_id = ?2) AND ${UNSEEN}`;
/**
 * The subscriber still at the address the message went to (case aside: addresses are ASCII, and
 * SQLite's lower() folds ASCII letters as the service's key does): a bounce says that address is dead,
 * not the one the subscriber has moved to since.
 */
const SUBSCRIBER_AT_ADDRESS_OF_MESSAGE = `${SUBSCRIBER_OF_MESSAGE} AND email_key = (SELECT lower(email) FROM deliveries WHERE provider_message_id = ?2)`;

/**
 * The subscriber a confirmation mail went to (no delivery row: POST /subscribers/{id}/confirmation
 * records its message id), while it still has that address: feedback about it is the subscriber's
 * as a campaign message's is.
 */
const SUBSCRIBER_OF_CONFIRMATION = `id = (SELECT subscriber_id FROM confirmation_messages WHERE provider_message_id = ?2) AND ${UNSEEN}
  AND email_key = (SELECT lower(email) FROM confirmation_messages WHERE provider_message_id = ?2)`;

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
  const subscriber = sql`(SELECT subscriber_id FROM deliveries WHERE provider_message_id = ${emailId})`;
  const confirmed = sql`(SELECT subscriber_id FROM confirmation_messages WHERE provider_message_id = ${emailId})`;
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
      // Only a permanent bounce says the address is dead; others are recorded on the delivery. A
      // complaint stays what it is: a bounce for the very message complained about changes neither
      // the delivery nor the subscriber (whatever the API did to the status since), and one for
      // another message leaves an address the complaint keeps out as it is.
      if (event.bounceType !== "Permanent") return effects;
      return [
        ...effects,
        {
          sql: `UPDATE subscribers SET status = 'bounced', status_source = 'bounce', updated_at = ?4
                 WHERE ${SUBSCRIBER_OF_CONFIRMATION} AND status IN ('active', 'pending', 'unsubscribed') AND status_source IS NOT 'complaint'
                   AND NOT EXISTS (SELECT 1 FROM confirmation_messages WHERE provider_message_id = ?2 AND complained_at IS NOT NULL)`,
          event: { type: "subscriber.bounced", resource: "subscriber", id: confirmed },
        },
        {
          sql: `UPDATE subscribers SET status = 'bounced', status_source = 'bounce', updated_at = ?4
                 WHERE ${SUBSCRIBER_AT_ADDRESS_OF_MESSAGE} AND status IN ('active', 'pending', 'unsubscribed') AND status_source IS NOT 'complaint'
                   AND NOT EXISTS (SELECT 1 FROM deliveries WHERE provider_message_id = ?2 AND status = 'complained')`,
          event: { type: "subscriber.bounced", resource: "subscriber", id: subscriber },
        },
      ];
    }
    case "email.complained":
      return [
        ...SENT_AFTER_ALL,
        { sql: moveDelivery("complained"), event: { type: "delivery.complained", resource: "delivery", id: delivery } },
        {
          sql: `UPDATE subscribers SET status = 'unsubscribed', status_source = 'complaint', updated_at = ?4
                 WHERE ${SUBSCRIBER_OF_MESSAGE} AND status IN ('active', 'pending')`,
          event: { type: "subscriber.unsubscribed", resource: "subscriber", id: subscriber },
        },
        // Already unsubscribed (through a link, say): the complaint is now what keeps them out, so
        // no unsubscribe link can bring them back. Nothing the API shows changes.
        {
          sql: `UPDATE subscribers SET status_source = 'complaint'
                 WHERE ${SUBSCRIBER_OF_MESSAGE} AND status = 'unsubscribed' AND status_source IS NOT 'complaint'`,
        },
        // A complaint about a confirmation mail: recorded on the mail (a later bounce of it then changes
        // nothing, as for a complained delivery), and the same for its subscriber (while still at that address).
        { sql: `UPDATE confirmation_messages SET complained_at = ?4 WHERE ${OF_MESSAGE} AND complained_at IS NULL` },
        {
          sql: `UPDATE subscribers SET status = 'unsubscribed', status_source = 'complaint', updated_at = ?4
                 WHERE ${SUBSCRIBER_OF_CONFIRMATION} AND status IN ('active', 'pending')`,
          event: { type: "subscriber.unsubscribed", resource: "subscriber", id: confirmed },
        },
        {
          sql: `UPDATE subscribers SET status_source = 'complaint'
                 WHERE ${SUBSCRIBER_OF_CONFIRMATION} AND status = 'unsubscribed' AND status_source IS NOT 'complaint'`,
        },
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

/** Deletes up to `take` receipts received before `before`, oldest first; returns how many. */
export const deleteReceiptsBefore = async (d1: D1Database, before: number, take: number): Promise<number> => {
  const { meta } = await d1
    .prepare(
      `DELETE FROM webhook_receipts WHERE svix_id IN (SELECT svix_id FROM webhook_receipts WHERE received_at < ?1 ORDER BY received_at LIMIT ?2)`,
    )
    .bind(before, take)
    .run();
  return meta.changes;
};

/** Deletes up to `take` confirmation mail records made before `before`, oldest first; returns how many. */
export const deleteConfirmationMessagesBefore = async (d1: D1Database, before: number, take: number): Promise<number> => {
  const { meta } = await d1
    .prepare(
      `DELETE FROM confirmation_messages WHERE provider_message_id IN
         (SELECT provider_message_id FROM confirmation_messages WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)`,
    )
    .bind(before, take)
    .run();
  return meta.changes;
};
