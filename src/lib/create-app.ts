import { OpenAPIHono, type z } from "@hono/zod-openapi";
import { ApiError } from "../errors/api-error";
import { zodIssuesToDetails } from "../errors/zod-messages";
import type { AppEnv } from "./types";

const canonicalHeader = (name: string) => name.replace(/(^|-)([a-z])/g, (_, dash: string, ch: string) => dash + ch.toUpperCase());

/** A part of the request that broke its schema, as the 400 `validation_failed` naming its first problem. */
export const validationFailed = (error: z.ZodError, target: string): ApiError => {
  const details = zodIssuesToDetails(error, target === "header" ? canonicalHeader : undefined);
  const first = details[0];
  return new ApiError("validation_failed", first?.message ?? "The request is invalid", { param: first?.param, details });
};

/** A router whose validation failures all become 400 validation_failed in the one error envelope. */
export const createRouter = () =>
  new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) throw validationFailed(result.error, result.target);
    },
  });
