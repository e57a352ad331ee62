import { notFound } from "../errors/api-error";
import { createRouter } from "../lib/create-app";
import { afterPosition, envelope, toPage } from "../lib/http";
import { findWorkspace, listCredentialWorkspacesPage } from "./workspaces.repository";
import { getWorkspace, listWorkspaces } from "./workspaces.routes";
import { serializeWorkspace } from "./workspaces.schemas";

export const workspacesRouter = createRouter()
  .openapi(listWorkspaces, async (c) => {
    const { limit, after } = c.req.valid("query");
    const { credentialId } = c.var.principal;
    const scope = `workspaces:${credentialId}`;
    const position = await afterPosition(c, scope, after);
    const rows = await listCredentialWorkspacesPage(c.var.db, credentialId, position, limit + 1);
    return c.json(await toPage(c, scope, rows, limit, serializeWorkspace), 200);
  })
  .openapi(getWorkspace, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const row = await findWorkspace(c.var.db, workspace_id);
    if (!row) throw notFound("workspace", workspace_id);
    return c.json(envelope(serializeWorkspace(row)), 200);
  });
