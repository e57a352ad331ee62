import { z } from "@hono/zod-openapi";
import type { CredentialRow } from "../credentials/credentials.repository";
import { idParam, isoDateTime, optionalText, requiredText } from "../lib/schemas";
import { iso } from "../lib/time";
import { scopes } from "../lib/types";

export const CreateWorkspaceBody = z.strictObject({ name: requiredText(200) }).openapi("CreateWorkspaceRequest");

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
  .openapi("CreateCredentialRequest");

export const CredentialParams = z.object({ credential_id: idParam("credential", "credential_id") });

export const CredentialSchema = z
  .object({
    id: z.string().openapi({ example: "cred_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("credential"),
    name: z.string().nullable(),
    mode: z.enum(["test", "live"]),
    workspace_ids: z.array(z.string()),
    scopes: z.array(z.enum(scopes)),
    token: z.string().optional().openapi({ description: "The bearer token. Shown once, in the creation response only." }),
    created_at: isoDateTime,
    revoked_at: isoDateTime.nullable(),
  })
  .openapi("Credential");

export type Credential = z.infer<typeof CredentialSchema>;

export const serializeCredential = (row: Omit<CredentialRow, "tokenHash">, token?: string): Credential => ({
  id: row.id,
  object: "credential",
  name: row.name,
  mode: row.mode,
  workspace_ids: row.workspaceIds,
  scopes: row.scopes as Credential["scopes"],
  ...(token !== undefined && { token }),
  created_at: iso(row.createdAt),
  revoked_at: iso(row.revokedAt),
});
