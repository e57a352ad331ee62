import { unsubscribeToken, unsubscribeUrl } from "../consent/unsubscribe-token";
import { ApiError } from "../errors/api-error";
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

const formatFrom = (context: Pick<MessageContext, "fromName" | "fromEmail">) =>
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

/**
 * The origin of every link the service puts in mail (PUBLIC_BASE_URL; the contract's default, a local
 * one), as `scheme://host[:port]`; or, for a value that is not an http(s) origin, what is wrong with
 * it. A path would be lost (the service answers its links at the origin's root), and a query or a
 * fragment would swallow the link's own path.
 */
export const publicOrigin = (env: Pick<Env, "PUBLIC_BASE_URL">): { origin: string } | { problem: string } => {
  const value = env.PUBLIC_BASE_URL || "http://localhost:8787";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { problem: `PUBLIC_BASE_URL (${value}) is not a URL: set it to the origin the service is reached at, such as https://news.example.com` };
  }
  const extra =
    url.protocol !== "https:" && url.protocol !== "http:"
      ? "is not an http(s) URL"
      : url.username || url.password
        ? "carries user info"
        : url.pathname !== "/" || url.search || url.hash || value.endsWith("?") || value.endsWith("#")
          ? "has a path, query or fragment (the service answers its links, /u/…, at the origin's root)"
          : undefined;
  if (extra) return { problem: `PUBLIC_BASE_URL (${value}) ${extra}: set it to the origin alone, such as ${url.protocol === "http:" ? "http" : "https"}://${url.host || "news.example.com"}` };
  return { origin: url.origin };
};

/** The origin of every link the service puts in mail; a PUBLIC_BASE_URL that is not one is a 503 `configuration_error`. */
export const publicBaseUrl = (env: Pick<Env, "PUBLIC_BASE_URL">): string => {
  const found = publicOrigin(env);
  if ("problem" in found) throw new ApiError("configuration_error", `${found.problem}; until then no message can carry a working unsubscribe link`);
  return found.origin;
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
