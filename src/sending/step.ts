import type { InvocationBudget } from "../lib/byte-budget";
import { signerFor } from "../lib/signing";
import { type Composer, composerFor } from "./compose";
import { isIntegrationSlug, resolveIntegration } from "./integrations";
import type { Integration } from "./integrations/types";
import { enqueueAll, type SendMessage } from "./messages";
import { loadMessageContext } from "./send.repository";

// What every step of a send (src/sending/pipeline.ts) works with.

export type StepDeps = {
  d1: D1Database;
  env: Env;
  now: () => number;
  /** Rendered mail the invocation's delivery steps hold at once (deliver.ts); a step without one has its own. */
  budget?: InvocationBudget;
};
/** What the consumer does with the message once the step returns: ack, or retry after a delay. */
export type StepResult = { retryAfterSeconds: number } | undefined;
/** The queue's delivery count of the message being handled (1: its first). */
export type Attempt = { attempts: number };

/**
 * Lets the isolate's timers and I/O run between bounded pieces of CPU work: a chunk rendering its
 * hundred messages must not hold back another chunk's request waiting for its slot (the provider's
 * rate is counted when requests arrive, not when they were meant to leave).
 */
export const yieldToEventLoop = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/** Deliveries per work message when the integration is not known (not configured here). */
const FALLBACK_CHUNK = 25;

/** Deliveries per work message (one provider batch): the integration's, or FALLBACK_CHUNK. */
export const chunkSizeOf = (integration: Integration | undefined): number => integration?.chunkSize ?? FALLBACK_CHUNK;

/** Each message to its queue (`queueFor`), now or after `delaySeconds`. */
export const enqueue = (deps: StepDeps, messages: SendMessage[], delaySeconds?: number) =>
  enqueueAll(deps.env, messages.map((body) => (delaySeconds === undefined ? { body } : { body, delaySeconds })));

export const integrationFor = (deps: StepDeps, slug: string): Integration | undefined =>
  isIntegrationSlug(slug) ? resolveIntegration(slug, deps.env) : undefined;

/** The campaign's composer, its templates parsed once for the whole queue message. */
export const loadComposer = async (deps: StepDeps, campaignId: string): Promise<Composer | undefined> => {
  const context = await loadMessageContext(deps.d1, campaignId);
  return context && composerFor(context, deps.env, signerFor(deps.env));
};
