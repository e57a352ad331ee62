import { createApp } from "./app";
import { handleQueueBatch } from "./sending/consumer";
import { sweep } from "./sending/sweeper";
import { handleWebhookBatch } from "./webhooks/consumer";
import { sweepWebhooks } from "./webhooks/sweep";
import { WEBHOOK_DEAD_LETTER_QUEUE, WEBHOOK_QUEUE } from "./webhooks/messages";

const app = createApp();

export default {
  fetch: app.fetch,
  queue: (batch, env) =>
    batch.queue === WEBHOOK_QUEUE || batch.queue === WEBHOOK_DEAD_LETTER_QUEUE ? handleWebhookBatch(batch, env) : handleQueueBatch(batch, env),
  scheduled: async (controller, env) => {
    await Promise.all([sweep(env, controller.scheduledTime), sweepWebhooks(env, controller.scheduledTime)]);
  },
} satisfies ExportedHandler<Env>;

// The Durable Object class behind RESEND_PACER (wrangler.toml): Resend's account-wide request pacing.
export { ResendPacer } from "./sending/pacer";
