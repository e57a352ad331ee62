import { expect } from "vitest";
import { tenant, until } from "./helpers";

export type Tenant = Awaited<ReturnType<typeof tenant>>;

export const createNewsletter = async (t: Tenant, body: Record<string, unknown> = {}) => {
  const res = await t.call("POST", `${t.ws}/newsletters`, {
    body: { name: "Weekly", from_email: "news@example.com", from_name: "Acme News", ...body },
  });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { id: string };
};

export const createSegment = async (t: Tenant, filter: { tags_any?: string[]; tags_all?: string[] }) => {
  const res = await t.call("POST", `${t.ws}/segments`, { body: { name: "Segment", filter } });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { id: string };
};

export const createCampaign = async (t: Tenant, body: Record<string, unknown> = {}) => {
  const newsletterId = body.newsletter_id ?? (await createNewsletter(t)).id;
  const res = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "Hello", ...body, newsletter_id: newsletterId } });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { id: string; status: string };
};

/** The path (`/u/{token}`) of the unsubscribe link a message of the campaign carries, as its preview renders it. */
export const previewLinkPath = async (t: Pick<Tenant, "call" | "ws">, campaignId: string, subscriberId?: string): Promise<string> => {
  const preview = await t.call("POST", `${t.ws}/campaigns/${campaignId}/preview`, { body: subscriberId ? { subscriber_id: subscriberId } : {} });
  return /<https?:\/\/[^/]+(\/u\/[^>]+)>/.exec(preview.body.data.headers["List-Unsubscribe"])?.[1] ?? "";
};

export const sendCampaign = async (t: Tenant, campaignId: string, body?: Record<string, unknown>) => {
  const res = await t.call("POST", `${t.ws}/campaigns/${campaignId}/send`, body === undefined ? {} : { body });
  expect(res.status, res.text).toBe(202);
  return res.body.data as { id: string; status: string };
};

type Operation = { id: string; status: string; progress: { total: number; delivered: number; failed: number } };

/** Polls the operation over HTTP, as a client would, until it ends. */
export const waitForOperation = async (t: Tenant, operationId: string, timeoutMs = 20_000): Promise<Operation> => {
  let op: Operation | undefined;
  await until(
    async () => {
      const res = await t.call("GET", `${t.ws}/operations/${operationId}`);
      expect(res.status, res.text).toBe(200);
      op = res.body.data as Operation;
      return op.status === "succeeded" || op.status === "failed";
    },
    timeoutMs,
    `operation ${operationId} to end`,
  );
  return op as Operation;
};

export type Delivery = {
  id: string;
  subscriber_id: string;
  email: string;
  status: string;
  attempts: number;
  provider_message_id: string | null;
  error: { code: string; message: string } | null;
};

/** Every delivery of a campaign, following the cursors. */
export const allDeliveries = async (t: Tenant, campaignId: string): Promise<Delivery[]> => {
  const out: Delivery[] = [];
  let after: string | null = null;
  do {
    const res = await t.call("GET", `${t.ws}/campaigns/${campaignId}/deliveries?limit=100${after ? `&after=${after}` : ""}`);
    expect(res.status, res.text).toBe(200);
    out.push(...res.body.data);
    after = res.body.pagination.next_cursor;
  } while (after);
  return out;
};

/** A queue binding that keeps what is sent, so a test can hand it to the consumer itself. */
export class CapturedQueue {
  messages: { body: unknown; attempts: number; delaySeconds?: number }[] = [];
  /**
   * Every message ever sent through the binding, consumed or not, in order; `via`: the queue it was
   * sent to, when the binding was made for one (`asBinding(name)`).
   */
  log: { body: unknown; via?: string }[] = [];
  /** Makes the next `sendBatch`/`send` calls throw, once each, while > 0. */
  failNextSends = 0;
  /** Lets this many more calls through before `failNextSends` applies. */
  passSends = 0;

  private guard() {
    if (this.passSends > 0) {
      this.passSends--;
      return;
    }
    if (this.failNextSends > 0) {
      this.failNextSends--;
      throw new Error("injected: queue unavailable");
    }
  }

  async send(body: unknown, options?: { delaySeconds?: number }, via?: string) {
    this.guard();
    this.messages.push({ body, attempts: 1, delaySeconds: options?.delaySeconds });
    this.log.push({ body, via });
  }

  async sendBatch(batch: Iterable<{ body: unknown; delaySeconds?: number }>, via?: string) {
    this.guard();
    const list = [...batch];
    // Cloudflare Queues refuses a sendBatch of more than 100 messages.
    if (list.length > 100) throw new Error(`sendBatch of ${list.length} messages: Queues takes at most 100`);
    for (const m of list) {
      this.messages.push({ body: m.body, attempts: 1, delaySeconds: m.delaySeconds });
      this.log.push({ body: m.body, via });
    }
  }

  /** The binding; given a queue's name, every message sent through it records that name (`via`). */
  asBinding(via?: string) {
    if (via === undefined) return this as unknown as Queue;
    return {
      send: (body: unknown, options?: { delaySeconds?: number }) => this.send(body, options, via),
      sendBatch: (batch: Iterable<{ body: unknown; delaySeconds?: number }>) => this.sendBatch(batch, via),
    } as unknown as Queue;
  }
}
