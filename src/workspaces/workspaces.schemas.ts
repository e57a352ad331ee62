import { z } from "@hono/zod-openapi";
import type { workspaces } from "../db/schema";
import { iso } from "../lib/time";
import { afterQuery, isoDateTime, limitQuery } from "../lib/schemas";

export const WorkspaceSchema = z
  .object({
    id: z.string().openapi({ example: "ws_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("workspace"),
    name: z.string(),
    created_at: isoDateTime,
  })
  .openapi("Workspace");

type Workspace = z.infer<typeof WorkspaceSchema>;

export const ListWorkspacesQuery = z.strictObject({ limit: limitQuery, after: afterQuery });

export const serializeWorkspace = (row: typeof workspaces.$inferSelect): Workspace => ({
  id: row.id,
  object: "workspace",
  name: row.name,
  created_at: iso(row.createdAt),
});
