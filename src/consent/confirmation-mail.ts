import type { Context } from "hono";
import { ApiError, notFound, resourceMissing } from "../errors/api-error";
import { oneLine } from "../content/layout";
import { escapeHtml, isolatedHtml, withoutDirectionControls } from "../lib/html";
import { publicBaseUrl } from "../lib/public-origin";
import type { AppEnv } from "../lib/types";
import { formatFrom } from "../sending/compose";
import type { OutboundEmail } from "../sending/integrations/types";
import { notTakenYet, oneOffIds, oneOffOutcome, oneOffResult } from "../sending/one-off";
import { chooseIntegration } from "../sending/producer";
import { confirmToken, confirmUrl } from "./confirm-token";
import { findConfirmationParties } from "./confirmation.repository";

// A pending subscriber's confirmation (double opt-in): the signed link that makes them `active`
// (GET /c/{token} asks, POST confirms: consent.handlers.ts), mailed from a newsletter on request.

export type ConfirmationRequest = { newsletterId: string; send: boolean; integrationSlug: string | undefined };

/** The confirmation message: the newsletter's name and sender, one button, the link written out too. */
const confirmationEmail = (
  newsletter: { name: string; fromName: string | null; fromEmail: string; replyTo: string | null },
  to: string,
  url: string,
  messageId: string,
): OutboundEmail => {
  // The name as the footer and the pages show it: one line, without direction controls (an override
  // left open turned the sentence round it), and isolated in html.
  const plainName = withoutDirectionControls(oneLine(newsletter.name));
  const name = isolatedHtml(plainName);
  const href = escapeHtml(url);
  return {
    deliveryId: messageId,
    from: formatFrom(newsletter),
    replyTo: newsletter.replyTo,
    to,
    subject: `Confirm your subscription to ${plainName}`,
    html: `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>Confirm your subscription</title></head>
<body style="margin:0;padding:24px 16px;background:#f4f5f7;font:16px/1.55 -apple-system,BlinkMacSystemFont,'Segoe UI',Roboto,Arial,sans-serif;color:#1c1e21">
<div style="max-width:480px;margin:0 auto;background:#fff;border:1px solid #e3e6ea;border-radius:12px;padding:28px 24px">
<p style="margin:0 0 4px;color:#5f6672;font-size:14px">${name}</p>
<h1 style="margin:0 0 12px;font-size:22px;line-height:1.3">Confirm your subscription</h1>
<p style="margin:0 0 20px">Press the button to start receiving ${name}.</p>
<p style="margin:0 0 20px"><a href="${href}" style="display:inline-block;background:#1f5eff;color:#fff;text-decoration:none;font-weight:600;padding:12px 20px;border-radius:10px">Confirm subscription</a></p>
<p style="margin:0;color:#5f6672;font-size:14px">Or open this link: <a href="${href}" style="color:#1f5eff;word-break:break-all">${href}</a></p>
<p style="margin:16px 0 0;color:#5f6672;font-size:14px">Didn’t ask for this? Ignore this message: nothing is sent until you confirm.</p>
</div></body></html>
`,
    text: `Confirm your subscription to ${plainName}\n\nOpen this link to start receiving it:\n${url}\n\nDidn’t ask for this? Ignore this message: nothing is sent until you confirm.\n`,
    headers: {},
  };
};

export const askToConfirm = async (c: Context<AppEnv>, workspaceId: string, subscriberId: string, request: ConfirmationRequest) => {
  // The integration first, as for a send (one named is checked even when nothing is mailed, so a
  // typo shows at once): a request it cannot serve reads nothing. Only making the link needs none.
  const integration =
    request.send || request.integrationSlug !== undefined ? chooseIntegration(request.integrationSlug, c.var.principal.mode, c.env).integration : undefined;
  const { subscriber, newsletter } = await findConfirmationParties(c.var.db.$client, workspaceId, subscriberId, request.newsletterId);
  if (!subscriber) throw notFound("subscriber", subscriberId);
  if (!newsletter) throw resourceMissing("newsletter_id", "newsletter", request.newsletterId);
  if (subscriber.status !== "pending") {
    throw new ApiError("subscriber_not_pending", `Subscriber ${subscriberId} is ${subscriber.status}: only a pending subscriber is asked to confirm`);
  }
  const url = confirmUrl(publicBaseUrl(c.env), await confirmToken(c.var.signer, subscriber, newsletter.id));
  const answer = { object: "subscriber_confirmation" as const, subscriber_id: subscriber.id, newsletter_id: newsletter.id, email: subscriber.email, confirmation_url: url };
  if (!request.send || !integration) return { answer: { ...answer, result: null }, feedbackId: undefined };

  const ids = await oneOffIds(c, "confirmation");
  const messageId = ids.messageId(0);
  const sent = await integration.sendBatch([confirmationEmail(newsletter, subscriber.email, url, messageId)], ids.providerKey, { tries: 1, urgent: true });
  if (sent.kind === "retry" || sent.kind === "deferred") throw notTakenYet(sent, "confirmation mail", ids.keyed);
  const result = oneOffResult(oneOffOutcome(sent, messageId, "confirmation mail"));
  // The message id the provider's feedback will name, when it reports any (the sandbox does not).
  const feedbackId = integration.reportsFeedback && result.status === "sent" ? (result.provider_message_id ?? undefined) : undefined;
  return { answer: { ...answer, result }, feedbackId };
};
