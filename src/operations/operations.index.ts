import { notFound } from "../errors/api-error";
import { findCampaign } from "../campaigns/campaigns.repository";
import { createRouter } from "../lib/create-app";
import { afterPosition, envelope, toPage } from "../lib/http";
import { findOperation, listDeliveriesPage } from "./operations.repository";
import { getOperation, listDeliveries } from "./operations.routes";
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
    const { limit, after } = c.req.valid("query");
    if (!(await findCampaign(c.var.db, workspace_id, campaign_id))) throw notFound("campaign", campaign_id);
    const scope = `deliveries:${campaign_id}`;
    const position = await afterPosition(c, scope, after);
    const rows = await listDeliveriesPage(c.var.db, campaign_id, position, limit + 1);
    return c.json(await toPage(c, scope, rows, limit, serializeDelivery), 200);
  });
