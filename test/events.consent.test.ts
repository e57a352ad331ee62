import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { unsubscribeToken } from "../src/consent/unsubscribe-token";
import { signerFor } from "../src/lib/signing";
import { call, tenant } from "./helpers";
import { createCampaign, sendCampaign, waitForOperation } from "./send.fixtures";
import { createSubscriber, storedEvents } from "./webhooks.fixtures";

// The unsubscribe pages write their subscriber events in the page's own batch. (A file of its own:
// the service's signing key is cached per isolate, and D1 is reset between tests.)


describe("the unsubscribe pages", () => {
  it("the unsubscribe link writes subscriber.unsubscribed once, in the page's own batch", async () => {
    const t = await tenant();
    const ada = (await createSubscriber(t)).body.data;
    const campaign = await createCampaign(t);
    await waitForOperation(t, (await sendCampaign(t, campaign.id)).id);
    const token = await unsubscribeToken(signerFor(env), { subscriberId: ada.id, campaignId: campaign.id });
    const oneClick = () =>
      call("POST", `/u/${token}`, {
        raw: "List-Unsubscribe=One-Click",
        headers: { "content-type": "application/x-www-form-urlencoded" },
      });
    const first = await oneClick();
    expect(first.status, first.text).toBe(200);
    expect((await oneClick()).status).toBe(200);
    // The resubscribe form is a subscriber.updated.
    const back = await call("POST", `/u/${token}/resubscribe`, { raw: "", headers: { "content-type": "application/x-www-form-urlencoded" } });
    const unsubscribed = (await storedEvents(t.workspace.id)).filter((e) => e.type === "subscriber.unsubscribed");
    expect(unsubscribed).toEqual([expect.objectContaining({ resource_id: ada.id })]);
    const [event] = (await t.call("GET", `${t.ws}/events?type=subscriber.unsubscribed`)).body.data;
    expect(event.data.object).toMatchObject({ id: ada.id, status: "unsubscribed" });
    expect(back.status, back.text).toBe(200);
    const [updated] = (await t.call("GET", `${t.ws}/events?type=subscriber.updated`)).body.data;
    expect(updated.data.object).toMatchObject({ id: ada.id, status: "active" });
  });

});
