import { unsubscribeToken, unsubscribeUrl } from "../consent/unsubscribe-token";
import { publicBaseUrl } from "../lib/public-origin";
import { type CompiledCampaign, compileCampaign, type Recipient, renderMessage, TemplateError } from "../content";
import type { Signer } from "../lib/signing";
import type { OutboundEmail } from "./integrations/types";
import type { MessageContext } from "./send.repository";

// Every campaign email is composed here: a delivery of a send (any integration, the sandbox too),
// a test send and the preview. The campaign is compiled once per unit of work (a queue message, a
// request), then each recipient costs one render and one signature.

export type Composer = {
  /**
   * The campaign compiled, or why it cannot be: a template saved under earlier checks that today's
   * refuse (the checks run when a campaign is saved, but a service upgrade can tighten them). Every
   * message then fails as one that cannot be rendered does, never the whole step.
   */
  compiled: CompiledCampaign | TemplateError;
  campaignId: string;
  from: string;
  replyTo: string | null;
  publicBaseUrl: string;
  signer: Signer;
};

/** A subscriber as a template sees it, with the id its unsubscribe link names. */
export type Addressee = Recipient & { id: string };

/** The sample subscriber's id: well-formed, so its link has the real shape, and naming nobody. */
export const SAMPLE_SUBSCRIBER_ID = "sub_00000000000000000000000000";

/** The From header of a newsletter's mail: `"Name" <address>`, or the address alone. */
export const formatFrom = (context: Pick<MessageContext, "fromName" | "fromEmail">) =>
  context.fromName ? `"${context.fromName.replace(/["\\]/g, "\\$&")}" <${context.fromEmail}>` : context.fromEmail;

// Compiling a campaign (parsing and checking its templates, deriving its text part from the html)
// takes milliseconds for a large html, more than rendering a whole delivery chunk: an isolate keeps
// the last campaigns it compiled, each with the exact content it was compiled from, and reuses one
// only for the same content (a newsletter renamed mid-send is compiled again).
const COMPILED_KEPT = 8;
const compiledCampaigns = new Map<string, { content: (string | null)[]; compiled: CompiledCampaign }>();

const compiledFor = (context: MessageContext): CompiledCampaign => {
  const content = [context.subject, context.preheader, context.html, context.text, context.newsletterName, context.address];
  const kept = compiledCampaigns.get(context.campaignId);
  compiledCampaigns.delete(context.campaignId);
  const compiled =
    kept && kept.content.every((value, i) => value === content[i])
      ? kept.compiled
      : compileCampaign(context, { name: context.newsletterName, address: context.address });
  // Most recently used last; the first is the one to forget.
  compiledCampaigns.set(context.campaignId, { content, compiled });
  if (compiledCampaigns.size > COMPILED_KEPT) compiledCampaigns.delete(compiledCampaigns.keys().next().value as string);
  return compiled;
};

const compiledOrProblem = (context: MessageContext): CompiledCampaign | TemplateError => {
  try {
    return compiledFor(context);
  } catch (err) {
    if (err instanceof TemplateError) return err;
    throw err;
  }
};

export const composerFor = (context: MessageContext, env: Pick<Env, "PUBLIC_BASE_URL">, signer: Signer): Composer => ({
  compiled: compiledOrProblem(context),
  campaignId: context.campaignId,
  from: formatFrom(context),
  replyTo: context.replyTo,
  publicBaseUrl: publicBaseUrl(env),
  signer,
});

/** The email `to` receives as `addressee` (the same person, except in a test send). */
export const composeEmail = async (composer: Composer, addressee: Addressee, deliveryId: string, to = addressee.email): Promise<OutboundEmail> => {
  if (composer.compiled instanceof TemplateError) throw composer.compiled;
  const token = await unsubscribeToken(composer.signer, { subscriberId: addressee.id, campaignId: composer.campaignId });
  const message = renderMessage(composer.compiled, addressee, unsubscribeUrl(composer.publicBaseUrl, token));
  return {
    deliveryId,
    to,
    from: composer.from,
    replyTo: composer.replyTo,
    subject: message.subject,
    html: message.html,
    text: message.text,
    headers: message.headers,
  };
};
