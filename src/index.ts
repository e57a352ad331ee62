import { createApp } from "./app";
import { handleQueueBatch } from "./sending/consumer";
import { sweep } from "./sending/sweeper";

const app = createApp();

export default {
  fetch: app.fetch,
  queue: (batch, env) => handleQueueBatch(batch, env),
  scheduled: async (controller, env) => {
    await sweep(env, controller.scheduledTime);
  },
} satisfies ExportedHandler<Env>;

// The Durable Object class behind RESEND_PACER (wrangler.toml): Resend's account-wide request pacing.
export { ResendPacer } from "./sending/pacer";
