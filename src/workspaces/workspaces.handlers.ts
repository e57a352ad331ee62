import { notFound } from "../errors/api-error";
import { createRouter } from "../lib/create-app";
import { envelope, listPage } from "../lib/http";
import { findWorkspace, listCredentialWorkspacesPage } from "./workspaces.repository";
import { getWorkspace, listWorkspaces } from "./workspaces.routes";
import { serializeWorkspace } from "./workspaces.schemas";

export const workspacesRouter = createRouter()
  .openapi(listWorkspaces, async (c) => {
    const { limit, after } = c.req.valid("query");
    const { credentialId } = c.var.principal;
    const request = { list: `workspaces:${credentialId}`, after, limit };
    const page = await listPage(c, request, (position, take) => listCredentialWorkspacesPage(c.var.db, credentialId, position, take), serializeWorkspace);
    return c.json(page, 200);
  })
  .openapi(getWorkspace, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const row = await findWorkspace(c.var.db, workspace_id);
    if (!row) throw notFound("workspace", workspace_id);
    return c.json(envelope(serializeWorkspace(row)), 200);
  });
