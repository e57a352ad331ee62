import { OperationSchema } from "../operations/operations.schemas";
import { apiRoute } from "../lib/route";
import { dataEnvelope, pageEnvelope, WorkspaceParams } from "../lib/schemas";
import { CampaignParams, CampaignSchema, CreateCampaignBody, ListCampaignsQuery, SendCampaignBody } from "./campaigns.schemas";

const one = (description: string) => ({
  description,
  content: { "application/json": { schema: dataEnvelope(CampaignSchema) } },
});

export const createCampaign = apiRoute({
  method: "post",
  path: "/workspaces/{workspace_id}/campaigns",
  tags: ["Campaigns"],
  summary: "Create a campaign",
  description:
    "Creates a `draft` from a newsletter and an optional segment. A `newsletter_id` or `segment_id` that names nothing in the workspace is a 400 `resource_missing`.",
  scope: "campaigns:write",
  idempotent: true,
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
  method: "post",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}/send",
  tags: ["Campaigns"],
  summary: "Send a campaign",
  description:
    "Starts the asynchronous send of a draft and answers with its operation (`queued`); poll `GET /workspaces/{workspace_id}/operations/{operation_id}`. The campaign becomes `sending`, or `scheduled` when its `scheduled_at` is in the future. Only one of any number of concurrent sends of a draft succeeds; the others, and any send of a campaign that is not a draft, get 409 `campaign_not_sendable`. An `integration_slug` that names no configured integration is a 400 `unknown_integration`.",
  scope: "campaigns:send",
  idempotent: true,
  request: {
    params: CampaignParams,
    body: { required: false, content: { "application/json": { schema: SendCampaignBody } } },
  },
  responses: {
    202: {
      description: "The send operation, queued",
      content: { "application/json": { schema: dataEnvelope(OperationSchema) } },
    },
  },
});
