import { outboxStatement } from "../events/outbox";
import type { UnsubscribeTarget } from "./unsubscribe-token";

// Consent changes made through a message's unsubscribe link. Each is one atomic batch that ends by
// reading back what the page shows, so a page costs one D1 round trip and shows what was committed.

/** What an unsubscribe page shows and decides on. */
export type ConsentState = {
  email: string;
  status: "active" | "unsubscribed" | "bounced" | "pending";
  /** Whether the subscriber may come back through this link (they left through it). */
  canResubscribe: boolean;
  /** Whether the link is in a message the campaign sent them (a preview's names no delivery). */
  fromDelivery: boolean;
  newsletterName: string;
};

type StateRow = {
  email: string;
  status: ConsentState["status"];
  status_source: string | null;
  status_campaign_id: string | null;
  newsletter_name: string;
  unsubscribed_at: number | null;
  has_delivery: number;
  campaign_id: string;
};

// The subscriber and the campaign must be of one workspace; the delivery may be absent (a link
// rendered in a preview or test send names no delivery).
const STATE_SQL = `
  SELECT s.email, s.status, s.status_source, s.status_campaign_id, n.name AS newsletter_name, c.id AS campaign_id, d.unsubscribed_at, d.id IS NOT NULL AS has_delivery
    FROM subscribers s
    JOIN campaigns c ON c.id = ?2 AND c.workspace_id = s.workspace_id
    JOIN newsletters n ON n.id = c.newsletter_id
    LEFT JOIN deliveries d ON d.campaign_id = c.id AND d.subscriber_id = s.id
   WHERE s.id = ?1`;

/** Whether the subscriber's status was set by this link's campaign (the page's ?2), not by another's. */
const leftThrough = (row: StateRow) => row.status_source === "link" && row.status_campaign_id === row.campaign_id;

const toState = (row: StateRow | undefined | null): ConsentState | undefined =>
  row
    ? {
        email: row.email,
        status: row.status,
        canResubscribe: row.status === "unsubscribed" && leftThrough(row) && row.unsubscribed_at !== null,
        fromDelivery: row.has_delivery === 1,
        newsletterName: row.newsletter_name,
      }
    : undefined;

const stateStatement = (d1: D1Database, target: UnsubscribeTarget) =>
  d1.prepare(STATE_SQL).bind(target.subscriberId, target.campaignId);

/** The page's state; undefined when the link names nothing (deleted, or from another deployment). */
export const findConsentState = async (d1: D1Database, target: UnsubscribeTarget) =>
  toState(await stateStatement(d1, target).first<StateRow>());

/** The campaign of the link is in the subscriber's workspace (the statements change nothing otherwise). */
const sameWorkspace = `EXISTS (SELECT 1 FROM campaigns c WHERE c.id = ?2 AND c.workspace_id = subscribers.workspace_id)`;

/**
 * Unsubscribe through the link: an active or pending subscriber becomes `unsubscribed` (a bounced
 * one stays bounced, an unsubscribed one stays as it is), and the campaign's delivery records that
 * its link did it (`unsubscribed_at`, set only by the use that changed the status: the delivery is
 * marked first, while the subscriber is still active, then the subscriber). Repeating it changes
 * nothing more.
 */
export const unsubscribeThroughLink = async (d1: D1Database, target: UnsubscribeTarget, now: number) => {
  const results = await d1.batch<StateRow>([
    d1
      .prepare(
        `UPDATE deliveries SET unsubscribed_at = ?3, updated_at = ?3
          WHERE campaign_id = ?2 AND subscriber_id = ?1 AND unsubscribed_at IS NULL
            AND EXISTS (SELECT 1 FROM subscribers s WHERE s.id = ?1 AND s.status IN ('active', 'pending'))`,
      )
      .bind(target.subscriberId, target.campaignId, now),
    d1
      .prepare(
        `UPDATE subscribers SET status = 'unsubscribed', status_source = 'link', status_campaign_id = ?2, updated_at = ?3
          WHERE id = ?1 AND status IN ('active', 'pending') AND ${sameWorkspace}`,
      )
      .bind(target.subscriberId, target.campaignId, now),
    // Written iff the statement above unsubscribed them (not on a repeat); `d1` dispatches it (withOutbox).
    outboxStatement(d1, { type: "subscriber.unsubscribed", resource: "subscriber", id: target.subscriberId }, now),
    stateStatement(d1, target),
  ]);
  return toState(results.at(-1)?.results[0]);
};

/**
 * Back to `active`, only for a subscriber whose status this very link set (never a bounce or a
 * complaint, nor an older link once they left through a newer one).
 */
export const resubscribeThroughLink = async (d1: D1Database, target: UnsubscribeTarget, now: number) => {
  const results = await d1.batch<StateRow>([
    d1
      .prepare(
        `UPDATE subscribers SET status = 'active', status_source = NULL, status_campaign_id = NULL, updated_at = ?3
          WHERE id = ?1 AND status = 'unsubscribed' AND status_source = 'link' AND status_campaign_id = ?2 AND ${sameWorkspace}
            AND EXISTS (SELECT 1 FROM deliveries d WHERE d.campaign_id = ?2 AND d.subscriber_id = ?1 AND d.unsubscribed_at IS NOT NULL)`,
      )
      .bind(target.subscriberId, target.campaignId, now),
    // Back to active is a change of the subscriber like any other.
    outboxStatement(d1, { type: "subscriber.updated", resource: "subscriber", id: target.subscriberId }, now),
    stateStatement(d1, target),
  ]);
  const changed = results[0]?.meta.changes === 1;
  return { changed, state: toState(results.at(-1)?.results[0]) };
};

/** The newsletter a campaign belongs to, by name: what a sample link (preview, test send) shows. */
export const newsletterNameOf = async (d1: D1Database, campaignId: string): Promise<string | undefined> =>
  (
    await d1
      .prepare("SELECT n.name FROM campaigns c JOIN newsletters n ON n.id = c.newsletter_id WHERE c.id = ?1")
      .bind(campaignId)
      .first<{ name: string }>()
  )?.name;
