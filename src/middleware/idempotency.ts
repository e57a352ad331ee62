import { z } from "@hono/zod-openapi";
import { createMiddleware } from "hono/factory";
import { ApiError } from "../errors/api-error";
import type { AppEnv } from "../lib/types";

export const IdempotencyHeaders = z.object({
  "Idempotency-Key": z
    .string()
    .min(8)
    .max(255)
    .optional()
    .openapi({
      param: { name: "Idempotency-Key", in: "header" },
      description:
        "Makes the request safe to retry: within 24 hours, a retry with the same key and the same body gets the original response back.",
      example: "3f1c2a9e-5b7d-4e61-9a0b-2c8d4f6e1a3b",
    }),
});

export const idempotency = createMiddleware<AppEnv>(async (c, next) => {
  const key = c.req.header("idempotency-key");
  if (key !== undefined && (key.length < 8 || key.length > 255)) {
    throw new ApiError("validation_failed", "Idempotency-Key must be 8 to 255 characters", {
      param: "Idempotency-Key",
    });
  }
  await next();
});
