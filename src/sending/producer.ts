import type { Db } from "../db/client";
import { ApiError, notFound } from "../errors/api-error";
import { findCampaign } from "../campaigns/campaigns.repository";
import { newId } from "../lib/ids";
import type { CredentialMode } from "../lib/types";
import { findOperation } from "../operations/operations.repository";
import { integrationSlugs, isIntegrationSlug, resolveIntegration } from "./integrations";
import { MAX_QUEUE_DELAY_SECONDS, type SendMessage } from "./messages";
import { createSendOperation } from "./send.repository";

export type SendRequest = {
  workspaceId: string;
  campaignId: string;
  /** As asked by the client; omitted means `sandbox`. */
  integrationSlug: string | undefined;
  mode: CredentialMode;
};

const notSendable = (status: string) =>
  new ApiError("campaign_not_sendable", `Only a draft campaign can be sent; this one is ${status}`);

/**
 * Creates the send operation and moves the campaign out of `draft` in one atomic batch, then
 * enqueues its start. An enqueue that fails after the commit loses nothing: the cron sweeper
 * starts any operation still `queued` a minute after it was due.
 */
export const startCampaignSend = async (db: Db, env: Env, request: SendRequest) => {
  const campaign = await findCampaign(db, request.workspaceId, request.campaignId);
  if (!campaign) throw notFound("campaign", request.campaignId);

  const slug = request.integrationSlug ?? "sandbox";
  if (!isIntegrationSlug(slug)) {
    throw new ApiError("unknown_integration", `No integration is named ${slug}; use one of: ${integrationSlugs.join(", ")}`, {
      param: "integration_slug",
    });
  }
  // Test credentials never deliver real mail, whatever they ask for.
  const deliveryIntegration = request.mode === "test" ? "sandbox" : slug;
  if (!resolveIntegration(deliveryIntegration, env)) {
    throw new ApiError("unknown_integration", `The ${slug} integration is not configured in this deployment`, {
      param: "integration_slug",
    });
  }
  if (campaign.status !== "draft") throw notSendable(campaign.status);

  const now = Date.now();
  const startAt = campaign.scheduledAt !== null && campaign.scheduledAt > now ? campaign.scheduledAt : now;
  const operationId = newId("operation", now);
  const won = await createSendOperation(db.$client, {
    id: operationId,
    workspaceId: request.workspaceId,
    campaignId: campaign.id,
    integrationSlug: slug,
    deliveryIntegration,
    mode: request.mode,
    startAt,
    campaignStatus: startAt > now ? "scheduled" : "sending",
    now,
  });
  if (!won) {
    const current = await findCampaign(db, request.workspaceId, request.campaignId);
    throw notSendable(current?.status ?? "not a draft");
  }

  const delaySeconds = Math.ceil((startAt - now) / 1000);
  if (delaySeconds <= MAX_QUEUE_DELAY_SECONDS) {
    try {
      await env.SEND_QUEUE.send({ type: "start", operation_id: operationId } satisfies SendMessage, { delaySeconds });
    } catch (err) {
      console.error(
        JSON.stringify({
          level: "error",
          event: "send_enqueue_failed",
          operation_id: operationId,
          error: err instanceof Error ? err.message : String(err),
        }),
      );
    }
  }
  const operation = await findOperation(db, request.workspaceId, operationId);
  if (!operation) throw new Error(`operation ${operationId} vanished after its creation`);
  return operation;
};
