import type { Integration } from "./types";

/** Records every message as sent without any network call: test credentials always deliver here. */
export const sandboxIntegration: Integration = {
  slug: "sandbox",
  chunkSize: 500,
  concurrency: 500,
  send: async (email) => ({ kind: "sent", providerMessageId: `sandbox_${email.deliveryId}` }),
};
