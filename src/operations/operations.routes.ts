import { apiRoute } from "../lib/route";
import { dataResponse, pageEnvelope } from "../lib/schemas";
import {
  CampaignDeliveriesParams,
  CampaignStatsSchema,
  DeliverySchema,
  ListDeliveriesQuery,
  OperationParams,
  OperationSchema,
} from "./operations.schemas";

export const getOperation = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/operations/{operation_id}",
  tags: ["Operations"],
  summary: "Retrieve an operation",
  description:
    "Poll this to follow a send: `queued → running → succeeded | failed`, with progress counts. `completed_at` is set when it ends.",
  scope: "campaigns:read",
  request: { params: OperationParams },
  responses: {
    200: dataResponse("The operation", OperationSchema),
  },
});

export const listDeliveries = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}/deliveries",
  tags: ["Operations"],
  summary: "List a campaign's deliveries",
  description: "One delivery per recipient of the send, newest first.",
  scope: "campaigns:read",
  request: { params: CampaignDeliveriesParams, query: ListDeliveriesQuery },
  responses: {
    200: {
      description: "A page of deliveries",
      content: { "application/json": { schema: pageEnvelope(DeliverySchema) } },
    },
  },
});

export const getCampaignStats = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}/campaigns/{campaign_id}/stats",
  tags: ["Operations"],
  summary: "Retrieve a campaign's stats",
  description:
    "Exact counts over the campaign's deliveries, read in one query: by current status (each delivery counts once, in the furthest state it reached), plus opens, clicks and unsubscribes.",
  scope: "campaigns:read",
  request: { params: CampaignDeliveriesParams },
  responses: {
    200: dataResponse("The campaign's stats", CampaignStatsSchema),
  },
});
