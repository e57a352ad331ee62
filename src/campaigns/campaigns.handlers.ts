import { publicBaseUrl } from "../lib/public-origin";
import { AGAIN, commit, writeExplained } from "../db/commit";
import { holdsAll } from "../db/differs";
import { campaigns } from "../db/schema";
import { ApiError, notFound, resourceMissing } from "../errors/api-error";
import { createRouter } from "../lib/create-app";
import { envelope, givenFields, listPage } from "../lib/http";
import { newId } from "../lib/ids";
import { findNewsletter } from "../newsletters/newsletters.repository";
import { serializeOperation } from "../operations/operations.schemas";
import { findSegment } from "../segments/segments.repository";
import { enqueueStart, startCampaignSend } from "../sending/producer";
import { validateCampaignContent } from "../content";
import { previewEmail, testSend } from "./campaign-mail";
import {
  archivableStatuses,
  archiveCampaignRow,
  cancelSendStatements,
  type CampaignChanges,
  editableStatuses,
  findCampaign,
  insertCampaign,
  listCampaignsPage,
  unscheduleStatements,
  updateCampaignStatements,
} from "./campaigns.repository";
import {
  archiveCampaign,
  cancelCampaignSend,
  createCampaign,
  getCampaign,
  listCampaigns,
  previewCampaign,
  sendCampaign,
  testCampaign,
  unscheduleCampaign,
  updateCampaign,
} from "./campaigns.routes";
import { scheduledInPast, serializeCampaign } from "./campaigns.schemas";

const missing = (param: "newsletter_id" | "segment_id", id: string) => resourceMissing(param, param.replace(/_id$/, ""), id);

export const campaignsRouter = createRouter()
  .openapi(createCampaign, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const segmentId = body.segment_id ?? null;
    const content = { subject: body.subject, preheader: body.preheader ?? null, html: body.html ?? null, text: body.text ?? null };
    validateCampaignContent(content);
    const now = Date.now();
    const id = newId("campaign", now);
    const [[row]] = await commit(c, [insertCampaign(c.var.db, {
      id,
      workspaceId: workspace_id,
      newsletterId: body.newsletter_id,
      segmentId,
      ...content,
      status: "draft",
      scheduledAt: body.scheduled_at ? Date.parse(body.scheduled_at) : null,
      sentAt: null,
      createdAt: now,
      updatedAt: now,
    })], { status: 201, resource: "campaign", id });
    if (row) return c.json(envelope(serializeCampaign(row)), 201);
    // Nothing inserted: say which references name nothing in the workspace (both, when both do).
    const [newsletter, segment] = await Promise.all([
      findNewsletter(c.var.db, workspace_id, body.newsletter_id),
      segmentId === null || findSegment(c.var.db, workspace_id, segmentId),
    ]);
    const problems = [...(newsletter ? [] : [missing("newsletter_id", body.newsletter_id)]), ...(segment ? [] : [missing("segment_id", segmentId as string)])];
    const [first] = problems;
    if (!first) throw new Error(`campaign ${id} was not inserted, yet its newsletter and segment exist`);
    throw new ApiError(first.code, first.message, { param: first.param, details: problems.map(({ param, message }) => ({ param, message })) });
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
    const request = { list: `campaigns:${workspace_id}`, filters: { status }, after, limit };
    const page = await listPage(c, request, (position, take) => listCampaignsPage(c.var.db, workspace_id, status, position, take), serializeCampaign);
    return c.json(page, 200);
  })
  .openapi(updateCampaign, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const changes: CampaignChanges = {
      subject: body.subject,
      preheader: body.preheader,
      html: body.html,
      text: body.text,
      segmentId: body.segment_id,
      scheduledAt: body.scheduled_at === undefined ? undefined : body.scheduled_at === null ? null : Date.parse(body.scheduled_at),
    };
    // Each template stands on its own, so the ones sent are checked without reading the others.
    validateCampaignContent({ subject: changes.subject ?? "-", preheader: changes.preheader ?? null, html: changes.html ?? null, text: changes.text ?? null });
    const defined: CampaignChanges = givenFields(changes);
    return writeExplained(async () => {
      const now = Date.now();
      const update = updateCampaignStatements(c.var.db, workspace_id, campaign_id, defined, now);
      const { row, movedEarlier } = update.read(await commit(c, update.statements, { status: 200, resource: "campaign", id: campaign_id }));
      if (row) {
        // A scheduled send moved earlier needs a start message of its own (src/sending/producer.ts).
        if (movedEarlier) await enqueueStart(c.env, movedEarlier.id, movedEarlier.startAt, Date.now());
        return c.json(envelope(serializeCampaign(row)), 200);
      }
      // Nothing changed: say why.
      const campaign = await findCampaign(c.var.db, workspace_id, campaign_id);
      if (!campaign) throw notFound("campaign", campaign_id);
      if (typeof defined.scheduledAt === "number" && defined.scheduledAt <= now && campaign.scheduledAt !== defined.scheduledAt) throw scheduledInPast();
      if (!(editableStatuses as readonly string[]).includes(campaign.status)) {
        throw new ApiError("campaign_not_editable", `Only a draft or scheduled campaign can be edited; this one is ${campaign.status}`);
      }
      if (typeof defined.segmentId === "string" && !(await findSegment(c.var.db, workspace_id, defined.segmentId))) throw missing("segment_id", defined.segmentId);
      if (defined.scheduledAt === null && campaign.status === "scheduled") {
        throw new ApiError(
          "campaign_not_editable",
          "A scheduled campaign keeps its scheduled_at: set another time in the future to move its send",
          { param: "scheduled_at" },
        );
      }
      // Editable, and every value given is already there: nothing written, the campaign as it is.
      return holdsAll(campaigns, campaign, defined) ? c.json(envelope(serializeCampaign(campaign)), 200) : AGAIN;
    });
  })
  .openapi(previewCampaign, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    const body = c.req.valid("json") ?? {};
    return c.json(envelope(await previewEmail(c, workspace_id, campaign_id, body.subscriber_id ?? null)), 200);
  })
  .openapi(testCampaign, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const answer = envelope(await testSend(c, workspace_id, campaign_id, { emails: body.emails, integrationSlug: body.integration_slug ?? undefined }));
    // Nothing to write but the answer a retry with the same Idempotency-Key gets.
    await commit(c, [], { status: 200, body: answer });
    return c.json(answer, 200);
  })
  .openapi(unscheduleCampaign, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    return writeExplained(async () => {
      const unschedule = unscheduleStatements(c.var.db, workspace_id, campaign_id, Date.now());
      const row = unschedule.read(await commit(c, unschedule.statements, { status: 200, resource: "campaign", id: campaign_id }));
      if (row) return c.json(envelope(serializeCampaign(row)), 200);
      const campaign = await findCampaign(c.var.db, workspace_id, campaign_id);
      if (!campaign) throw notFound("campaign", campaign_id);
      // Scheduled by another request since: unscheduled now.
      if (campaign.status === "scheduled") return AGAIN;
      throw new ApiError("campaign_not_scheduled", `Only a scheduled campaign can be unscheduled; this one is ${campaign.status}`);
    });
  })
  .openapi(archiveCampaign, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    return writeExplained(async () => {
      const [[row]] = await commit(c, [archiveCampaignRow(c.var.db, workspace_id, campaign_id, Date.now())], {
        status: 200,
        resource: "campaign",
        id: campaign_id,
      });
      if (row) return c.json(envelope(serializeCampaign(row)), 200);
      const campaign = await findCampaign(c.var.db, workspace_id, campaign_id);
      if (!campaign) throw notFound("campaign", campaign_id);
      // Archived already: nothing to change.
      if (campaign.status === "archived") return c.json(envelope(serializeCampaign(campaign)), 200);
      // Its send ended or was unscheduled since: archived now.
      if ((archivableStatuses as readonly string[]).includes(campaign.status)) return AGAIN;
      const hint = campaign.status === "scheduled" ? " (unschedule it first)" : " (wait for its send to end)";
      throw new ApiError("campaign_not_editable", `Only a draft, sent or failed campaign can be archived; this one is ${campaign.status}${hint}`);
    });
  })
  .openapi(cancelCampaignSend, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    return writeExplained(async () => {
      const cancel = cancelSendStatements(c.var.db, workspace_id, campaign_id, Date.now());
      const events = [{ type: "campaign.failed", resource: "campaign", id: campaign_id }] as const;
      const row = cancel.read(await commit(c, cancel.statements, { status: 200, resource: "campaign", id: campaign_id }, { events }));
      if (row) return c.json(envelope(serializeCampaign(row)), 200);
      const campaign = await findCampaign(c.var.db, workspace_id, campaign_id);
      if (!campaign) throw notFound("campaign", campaign_id);
      // Its send started since (a campaign sends exactly while its operation is queued or running): canceled now.
      if (campaign.status === "sending") return AGAIN;
      const hint = campaign.status === "scheduled" ? " (a scheduled send is unscheduled instead)" : "";
      throw new ApiError("campaign_not_sending", `Only a sending campaign's send can be canceled; this one is ${campaign.status}${hint}`);
    });
  })
  .openapi(sendCampaign, async (c) => {
    const { workspace_id, campaign_id } = c.req.valid("param");
    const body = c.req.valid("json") ?? {};
    // Every message carries links to PUBLIC_BASE_URL: a send they would not work in is refused (503), not accepted.
    publicBaseUrl(c.env);
    const operation = await startCampaignSend(c, {
      workspaceId: workspace_id,
      campaignId: campaign_id,
      integrationSlug: body.integration_slug ?? undefined,
      mode: c.var.principal.mode,
    });
    return c.json(envelope(serializeOperation(operation)), 202);
  });
