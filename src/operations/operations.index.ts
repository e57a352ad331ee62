import { notFound } from "../errors/api-error";
import { campaignInWorkspace } from "../campaigns/campaigns.repository";
import { createRouter } from "../lib/create-app";
import { afterPosition, envelope, listScope, toPage } from "../lib/http";
import { campaignStats, findOperation, listDeliveriesPage } from "./operations.repository";
import { getCampaignStats, getOperation, listDeliveries } from "./operations.routes";
import { serializeDelivery, serializeOperation } from "./operations.schemas";

export const operationsRouter = createRouter()
  .openapi(getOperation, async (c) => {
    const { workspace_id, operation_id } = c.req.valid("param");
    const row = await findOperation(c.var.db, workspace_id, operation_id);
    if (!row) throw notFound("operation", operation_id);
    return c.json(envelope(serializeOperation(row)), 200);
  })
  .openapi(listDeliveries, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    const { limit, after, ...filter } = c.req.valid("query");
    const scope = listScope(`deliveries:${campaign_id}`, filter);
    const position = await afterPosition(c, scope, after);
    // One round trip: the campaign's presence in the workspace and the page, read together.
    const [campaign, rows] = await c.var.db.batch([
      campaignInWorkspace(c.var.db, workspace_id, campaign_id),
      listDeliveriesPage(c.var.db, campaign_id, filter, position, limit + 1),
    ]);
    if (campaign.length === 0) throw notFound("campaign", campaign_id);
    return c.json(await toPage(c, scope, rows, limit, serializeDelivery), 200);
  })
  .openapi(getCampaignStats, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    const stats = await campaignStats(c.var.db.$client, workspace_id, campaign_id);
    if (!stats) throw notFound("campaign", campaign_id);
    return c.json(envelope({ object: "campaign_stats" as const, campaign_id, ...stats }), 200);
  });
