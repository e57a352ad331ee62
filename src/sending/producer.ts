import type { BatchResponse } from "drizzle-orm/batch";
import { logError } from "../lib/log";
import { sql } from "drizzle-orm";
import type { Context } from "hono";
import { commit } from "../db/commit";
import { ApiError, notFound } from "../errors/api-error";
import { findCampaign } from "../campaigns/campaigns.repository";
import { findLatestOperation } from "../operations/operations.repository";
import { newId } from "../lib/ids";
import { schemaProbeQueries } from "../lib/schema-probe";
import type { AppEnv, CredentialMode } from "../lib/types";
import { integrationSlugs, isIntegrationSlug, resolveIntegration } from "./integrations";
import { enqueueAll, MAX_QUEUE_DELAY_SECONDS } from "./messages";
import { createSendOperation } from "./send.repository";

type SendRequest = {
  workspaceId: string;
  campaignId: string;
  /** As asked by the client; omitted means `resend` for a live credential, `sandbox` for a test one. */
  integrationSlug: string | undefined;
  mode: CredentialMode;
};

/**
 * The integration that delivers for a request naming `requested`. Test credentials never deliver real
 * mail, whatever they ask for (omitted: `sandbox`). A live request that names none gets `resend` when
 * it is configured; with no real integration configured it is refused rather than quietly sent to the
 * sandbox. An unknown or unconfigured name is a 400 in both modes: a request a live credential would
 * have refused is refused under a test one too (the mode changes delivery only).
 */
export const chooseIntegration = (requested: string | undefined, mode: CredentialMode, env: Env) => {
  const slug = requested ?? (mode === "live" ? "resend" : "sandbox");
  // What a refusal offers is what this deployment has (naming it is then never refused); worked out
  // only when refusing, not on every send.
  const configured = () => integrationSlugs.filter((known) => resolveIntegration(known, env)).join(", ");
  if (!isIntegrationSlug(slug)) {
    throw new ApiError("unknown_integration", `No integration is named ${JSON.stringify(slug)}; this deployment has: ${configured()} (slugs are exact and lower-case)`, {
      param: "integration_slug",
    });
  }
  if (requested !== undefined && !resolveIntegration(slug, env)) {
    throw new ApiError("unknown_integration", `The ${slug} integration is not configured in this deployment (it has: ${configured()})`, {
      param: "integration_slug",
    });
  }
  const deliveryIntegration = mode === "test" ? "sandbox" : slug;
  const integration = resolveIntegration(deliveryIntegration, env);
  if (!integration) {
    // Only a live request naming none gets here (a named one was checked, a test one has the sandbox).
    throw new ApiError(
      "integration_not_configured",
      "No real integration is configured in this deployment (set RESEND_API_KEY); name integration_slug sandbox to run a live send without mailing",
      { param: "integration_slug" },
    );
  }
  return { slug, deliveryIntegration, integration };
};

/** The 409 of a campaign that is not a draft, naming the send that took it (a client that lost the 202 finds its operation). */
const notSendable = (status: string, operationId: string | undefined) =>
  new ApiError(
    "campaign_not_sendable",
    `Only a draft campaign can be sent; this one is ${status}${operationId ? ` (its send is operation ${operationId})` : ""}`,
    operationId ? { details: [{ message: `The campaign's send is operation ${operationId}`, operation_id: operationId }] } : {},
  );

/**
 * Creates the send operation and moves the campaign out of `draft` in one atomic batch (with the
 * request's Idempotency-Key record), then enqueues its start. An enqueue that fails after the commit
 * loses nothing: the cron sweeper starts any operation still `queued` a minute after it was due.
 */
export const startCampaignSend = async (c: Context<AppEnv>, request: SendRequest) => {
  const { slug, deliveryIntegration } = chooseIntegration(request.integrationSlug, request.mode, c.env);

  const now = Date.now();
  const id = newId("operation", now);
  // The send's work goes on in the queue, against every table: its batch first reads them all (no
  // rows), so a database behind the code refuses it here (503) instead of accepting work that fails.
  const probe = schemaProbeQueries().map((query) => c.var.db.run(sql.raw(query)));
  const send = createSendOperation(c.var.db, {
    id,
    workspaceId: request.workspaceId,
    campaignId: request.campaignId,
    integrationSlug: slug,
    deliveryIntegration,
    mode: request.mode,
    now,
  });
  const results = await commit(
    c,
    [...probe, ...send],
    { status: 202, resource: "operation", id },
    // A send that starts now moves the campaign to `sending` in this batch; a scheduled one does so when it starts.
    { events: [{ type: "campaign.sending", resource: "campaign", id: request.campaignId, onlyIf: sql`status = 'sending'` }] },
  );
  // The probe's results (no rows), then the send's own, typed by its statements.
  const [, [operation]] = results.slice(probe.length) as unknown as BatchResponse<typeof send>;
  if (!operation) {
    // Nothing changed: the campaign does not exist here, or is not a draft (another send won).
    const campaign = await findCampaign(c.var.db, request.workspaceId, request.campaignId);
    if (!campaign) throw notFound("campaign", request.campaignId);
    throw notSendable(campaign.status, (await findLatestOperation(c.var.db, request.campaignId))?.id);
  }

  await enqueueStart(c.env, id, operation.startAt, now);
  return operation;
};

/**
 * The start message of a send due within the queue's longest delay, timed for its start (a later one
 * is started by the cron sweeper, which also re-sends a start whose enqueue failed here). A start
 * that arrives early sleeps again, so a send moved later needs no new message; one moved earlier does.
 */
export const enqueueStart = async (env: Env, operationId: string, startAt: number | null, now: number) => {
  const delaySeconds = Math.ceil(((startAt ?? now) - now) / 1000);
  if (delaySeconds > MAX_QUEUE_DELAY_SECONDS) return;
  try {
    await enqueueAll(env, [{ body: { type: "start", operation_id: operationId }, delaySeconds: Math.max(0, delaySeconds) }]);
  } catch (err) {
    logError("send_enqueue_failed", { operation_id: operationId }, err);
  }
};
