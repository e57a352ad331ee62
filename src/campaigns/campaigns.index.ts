import { commit } from "../db/commit";
import { ApiError, notFound } from "../errors/api-error";
import { createRouter } from "../lib/create-app";
import { afterPosition, envelope, toPage } from "../lib/http";
import { newId } from "../lib/ids";
import { findNewsletter } from "../newsletters/newsletters.repository";
import { serializeOperation } from "../operations/operations.schemas";
import { findSegment } from "../segments/segments.repository";
import { startCampaignSend } from "../sending/producer";
import { findCampaign, insertCampaign, listCampaignsPage } from "./campaigns.repository";
import { createCampaign, getCampaign, listCampaigns, sendCampaign } from "./campaigns.routes";
import { serializeCampaign } from "./campaigns.schemas";

const missing = (param: string, id: string) =>
  new ApiError("resource_missing", `No ${param.replace(/_id$/, "")} ${id} exists in this workspace`, { param });

export const campaignsRouter = createRouter()
  .openapi(createCampaign, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const segmentId = body.segment_id ?? null;
    const now = Date.now();
    const id = newId("campaign", now);
    const [[row]] = await commit(c, [insertCampaign(c.var.db, {
      id,
      workspaceId: workspace_id,
      newsletterId: body.newsletter_id,
      segmentId,
      subject: body.subject,
      preheader: body.preheader ?? null,
      status: "draft",
      scheduledAt: body.scheduled_at ? Date.parse(body.scheduled_at) : null,
      sentAt: null,
      createdAt: now,
      updatedAt: now,
    })], { status: 201, resource: "campaign", id });
    if (row) return c.json(envelope(serializeCampaign(row)), 201);
    // Nothing inserted: say which reference names nothing in the workspace.
    if (!(await findNewsletter(c.var.db, workspace_id, body.newsletter_id))) throw missing("newsletter_id", body.newsletter_id);
    if (segmentId !== null && !(await findSegment(c.var.db, workspace_id, segmentId))) throw missing("segment_id", segmentId);
    throw new Error(`campaign ${id} was not inserted, yet its newsletter and segment exist`);
  })
  .openapi(getCampaign, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    const row = await findCampaign(c.var.db, workspace_id, campaign_id);
    if (!row) throw notFound("campaign", campaign_id);
    return c.json(envelope(serializeCampaign(row)), 200);
  })
  .openapi(listCampaigns, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const { limit, after, status } = c.req.valid("query");
    const scope = `campaigns:${workspace_id}`;
    const position = await afterPosition(c, scope, after);
    const rows = await listCampaignsPage(c.var.db, workspace_id, status, position, limit + 1);
    return c.json(await toPage(c, scope, rows, limit, serializeCampaign), 200);
  })
  .openapi(sendCampaign, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    const body = c.req.valid("json") ?? {};
    const operation = await startCampaignSend(c, {
      workspaceId: workspace_id,
      campaignId: campaign_id,
      integrationSlug: body.integration_slug ?? undefined,
      mode: c.var.principal.mode,
    });
    return c.json(envelope(serializeOperation(operation)), 202);
  });
