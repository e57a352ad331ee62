import type { Integration } from "./types";

const messageId = (deliveryId: string) => `sandbox_${deliveryId}`;

/**
 * Records every message as sent without any network call: test credentials always deliver here.
 * Nothing can fail, so the fan-out settles each delivery as it creates it (`settleAtCreation`);
 * `send` serves a delivery that was nonetheless left queued.
 */
export const sandboxIntegration: Integration = {
  slug: "sandbox",
  chunkSize: 500,
  concurrency: 500,
  settleAtCreation: messageId,
  send: async (email) => ({ kind: "sent", providerMessageId: messageId(email.deliveryId) }),
};
