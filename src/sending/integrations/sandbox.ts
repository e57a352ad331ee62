import type { Integration } from "./types";

const messageId = (deliveryId: string) => `sandbox_${deliveryId}`;

/**
 * Records every message as sent without any network call: test credentials always deliver here.
 * Nothing can fail, so the fan-out settles each delivery as it creates it (`settleAtCreation`);
 * `sendBatch` serves a delivery that was nonetheless left queued.
 */
export const sandboxIntegration: Integration = {
  slug: "sandbox",
  chunkSize: 500,
  settleAtCreation: messageId,
  sendBatch: async (emails) => ({
    kind: "answered",
    acceptedEarlier: false,
    outcomes: new Map(emails.map((email) => [email.deliveryId, { kind: "sent", providerMessageId: messageId(email.deliveryId) }])),
  }),
};
