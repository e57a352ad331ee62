import { OperationSchema } from "../operations/operations.schemas";
import { providerUnavailable } from "../errors/openapi";
import { apiRoute } from "../lib/route";
import { dataResponse, noBody, pageEnvelope, WorkspaceParams } from "../lib/schemas";
import {
  CampaignParams,
  CampaignSchema,
  CreateCampaignBody,
  EmailPreviewSchema,
  ListCampaignsQuery,
  PreviewCampaignBody,
  SendCampaignBody,
  TestSendBody,
  TestSendSchema,
  UpdateCampaignBody,
} from "./campaigns.schemas";

/**
 * Campaign content may be up to 768 KiB of templates, and JSON may spend up to 6 bytes on each of
 * their bytes (`\u003c` for a `<`, as Go's encoder writes it): these routes take 5 MiB, so templates
 * within their limits are never refused for their encoding.
 */
const CONTENT_BODY_BYTES = 5 * 1024 * 1024;

const one = (description: string) => dataResponse(description, CampaignSchema);

export const createCampaign = apiRoute({
  errorCodes: { 400: ["resource_missing"] },
  method: "post",
  path: "/workspaces/{workspace_id}/campaigns",
  tags: ["Campaigns"],
  summary: "Create a campaign",
  description:
    "Creates a `draft` from a newsletter and an optional segment, with its content: `subject`, `preheader`, `html` and `text` are Liquid templates, checked here (a syntax error or an unknown variable is a 400 `validation_failed` naming the field and the line). A `newsletter_id` or `segment_id` that names nothing in the workspace is a 400 `resource_missing`.",
  scope: "campaigns:write",
  idempotent: true,
  maxBodyBytes: CONTENT_BODY_BYTES,
  request: {
    params: WorkspaceParams,
    body: { required: true, content: { "application/json": { schema: CreateCampaignBody } } },
  },
  responses: { 201: one("The new draft campaign") },
});

export const getCampaign = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}",
  tags: ["Campaigns"],
  summary: "Retrieve a campaign",
  scope: "campaigns:read",
  request: { params: CampaignParams },
  responses: { 200: one("The campaign") },
});

export const listCampaigns = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/campaigns",
  tags: ["Campaigns"],
  summary: "List campaigns",
  description: "Newest first. `status` combines with the cursor.",
  scope: "campaigns:read",
  request: { params: WorkspaceParams, query: ListCampaignsQuery },
  responses: {
    200: {
      description: "A page of campaigns",
      content: { "application/json": { schema: pageEnvelope(CampaignSchema) } },
    },
  },
});

export const sendCampaign = apiRoute({
  errorCodes: { 400: ["unknown_integration", "integration_not_configured"], 409: ["campaign_not_sendable"] },
  method: "post",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}/send",
  tags: ["Campaigns"],
  summary: "Send a campaign",
  description:
    "Starts the asynchronous send of a draft and answers with its operation (`queued`); poll `GET /workspaces/{workspace_id}/operations/{operation_id}`. The campaign becomes `sending`, or `scheduled` when its `scheduled_at` is in the future. Only one of any number of concurrent sends of a draft succeeds; the others, and any send of a campaign that is not a draft, get 409 `campaign_not_sendable`. An `integration_slug` that names no configured integration is a 400 `unknown_integration`; a live send that names none when no real integration is configured is a 400 `integration_not_configured` (live mode never pretends).",
  scope: "campaigns:send",
  idempotent: true,
  request: {
    params: CampaignParams,
    body: { required: false, content: { "application/json": { schema: SendCampaignBody } } },
  },
  responses: {
    202: dataResponse("The send operation, queued", OperationSchema),
  },
});

export const updateCampaign = apiRoute({
  errorCodes: { 400: ["resource_missing"], 409: ["campaign_not_editable"] },
  method: "patch",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}",
  tags: ["Campaigns"],
  summary: "Update a campaign",
  description:
    "Changes any of `subject`, `preheader`, `html`, `text`, `segment_id`, `scheduled_at` (at least one) of a `draft` or `scheduled` campaign; any other status is a 409 `campaign_not_editable`. Templates are checked as on create. A new `scheduled_at` of a scheduled campaign moves its send.",
  scope: "campaigns:write",
  idempotent: true,
  maxBodyBytes: CONTENT_BODY_BYTES,
  request: {
    params: CampaignParams,
    body: { required: true, content: { "application/json": { schema: UpdateCampaignBody } } },
  },
  responses: { 200: one("The updated campaign") },
});

export const previewCampaign = apiRoute({
  errorCodes: { 400: ["resource_missing"] },
  method: "post",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}/preview",
  tags: ["Campaigns"],
  summary: "Preview a campaign",
  description:
    "The exact message a subscriber would get (the send renders it with the same code): for `subscriber_id`, or for a sample subscriber. A `subscriber_id` that names no subscriber of the workspace is a 400 `resource_missing`. Changes nothing. Its `html` is the workspace's html as sent: show it in a sandboxed frame (`<iframe sandbox srcdoc>`, without `allow-scripts` or `allow-same-origin`), never inline.",
  scope: "campaigns:read",
  request: {
    params: CampaignParams,
    body: { required: false, content: { "application/json": { schema: PreviewCampaignBody } } },
  },
  responses: {
    200: dataResponse("The rendered message", EmailPreviewSchema),
  },
});

export const testCampaign = apiRoute({
  errorCodes: { 400: ["unknown_integration", "integration_not_configured"] },
  method: "post",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}/test",
  tags: ["Campaigns"],
  summary: "Send a campaign test",
  description:
    "Sends the campaign, rendered for the sample subscriber with its subject prefixed `[Test] `, to 1 to 5 addresses. No delivery is recorded and the campaign stays as it was. Test credentials deliver through `sandbox`. A result is final (`sent`, or `failed` with the provider's reason); when the provider did not take the messages yet (rate limited, a 5xx, no answer), the answer is a 503 `provider_unavailable` with `Retry-After`, which is not stored: the same request with the same Idempotency-Key tries again, under the same provider idempotency key, so nobody gets two copies.",
  scope: "campaigns:send",
  idempotent: true,
  request: {
    params: CampaignParams,
    body: { required: true, content: { "application/json": { schema: TestSendBody } } },
  },
  responses: {
    200: dataResponse("One result per address", TestSendSchema),
    503: providerUnavailable,
  },
});

export const unscheduleCampaign = apiRoute({
  errorCodes: { 409: ["campaign_not_scheduled"] },
  method: "post",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}/unschedule",
  tags: ["Campaigns"],
  summary: "Unschedule a campaign",
  description:
    "Cancels the send of a `scheduled` campaign before it starts: the campaign becomes a `draft` again with `scheduled_at` cleared (edit it, then send it again, now or at a new time), and its queued operation ends `failed` with the error code `send_unscheduled`. A campaign whose send has started, or that is not scheduled, is a 409 `campaign_not_scheduled`: at the scheduled time, whichever of the start and this request commits first wins. No body.",
  scope: "campaigns:send",
  idempotent: true,
  request: { params: CampaignParams, body: noBody },
  responses: {
    200: dataResponse("The campaign, a draft again", CampaignSchema),
  },
});

export const archiveCampaign = apiRoute({
  errorCodes: { 409: ["campaign_not_editable"] },
  method: "post",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}/archive",
  tags: ["Campaigns"],
  summary: "Archive a campaign",
  description:
    "Sets a `draft`, `sent` or `failed` campaign `archived`: it stays readable (its deliveries and stats too) and listed (`GET /campaigns?status=archived`), and nothing changes it again (no edit, no send). Archiving an archived campaign changes nothing and answers it as it is. A `scheduled` campaign (unschedule it first) or one `sending` is a 409 `campaign_not_editable`. No event is written (none of the event types says \"archived\"). No body.",
  scope: "campaigns:write",
  idempotent: true,
  request: { params: CampaignParams, body: noBody },
  responses: {
    200: dataResponse("The campaign, archived", CampaignSchema),
  },
});

export const cancelCampaignSend = apiRoute({
  errorCodes: { 409: ["campaign_not_sending"] },
  method: "post",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}/cancel",
  tags: ["Campaigns"],
  summary: "Cancel a campaign's send",
  description:
    "Stops the send of a `sending` campaign: its operation ends `failed` with the error code `send_canceled`, its deliveries not yet handed to the provider end `failed` (`send_canceled`, or `outcome_unknown` for one that was in a provider request, which may have been taken: it is never sent again), and the campaign becomes `failed` (a `campaign.failed` event is written). Recipients already mailed stay `sent`; a request to the provider already on its way may still be taken. A campaign not `sending` is a 409 `campaign_not_sending` (a `scheduled` one is unscheduled instead). No body.",
  scope: "campaigns:send",
  idempotent: true,
  request: { params: CampaignParams, body: noBody },
  responses: {
    200: dataResponse("The campaign, failed", CampaignSchema),
  },
});
