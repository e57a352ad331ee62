import { describe, expect, it } from "vitest";
import { seedSubscribers, tenant } from "./helpers";
import { allDeliveries, createCampaign, createSegment, sendCampaign, waitForOperation } from "./send.fixtures";

describe("send, end to end through the queue", () => {
  it("reaches every active subscriber exactly once and never an unsubscribed one", async () => {
    const t = await tenant();
    const ids = await seedSubscribers(t.workspace.id, 1_234, (i) => ({ status: i % 10 === 0 ? "unsubscribed" : "active" }));
    const active = ids.filter((_, i) => i % 10 !== 0);
    const campaign = await createCampaign(t);
    const queued = await sendCampaign(t, campaign.id);
    expect(queued.status).toBe("queued");

    const op = await waitForOperation(t, queued.id);
    expect(op.status).toBe("succeeded");
    expect(op.progress).toEqual({ total: active.length, delivered: active.length, failed: 0 });

    const deliveries = await allDeliveries(t, campaign.id);
    expect(deliveries).toHaveLength(active.length);
    expect(new Set(deliveries.map((d) => d.subscriber_id))).toEqual(new Set(active));
    for (const d of deliveries) {
      expect(d.status).toBe("sent");
      expect(d.provider_message_id).toBe(`sandbox_${d.id}`);
    }
    const after = await t.call("GET", `${t.ws}/campaigns/${campaign.id}`);
    expect(after.body.data.status).toBe("sent");
    expect(after.body.data.sent_at).toMatch(/Z$/);
  });
});
