import { apiRoute } from "../lib/route";
import { dataResponse, pageEnvelope, WorkspaceParams } from "../lib/schemas";
import { ListWorkspacesQuery, WorkspaceSchema } from "./workspaces.schemas";

export const listWorkspaces = apiRoute({
  method: "get",
  path: "/workspaces",
  tags: ["Workspaces"],
  summary: "List workspaces",
  description: "The workspaces the calling credential may access, newest first.",
  scope: "workspaces:read",
  request: { query: ListWorkspacesQuery },
  responses: {
    200: { description: "A page of workspaces", content: { "application/json": { schema: pageEnvelope(WorkspaceSchema) } } },
  },
});

export const getWorkspace = apiRoute({
  method: "get",
  path: "/workspaces/{workspace_id}",
  tags: ["Workspaces"],
  summary: "Retrieve a workspace",
  scope: "workspaces:read",
  request: { params: WorkspaceParams },
  responses: {
    200: dataResponse("The workspace", WorkspaceSchema),
  },
});
