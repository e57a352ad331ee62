import { z } from "@hono/zod-openapi";
import { idPrefixes, type IdKind } from "./ids";

/** A path id: validated against its prefix, so `sub_…` in a workspace slot is a 400, not a 404. */
export const idParam = (kind: IdKind, name: string) =>
  z
    .string()
    .regex(new RegExp(`^${idPrefixes[kind]}[0-9A-Za-z]{1,64}$`), { error: `must be a ${kind} id starting with ${idPrefixes[kind]}` })
    .openapi({ param: { name, in: "path" }, example: `${idPrefixes[kind]}01JD6Q3Z6W9X8B4N2M5K7P1R3T` });

export const WorkspaceParams = z.object({ workspace_id: idParam("workspace", "workspace_id") });

export const limitQuery = z.coerce
  .number()
  .int()
  .min(1)
  .max(100)
  .default(20)
  .openapi({ description: "Maximum number of objects to return, 1 to 100.", example: 20 });

export const afterQuery = z
  .string()
  .min(1)
  .max(512)
  .optional()
  .openapi({ description: "Opaque cursor: the previous page's `pagination.next_cursor`." });

export const PaginationSchema = z
  .object({
    has_more: z.boolean(),
    next_cursor: z.string().nullable(),
  })
  .openapi("Pagination");

export const isoDateTime = z.string().openapi({ format: "date-time", example: "2026-11-21T12:00:00.000Z" });

export const dataEnvelope = <T extends z.ZodType>(schema: T) => z.object({ data: schema });

export const pageEnvelope = <T extends z.ZodType>(schema: T) =>
  z.object({ data: z.array(schema), pagination: PaginationSchema });
