// The statements the subscribers repository runs, as drizzle prints them with `.toSQL()`. The
// storage-floor routes run these very strings on `env.DB` so that a ratio compares like with like.

const columns =
  '"id", "workspace_id", "email", "email_key", "name", "status", "tags", "location", "source", "created_at", "updated_at"';

const qualified = columns.replaceAll('"', "").split(", ").map((column) => `"subscribers"."${column}"`).join(", ");

export const findSubscriberSql = `select ${columns} from "subscribers" where ("subscribers"."workspace_id" = ? and "subscribers"."id" = ?)`;

export const insertSubscriberSql = `insert into "subscribers" (${columns}) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) on conflict do nothing returning ${columns}`;

export type ListFilter = { status?: string; tag?: string; after?: string };

/** The list query for a filter combination, with its parameters in drizzle's order. */
export const listSubscribersSql = (workspaceId: string, filter: ListFilter, take: number) => {
  const conditions: string[] = [];
  const params: unknown[] = [workspaceId];
  if (filter.tag !== undefined) {
    conditions.push('"subscriber_tags"."workspace_id" = ?', '"subscriber_tags"."tag" = ?');
    params.push(filter.tag);
    if (filter.after !== undefined) conditions.push('"subscriber_tags"."subscriber_id" < ?');
  } else {
    conditions.push('"subscribers"."workspace_id" = ?');
    if (filter.after !== undefined) conditions.push('"subscribers"."id" < ?');
  }
  if (filter.after !== undefined) params.push(filter.after);
  if (filter.status !== undefined) {
    conditions.push('"subscribers"."status" = ?');
    params.push(filter.status);
  }
  const where = conditions.length > 1 ? `(${conditions.join(" and ")})` : conditions[0];
  const sql =
    filter.tag !== undefined
      ? `select ${qualified} from "subscriber_tags" inner join "subscribers" on "subscribers"."id" = "subscriber_tags"."subscriber_id" where ${where} order by "subscriber_tags"."subscriber_id" desc limit ?`
      : `select ${columns} from "subscribers" where ${where} order by "subscribers"."id" desc limit ?`;
  params.push(take);
  return { sql, params };
};
