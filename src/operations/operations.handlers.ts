import { notFound } from "../errors/api-error";
import { campaignInWorkspace } from "../campaigns/campaigns.repository";
import { createRouter } from "../lib/create-app";
import { envelope, listPage } from "../lib/http";
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
    const request = { list: `deliveries:${campaign_id}`, filters: filter, after, limit };
    const page = await listPage(
      c,
      request,
      async (position, take) => {
        // One round trip: the campaign's presence in the workspace and the page, read together.
        const [campaign, rows] = await c.var.db.batch([
          campaignInWorkspace(c.var.db, workspace_id, campaign_id),
          listDeliveriesPage(c.var.db, campaign_id, filter, position, take),
        ]);
        if (campaign.length === 0) throw notFound("campaign", campaign_id);
        return rows;
      },
      serializeDelivery,
    );
    return c.json(page, 200);
  })
  .openapi(getCampaignStats, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    const stats = await campaignStats(c.var.db.$client, workspace_id, campaign_id);
    if (!stats) throw notFound("campaign", campaign_id);
    return c.json(envelope({ object: "campaign_stats" as const, campaign_id, ...stats }), 200);
  });
