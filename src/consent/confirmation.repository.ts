import type { Db } from "../db/client";
import { confirmationMessages, type subscribers } from "../db/schema";
import { outboxStatement } from "../events/outbox";
import type { Signer } from "../lib/signing";
import { type ConfirmTarget, madeForAddress } from "./confirm-token";

// Confirmations made through a confirmation (double opt-in) link: `pending` → `active`, in one atomic
// batch with its event, reading back what the page shows.

/** What a confirmation page shows and decides on. */
export type ConfirmState = {
  email: string;
  status: (typeof subscribers.$inferSelect)["status"];
  newsletterName: string;
};

type StateRow = { email: string; status: ConfirmState["status"]; newsletter_name: string };

// The subscriber and the newsletter must be of one workspace.
const STATE_SQL = `
  SELECT s.email, s.status, n.name AS newsletter_name
    FROM subscribers s JOIN newsletters n ON n.id = ?2 AND n.workspace_id = s.workspace_id
   WHERE s.id = ?1`;

/** The state, while the link names a subscriber still at the address it was mailed to. */
const toState = async (signer: Signer, target: ConfirmTarget, row: StateRow | undefined | null): Promise<ConfirmState | undefined> =>
  row && (await madeForAddress(signer, target, row.email)) ? { email: row.email, status: row.status, newsletterName: row.newsletter_name } : undefined;

/** The page's state; undefined when the link names nothing (deleted, another deployment, an old address). */
export const findConfirmState = async (d1: D1Database, signer: Signer, target: ConfirmTarget) =>
  toState(signer, target, await d1.prepare(STATE_SQL).bind(target.subscriberId, target.newsletterId).first<StateRow>());

/**
 * Confirms a `pending` subscriber still at `email` (the address the page read and the link names):
 * `active`, with a `subscriber.updated` event. Any other status stays as it is (someone who
 * unsubscribed or bounced since is not brought back by an old link); a repeat changes nothing.
 */
export const confirmThroughLink = async (d1: D1Database, signer: Signer, target: ConfirmTarget, email: string, now: number) => {
  const results = await d1.batch<StateRow>([
    d1
      .prepare(
        `UPDATE subscribers SET status = 'active', status_source = NULL, status_campaign_id = NULL, updated_at = ?3
          WHERE id = ?1 AND status = 'pending' AND email = ?2
            AND EXISTS (SELECT 1 FROM newsletters n WHERE n.id = ?4 AND n.workspace_id = subscribers.workspace_id)`,
      )
      .bind(target.subscriberId, email, now, target.newsletterId),
    // Written iff the statement above confirmed them; `d1` dispatches it (withOutbox).
    outboxStatement(d1, { type: "subscriber.updated", resource: "subscriber", id: target.subscriberId }, now),
    d1.prepare(STATE_SQL).bind(target.subscriberId, target.newsletterId),
  ]);
  return { changed: results[0]?.meta.changes === 1, state: await toState(signer, target, results.at(-1)?.results[0]) };
};

/** Who a confirmation is asked of and which newsletter it comes from, read together (one D1 call); each null when not in the workspace. */
export const findConfirmationParties = async (d1: D1Database, workspaceId: string, subscriberId: string, newsletterId: string) => {
  const row = await d1
    .prepare(
      `SELECT s.id AS subscriber_id, s.email, s.status, n.id AS newsletter_id, n.name, n.from_email, n.from_name, n.reply_to
         FROM (SELECT 1)
         LEFT JOIN subscribers s ON s.id = ?2 AND s.workspace_id = ?1
         LEFT JOIN newsletters n ON n.id = ?3 AND n.workspace_id = ?1`,
    )
    .bind(workspaceId, subscriberId, newsletterId)
    .first<{
      subscriber_id: string | null;
      email: string | null;
      status: ConfirmState["status"] | null;
      newsletter_id: string | null;
      name: string | null;
      from_email: string | null;
      from_name: string | null;
      reply_to: string | null;
    }>();
  return {
    subscriber: row?.subscriber_id && row.email && row.status ? { id: row.subscriber_id, email: row.email, status: row.status } : null,
    newsletter:
      row?.newsletter_id && row.name !== null && row.from_email
        ? { id: row.newsletter_id, name: row.name, fromEmail: row.from_email, fromName: row.from_name, replyTo: row.reply_to }
        : null,
  };
};

/**
 * The record of a confirmation mail the provider took, by its message id, so that Resend's feedback
 * about it reaches the subscriber (src/feedback/feedback.repository.ts). Kept once (a retry under the
 * same Idempotency-Key asks the provider under the same key: the same message id).
 */
export const confirmationMessageRecord = (db: Db, row: { providerMessageId: string; workspaceId: string; subscriberId: string; email: string; at: number }) =>
  db
    .insert(confirmationMessages)
    .values({ providerMessageId: row.providerMessageId, workspaceId: row.workspaceId, subscriberId: row.subscriberId, email: row.email, createdAt: row.at })
    .onConflictDoNothing();
