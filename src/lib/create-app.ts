import { OpenAPIHono } from "@hono/zod-openapi";
import { ApiError } from "../errors/api-error";
import { zodIssuesToDetails } from "../errors/zod-messages";
import type { AppEnv } from "./types";

const canonicalHeader = (name: string) => name.replace(/(^|-)([a-z])/g, (_, dash: string, ch: string) => dash + ch.toUpperCase());

/** A router whose validation failures all become 400 validation_failed in the one error envelope. */
export const createRouter = () =>
  new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (result.success) return;
      const rename = result.target === "header" ? canonicalHeader : undefined;
      const details = zodIssuesToDetails(result.error, rename);
      const first = details[0];
      throw new ApiError("validation_failed", first?.message ?? "The request is invalid", {
        param: first?.param,
        details,
      });
    },
  });
