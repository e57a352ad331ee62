import type { Context } from "hono";
import { invalidParam, notFound, resourceMissing } from "../errors/api-error";
import { MAX_RENDERED, SAMPLE_RECIPIENT, TemplateError, templateInvalid } from "../content";
import type { AppEnv } from "../lib/types";
import { type Addressee, type Composer, composeEmail, composerFor, SAMPLE_SUBSCRIBER_ID } from "../sending/compose";
import { type EmailOutcome, noOutcome } from "../sending/integrations/types";
import { notTakenYet, oneOffIds, oneOffOutcome, oneOffResult } from "../sending/one-off";
import { chooseIntegration } from "../sending/producer";
import { loadMessageContext } from "../sending/send.repository";
import { findSubscriber } from "../subscribers/subscribers.repository";
import type { z } from "@hono/zod-openapi";
import type { EmailPreviewSchema, TestSendSchema } from "./campaigns.schemas";

// The preview and the test send: the campaign's message composed exactly as a send composes it
// (src/sending/compose.ts), for one subscriber or the sample one.

const SAMPLE: Addressee = { ...SAMPLE_RECIPIENT, id: SAMPLE_SUBSCRIBER_ID };

const composerOf = async (c: Context<AppEnv>, workspaceId: string, campaignId: string): Promise<Composer> => {
  const context = await loadMessageContext(c.var.db.$client, campaignId, workspaceId);
  if (!context) throw notFound("campaign", campaignId);
  return composerFor(context, c.env, c.var.signer);
};

/** The message for `addressee`; one that cannot be rendered for them is a 400 naming the template. */
const compose = async (composer: Composer, addressee: Addressee, deliveryId: string, to?: string) => {
  try {
    return await composeEmail(composer, addressee, deliveryId, to);
  } catch (err) {
    throw err instanceof TemplateError ? templateInvalid(err) : err;
  }
};

export const previewEmail = async (
  c: Context<AppEnv>,
  workspaceId: string,
  campaignId: string,
  subscriberId: string | null,
): Promise<z.infer<typeof EmailPreviewSchema>> => {
  const [composer, subscriber] = await Promise.all([
    composerOf(c, workspaceId, campaignId),
    subscriberId === null ? undefined : findSubscriber(c.var.db, workspaceId, subscriberId),
  ]);
  if (subscriberId !== null && !subscriber) {
    throw resourceMissing("subscriber_id", "subscriber", subscriberId);
  }
  // A real subscriber's unsubscribe link changes their consent: it is given only to a credential
  // that may change it (subscribers:write); any other gets the campaign's test link in its place
  // (same shape, its page changes nothing), so a read scope never carries a consent write.
  const linkId = subscriber && c.var.principal.scopes.includes("subscribers:write") ? subscriber.id : SAMPLE_SUBSCRIBER_ID;
  const addressee: Addressee = subscriber
    ? { id: linkId, email: subscriber.email, name: subscriber.name, tags: subscriber.tags, location: subscriber.location, source: subscriber.source }
    : SAMPLE;
  const email = await compose(composer, addressee, "preview");
  return {
    object: "email_preview",
    from: email.from,
    reply_to: email.replyTo,
    to: email.to,
    subject: email.subject,
    html: email.html,
    text: email.text,
    headers: email.headers,
  };
};

const TEST_PREFIX = "[Test] ";

/** Sends the sample subscriber's message, subject prefixed `[Test] `, to each address; records nothing. */
export const testSend = async (
  c: Context<AppEnv>,
  workspaceId: string,
  campaignId: string,
  request: { emails: string[]; integrationSlug: string | undefined },
): Promise<z.infer<typeof TestSendSchema>> => {
  const { integration } = chooseIntegration(request.integrationSlug, c.var.principal.mode, c.env);
  const composer = await composerOf(c, workspaceId, campaignId);
  // One message (the sample subscriber's), addressed to each.
  const email = await compose(composer, SAMPLE, "test");
  const subject = `${TEST_PREFIX}${email.subject}`;
  if (subject.length > MAX_RENDERED.subject) {
    throw invalidParam(
      "subject",
      `subject: with the test's "${TEST_PREFIX}" prefix it renders to ${subject.length} characters, more than a subject's ${MAX_RENDERED.subject}; shorten it by ${subject.length - MAX_RENDERED.subject}`,
    );
  }
  // The provider's key, and the message ids its request carries (as tags): the same on a retry of
  // this request (same Idempotency-Key), so the provider mails nobody twice.
  const ids = await oneOffIds(c, "test_send");
  const emails = request.emails.map((to, i) => ({ ...email, deliveryId: ids.messageId(i), to, subject }));
  // Each address's outcome, by message id. A request refused for one address named in it fails that
  // address only: the others go in a request of their own (as a send's batch does), under a key of
  // its own that a retry of this test send meets again (the provider's refusals repeat).
  const outcomes = new Map<string, EmailOutcome>();
  for (let round = 0, pending = emails; pending.length > 0; round++) {
    // One try per request (with its own asks under the key): a person waits for this answer.
    const answer = await integration.sendBatch(pending, round === 0 ? ids.providerKey : `${ids.providerKey}:${round}`, { tries: 1, urgent: true });
    if (answer.kind === "retry" || answer.kind === "deferred") throw notTakenYet(answer, "test send", ids.keyed);
    if (answer.kind === "rejected" && !answer.earlierMayBeTaken) {
      outcomes.set(answer.deliveryId, { kind: "failed", error: answer.error });
      pending = pending.filter((e) => e.deliveryId !== answer.deliveryId);
      continue;
    }
    for (const e of pending) outcomes.set(e.deliveryId, oneOffOutcome(answer, e.deliveryId, "test send"));
    pending = [];
  }
  const results = emails.map((e) => ({ email: e.to, ...oneOffResult(outcomes.get(e.deliveryId) ?? noOutcome) }));
  return { object: "test_send", results };
};
