import { and, desc, eq, isNull, lt, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { credentials, credentialWorkspaces } from "../db/schema";
import { chunksOf } from "../lib/chunks";
import type { CredentialMode, Scope } from "../lib/types";

export type CredentialRow = typeof credentials.$inferSelect & { workspaceIds: string[] };

/** A credential's columns and its workspace grants, as one row. */
const withGrants = (db: Db) =>
  db
    .select({
      id: credentials.id,
      name: credentials.name,
      mode: credentials.mode,
      tokenHash: credentials.tokenHash,
      scopes: credentials.scopes,
      createdAt: credentials.createdAt,
      revokedAt: credentials.revokedAt,
      workspaceIds: sql<string>`(select json_group_array(${credentialWorkspaces.workspaceId}) from ${credentialWorkspaces} where ${credentialWorkspaces.credentialId} = ${credentials.id})`,
    })
    .from(credentials);

const parsed = <R extends { workspaceIds: string }>(row: R): Omit<R, "workspaceIds"> & { workspaceIds: string[] } => ({
  ...row,
  workspaceIds: JSON.parse(row.workspaceIds) as string[],
});

export const findCredentialByHash = async (db: Db, tokenHash: string): Promise<CredentialRow | undefined> => {
  const row = await withGrants(db).where(eq(credentials.tokenHash, tokenHash)).get();
  return row && parsed(row);
};

export const findCredential = async (db: Db, id: string): Promise<CredentialRow | undefined> => {
  const row = await withGrants(db).where(eq(credentials.id, id)).get();
  return row && parsed(row);
};

/** One page, newest first; with a workspace, only the credentials granted it (each checked by the grants' key). */
export const listCredentialsPage = async (db: Db, workspaceId: string | undefined, after: string | undefined, take: number): Promise<CredentialRow[]> => {
  const rows = await withGrants(db)
    .where(
      and(
        after === undefined ? undefined : lt(credentials.id, after),
        workspaceId === undefined
          ? undefined
          : sql`exists (select 1 from ${credentialWorkspaces} where ${credentialWorkspaces.credentialId} = ${credentials.id} and ${credentialWorkspaces.workspaceId} = ${workspaceId})`,
      ),
    )
    .orderBy(desc(credentials.id))
    .limit(take);
  return rows.map(parsed);
};

type NewCredential = {
  id: string;
  name: string | null;
  mode: CredentialMode;
  tokenHash: string;
  scopes: Scope[];
  workspaceIds: string[];
  createdAt: number;
};

/** One atomic batch: the credential and its workspace grants. */
/** The inserts of a new credential and its grants, for the write's batch. */
export const insertCredential = (db: Db, credential: NewCredential) => {
  const { workspaceIds, ...row } = credential;
  return [
    db.insert(credentials).values(row),
    ...chunksOf(workspaceIds, 40).map((ids) =>
      db.insert(credentialWorkspaces).values(ids.map((workspaceId) => ({ credentialId: row.id, workspaceId }))),
    ),
  ] as const;
};

/** Sets revoked_at once (revoking again keeps the first instant) and reads the row back, in one batch. */
export const revokeCredential = async (db: Db, id: string, now: number): Promise<CredentialRow | undefined> => {
  const [, [row], grants] = await db.batch([
    db
      .update(credentials)
      .set({ revokedAt: now })
      .where(and(eq(credentials.id, id), isNull(credentials.revokedAt))),
    db.select().from(credentials).where(eq(credentials.id, id)),
    db
      .select({ workspaceId: credentialWorkspaces.workspaceId })
      .from(credentialWorkspaces)
      .where(eq(credentialWorkspaces.credentialId, id)),
  ]);
  if (!row) return undefined;
  return { ...row, workspaceIds: grants.map((g) => g.workspaceId) };
};

