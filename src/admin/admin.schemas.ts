import { z } from "@hono/zod-openapi";
import type { CredentialRow } from "../credentials/credentials.repository";
import { afterQuery, idParam, idQuery, isoDateTime, limitQuery, optionalText, requiredText } from "../lib/schemas";
import { iso } from "../lib/time";
import { scopes } from "../lib/types";

export const CreateWorkspaceBody = z.strictObject({ name: requiredText(200) }).openapi("CreateWorkspaceRequest", { example: { name: "Acme" } });

export const CreateCredentialBody = z
  .strictObject({
    mode: z.enum(["test", "live"]),
    workspace_ids: z.array(idParam("workspace", "workspace_ids")).min(1).max(100),
    scopes: z
      .array(z.enum(scopes))
      .min(1)
      .optional()
      .openapi({ description: "Defaults to every scope." }),
    name: optionalText(200).openapi({ description: "A label for operators, at most 200 characters, trimmed; `null` or blank: none." }),
  })
  .openapi("CreateCredentialRequest", {
    example: { mode: "test", workspace_ids: ["ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T"], scopes: ["subscribers:read", "subscribers:write"], name: "CRM sync" },
  });

export const CredentialParams = z.object({ credential_id: idParam("credential", "credential_id") });

export const ListWorkspacesQuery = z.strictObject({ limit: limitQuery, after: afterQuery });

export const ListCredentialsQuery = z.strictObject({
  limit: limitQuery,
  after: afterQuery,
  workspace_id: idQuery("workspace", "Only the credentials that may access this workspace."),
});

export const CredentialSchema = z
  .object({
    id: z.string().openapi({ example: "cred_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("credential"),
    name: z.string().nullable(),
    mode: z.enum(["test", "live"]),
    workspace_ids: z.array(z.string()),
    scopes: z.array(z.enum(scopes)),
    created_at: isoDateTime,
    revoked_at: isoDateTime.nullable(),
  })
  .openapi("Credential");

/** The creation response, the only one that shows the token. */
export const CredentialWithTokenSchema = CredentialSchema.extend({
  token: z.string().openapi({ description: "The bearer token. Shown once, in this response only.", example: "svc_live_…" }),
}).openapi("CredentialWithToken");

export type Credential = z.infer<typeof CredentialSchema>;

export const serializeCredential = (row: Omit<CredentialRow, "tokenHash">): Credential => ({
  id: row.id,
  object: "credential",
  name: row.name,
  mode: row.mode,
  workspace_ids: row.workspaceIds,
  scopes: row.scopes as Credential["scopes"],
  created_at: iso(row.createdAt),
  revoked_at: iso(row.revokedAt),
});

export const serializeCredentialWithToken = (row: Omit<CredentialRow, "tokenHash">, token: string): z.infer<typeof CredentialWithTokenSchema> => {
  const { created_at, revoked_at, ...rest } = serializeCredential(row);
  // The documented field order: the token before the timestamps.
  return { ...rest, token, created_at, revoked_at };
};
