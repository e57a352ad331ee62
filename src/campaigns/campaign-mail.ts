import type { Context } from "hono";
import { notFound, ApiError } from "../errors/api-error";
import { SAMPLE_RECIPIENT } from "../content";
import { newId } from "../lib/ids";
import { signerFor } from "../lib/signing";
import type { AppEnv } from "../lib/types";
import { type Addressee, type Composer, composeEmail, composerFor, SAMPLE_SUBSCRIBER_ID } from "../sending/compose";
import { chooseIntegration } from "../sending/producer";
import { loadMessageContext } from "../sending/send.repository";
import { findSubscriber } from "../subscribers/subscribers.repository";
import type { z } from "@hono/zod-openapi";
import type { EmailPreviewSchema, TestSendSchema } from "./campaigns.schemas";

// The preview and the test send: the campaign's message composed exactly as a send composes it
// (src/sending/compose.ts), for one subscriber or the sample one.

const SAMPLE: Addressee = { ...SAMPLE_RECIPIENT, id: SAMPLE_SUBSCRIBER_ID };

const composerOf = async (c: Context<AppEnv>, workspaceId: string, campaignId: string): Promise<Composer> => {
  const context = await loadMessageContext(c.env.DB, campaignId, workspaceId);
  if (!context) throw notFound("campaign", campaignId);
  return composerFor(context, c.env, signerFor(c.env));
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
    throw new ApiError("resource_missing", `No subscriber ${subscriberId} exists in this workspace`, { param: "subscriber_id" });
  }
  const addressee: Addressee = subscriber
    ? { id: subscriber.id, email: subscriber.email, name: subscriber.name, tags: subscriber.tags, location: subscriber.location, source: subscriber.source }
    : SAMPLE;
  const email = await composeEmail(composer, addressee, "preview");
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

/** Sends the sample subscriber's message, subject prefixed `[Test] `, to each address; records nothing. */
export const testSend = async (
  c: Context<AppEnv>,
  workspaceId: string,
  campaignId: string,
  request: { emails: string[]; integrationSlug: string | undefined },
): Promise<z.infer<typeof TestSendSchema>> => {
  const { integration } = chooseIntegration(request.integrationSlug, c.var.principal.mode, c.env);
  const composer = await composerOf(c, workspaceId, campaignId);
  const results = await Promise.all(
    request.emails.map(async (to) => {
      // A fresh id per message: the provider's idempotency key, so no two test emails collapse.
      const email = await composeEmail(composer, SAMPLE, newId("delivery"), to);
      const outcome = await integration.send({ ...email, subject: `[Test] ${email.subject}` });
      return outcome.kind === "sent"
        ? { email: to, status: "sent" as const, provider_message_id: outcome.providerMessageId, error: null }
        : { email: to, status: "failed" as const, provider_message_id: null, error: outcome.error };
    }),
  );
  return { object: "test_send", results };
};
