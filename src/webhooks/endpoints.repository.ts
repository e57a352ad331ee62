import { and, count, desc, eq, isNull, lt, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { differs } from "../db/differs";
import { insertWhere } from "../db/insert-where";
import { webhookAttempts, webhookEndpoints } from "../db/schema";
import { eventStatement } from "../events/event-statement";
import { MAX_ENDPOINTS_PER_WORKSPACE } from "./endpoints.schemas";

type EndpointRow = typeof webhookEndpoints.$inferSelect;

/** `whsec_` + base64 of 32 random bytes (the Standard Webhooks secret format). */
export const newSecret = () => `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;

const live = (workspaceId: string, id: string) =>
  and(eq(webhookEndpoints.workspaceId, workspaceId), eq(webhookEndpoints.id, id), isNull(webhookEndpoints.deletedAt));

/** Inserts unless the workspace already has the maximum of (undeleted) endpoints: no row back then. */
export const insertEndpoint = (db: Db, row: typeof webhookEndpoints.$inferInsert) =>
  insertWhere(
    db,
    webhookEndpoints,
    row,
    sql`(SELECT count(*) FROM ${webhookEndpoints} WHERE ${webhookEndpoints.workspaceId} = ${row.workspaceId} AND ${webhookEndpoints.deletedAt} IS NULL) < ${MAX_ENDPOINTS_PER_WORKSPACE}`,
  );

export const countEndpoints = async (db: Db, workspaceId: string) =>
  (
    await db
      .select({ n: count() })
      .from(webhookEndpoints)
      .where(and(eq(webhookEndpoints.workspaceId, workspaceId), isNull(webhookEndpoints.deletedAt)))
      .get()
  )?.n ?? 0;

export const findEndpoint = (db: Db, workspaceId: string, id: string) =>
  db.select().from(webhookEndpoints).where(live(workspaceId, id)).get();

/** The endpoint's id while it exists in the workspace (no row otherwise), to batch with a read of its own. */
export const endpointInWorkspace = (db: Db, workspaceId: string, id: string) =>
  db.select({ id: webhookEndpoints.id }).from(webhookEndpoints).where(live(workspaceId, id)).limit(1);

export const listEndpointsPage = (db: Db, workspaceId: string, after: string | undefined, take: number) =>
  db
    .select()
    .from(webhookEndpoints)
    .where(
      and(
        eq(webhookEndpoints.workspaceId, workspaceId),
        isNull(webhookEndpoints.deletedAt),
        after === undefined ? undefined : lt(webhookEndpoints.id, after),
      ),
    )
    .orderBy(desc(webhookEndpoints.id))
    .limit(take);

export type EndpointChanges = Partial<Pick<EndpointRow, "url" | "events" | "description" | "enabled">> & { updatedAt: number };

/** No row back: no such (undeleted) endpoint in the workspace, or every value given is already there. */
export const updateEndpoint = (db: Db, workspaceId: string, id: string, { updatedAt, ...changes }: EndpointChanges) =>
  db
    .update(webhookEndpoints)
    .set({ ...changes, updatedAt })
    .where(and(live(workspaceId, id), differs(webhookEndpoints, changes)))
    .returning();

/** How long the secret a rotation replaces keeps signing beside the new one. */
const PREVIOUS_SECRET_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * A new secret; the one it replaces signs beside it for PREVIOUS_SECRET_TTL_MS (a second rotation
 * within that time replaces the previous one: at most two secrets sign). No row back: no such
 * (undeleted) endpoint in the workspace.
 */
export const rotateSecret = (db: Db, workspaceId: string, id: string, secret: string, now: number) =>
  db
    .update(webhookEndpoints)
    .set({ previousSecret: sql`${webhookEndpoints.secret}`, previousSecretExpiresAt: now + PREVIOUS_SECRET_TTL_MS, secret, updatedAt: now })
    .where(live(workspaceId, id))
    .returning();

/**
 * Soft delete: the row stays (its attempts refer to it) but is disabled, its secret wiped and it is
 * never shown or delivered to again; pending attempts stop at their next try.
 */
export const deleteEndpoint = (db: Db, workspaceId: string, id: string, now: number) =>
  db
    .update(webhookEndpoints)
    .set({ deletedAt: now, enabled: false, secret: "", previousSecret: null, previousSecretExpiresAt: null, updatedAt: now })
    .where(live(workspaceId, id))
    .returning();

/**
 * A `webhook.test` event about the endpoint, and its one attempt: both only if the endpoint exists
 * (undeleted) in the workspace. The event is born dispatched: it goes to this endpoint alone.
 */
export const testEndpointStatements = (
  db: Db,
  ids: { workspaceId: string; endpointId: string; eventId: string; attemptId: string },
  now: number,
) =>
  [
    eventStatement(db, {
      type: "webhook.test",
      resource: "webhook_endpoint",
      id: ids.endpointId,
      eventId: ids.eventId,
      now,
      dispatchedAt: now,
      when: sql`workspace_id = ${ids.workspaceId} AND deleted_at IS NULL`,
    }),
    insertWhere(
      db,
      webhookAttempts,
      {
        id: ids.attemptId,
        workspaceId: ids.workspaceId,
        endpointId: ids.endpointId,
        eventId: ids.eventId,
        status: "pending",
        attempts: 0,
        lastStatusCode: null,
        lastError: null,
        nextAttemptAt: now,
        createdAt: now,
        updatedAt: now,
      },
      sql`changes() > 0`,
    ),
  ] as const;

export const listAttemptsPage = (db: Db, endpointId: string, after: string | undefined, take: number) =>
  db
    .select()
    .from(webhookAttempts)
    .where(and(eq(webhookAttempts.endpointId, endpointId), after === undefined ? undefined : lt(webhookAttempts.id, after)))
    .orderBy(desc(webhookAttempts.id))
    .limit(take);
