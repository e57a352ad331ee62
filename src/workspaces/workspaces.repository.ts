import { and, desc, eq, inArray, lt } from "drizzle-orm";
import type { Db } from "../db/client";
import { credentialWorkspaces, workspaces } from "../db/schema";
import { chunksOf } from "../lib/chunks";

export const findWorkspace = (db: Db, id: string) => db.select().from(workspaces).where(eq(workspaces.id, id)).get();

/** Workspaces granted to a credential, newest first, keyset on the grant's primary key. */
export const listCredentialWorkspacesPage = (db: Db, credentialId: string, after: string | undefined, take: number) =>
  db
    .select({ id: workspaces.id, name: workspaces.name, createdAt: workspaces.createdAt })
    .from(credentialWorkspaces)
    .innerJoin(workspaces, eq(workspaces.id, credentialWorkspaces.workspaceId))
    .where(
      and(
        eq(credentialWorkspaces.credentialId, credentialId),
        after === undefined ? undefined : lt(credentialWorkspaces.workspaceId, after),
      ),
    )
    .orderBy(desc(credentialWorkspaces.workspaceId))
    .limit(take);

/** Every workspace of the deployment, newest first (the operator's list). */
export const listWorkspacesPage = (db: Db, after: string | undefined, take: number) =>
  db
    .select()
    .from(workspaces)
    .where(after === undefined ? undefined : lt(workspaces.id, after))
    .orderBy(desc(workspaces.id))
    .limit(take);

/** The insert of a new workspace, for the write's batch. */
export const insertWorkspace = (db: Db, row: typeof workspaces.$inferInsert) => db.insert(workspaces).values(row);

export const existingWorkspaceIds = async (db: Db, ids: string[]): Promise<Set<string>> => {
  const found = new Set<string>();
  for (const part of chunksOf(ids, 90)) {
    const rows = await db.select({ id: workspaces.id }).from(workspaces).where(inArray(workspaces.id, part));
    for (const row of rows) found.add(row.id);
  }
  return found;
};
