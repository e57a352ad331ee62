import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, vi } from "vitest";
import worker from "../src/index";
import { TRIES_PER_STEP } from "../src/sending/integrations/resend";
import { seedSubscribers, tenant } from "./helpers";
import { type Fault, mockResend } from "./resend.mock";
import { allDeliveries, CapturedQueue, createCampaign, type Tenant } from "./send.fixtures";

// A send driven message by message: the app and the consumer get an env whose SEND_QUEUE and
// DELIVERY_QUEUE keep what is sent (in one list, in order; `queue.log` notes each message's queue), so a test hands messages to the consumer itself and can inject faults between the steps.


export const harness = async (mode: "test" | "live" = "live", overrides: Partial<Env> = {}) => {
  const queue = new CapturedQueue();
  const testEnv = { ...env, RESEND_API_KEY: "re_test_key", RESEND_MAX_RPS: "1000", SEND_QUEUE: queue.asBinding("newsletter-send"), DELIVERY_QUEUE: queue.asBinding("newsletter-deliveries"), ...overrides } as Env;
  const t: Tenant = await tenant("Acme", mode, testEnv);

  let nextId = 0;
  /** Hands up to `most` (10) captured messages to the consumer as one batch; retried ones go back with attempts + 1. */
  const step = async (queueName = "newsletter-send", most = 10) => {
    const taken = queue.messages.splice(0, most);
    const batch = createMessageBatch(
      queueName,
      taken.map((m) => ({ id: `msg-${nextId++}`, timestamp: Date.now(), attempts: m.attempts, body: m.body })),
    );
    // getQueueResult does not report retry delays: read them off the calls.
    const retrySpies = batch.messages.map((message) => vi.spyOn(message, "retry"));
    const ctx = createExecutionContext();
    await worker.queue(batch, testEnv);
    const result = await getQueueResult(batch, ctx);
    const retryMessages: { msgId: string; delaySeconds?: number }[] = [];
    batch.messages.forEach((message, i) => {
      const retried = result.retryMessages.some((r) => r.msgId === message.id);
      if (retried) {
        const delaySeconds = retrySpies[i]?.mock.calls[0]?.[0]?.delaySeconds;
        retryMessages.push({ msgId: message.id, delaySeconds });
        queue.messages.push({ body: message.body, attempts: (taken[i]?.attempts ?? 1) + 1, delaySeconds });
      } else expect(result.explicitAcks).toContain(message.id);
    });
    return { ...result, retryMessages };
  };
  const drain = async (maxSteps = 200) => {
    for (let i = 0; i < maxSteps && queue.messages.length > 0; i++) await step();
    expect(queue.messages).toEqual([]);
  };
  return { t, queue, env: testEnv, step, drain };
};

export const operationOf = async (t: Tenant, id: string) => (await t.call("GET", `${t.ws}/operations/${id}`)).body.data;

export const send = async (t: Tenant, campaignId: string, body: Record<string, unknown>) => {
  const res = await t.call("POST", `${t.ws}/campaigns/${campaignId}/send`, { body });
  expect(res.status, res.text).toBe(202);
  return res.body.data as { id: string };
};

/**
 * A D1 binding on which the batch containing a statement with `sql` in it throws instead of running,
 * like an isolate dying just before that write: once, after letting `skip` such batches through.
 */
export const crashingD1 = (sql: string, skip = 0) => {
  const crashes = { left: 1, skip };
  const statementsSql = new WeakMap<D1PreparedStatement, string>();
  const db = {
    prepare: (query: string) => {
      const statement = env.DB.prepare(query);
      const bind = statement.bind.bind(statement);
      statement.bind = (...values: unknown[]) => {
        const bound = bind(...values);
        statementsSql.set(bound, query);
        return bound;
      };
      statementsSql.set(statement, query);
      return statement;
    },
    batch: async (statements: D1PreparedStatement[]) => {
      if (crashes.left > 0 && statements.some((s) => statementsSql.get(s)?.includes(sql)) && crashes.skip-- <= 0) {
        crashes.left--;
        throw new Error("injected: isolate died");
      }
      return env.DB.batch(statements);
    },
    exec: (query: string) => env.DB.exec(query),
    dump: () => env.DB.dump(),
    withSession: (c?: string) => env.DB.withSession(c),
  } as unknown as D1Database;
  return { db, crashes };
};

/**
 * A live send through the Resend mock to `recipients` new subscribers (`fields` as seedSubscribers
 * takes them), the mock answering with `faults` first.
 */
export const resendSend = async (options: {
  recipients: number;
  faults?: Fault[];
  fields?: Parameters<typeof seedSubscribers>[2];
  /** The account's pacer, as `pacerStub` takes it (the real Durable Object by default). */
  reserve?: Parameters<typeof pacerStub>[0];
  confirm?: Parameters<typeof pacerStub>[1];
}) => {
  const stubbed = options.reserve || options.confirm;
  const h = await harness("live", stubbed ? { RESEND_PACER: pacerStub(options.reserve, options.confirm) } : {});
  const ids = await seedSubscribers(h.t.workspace.id, options.recipients, options.fields);
  const resend = mockResend();
  resend.inject(...(options.faults ?? []));
  const campaign = await createCampaign(h.t);
  const op = await send(h.t, campaign.id, { integration_slug: "resend" });
  return { h, ids, resend, campaign, op };
};

/** The same fault for every try of one step. */
export const everyTry = (fault: Fault): Fault[] => Array.from({ length: TRIES_PER_STEP }, () => fault);

export const setStatus = async (t: Tenant, subscriberId: string | undefined, status: string) =>
  expect((await t.call("PATCH", `${t.ws}/subscribers/${subscriberId}`, { body: { status } })).status).toBe(200);

/**
 * A RESEND_PACER binding whose pacer hands out slots as `reserve` says (at once by default) and
 * confirms each as `confirm` says, by default as the real one does when nothing crowds it (the slot,
 * or now for a caller that comes late).
 */
export const pacerStub = (
  reserve: () => Promise<{ at: number; waitMs: number; granted: boolean }> = async () => ({ at: Date.now(), waitMs: 0, granted: true }),
  confirm: (at: number) => Promise<number | null> = async (at) => Math.max(at, Date.now()),
) =>
  ({
    idFromName: () => ({}),
    get: () => ({ reserve, pause: async () => undefined, confirm, restart: async () => Date.now(), answered: async () => undefined }),
  }) as unknown as Env["RESEND_PACER"];

/** Each of the first `count` seeded addresses (user0@example.com, …) got exactly one copy. */
export const expectEachMailedOnce = (resend: ReturnType<typeof mockResend>, count: number) =>
  expect([...resend.copiesPerRecipient().entries()].sort()).toEqual(Array.from({ length: count }, (_, i) => [`user${i}@example.com`, 1]).sort());

/** Each delivery given is `sent`, once, with the id Resend gave its recipient's message. */
export const expectSentAsResendAnswered = (resend: ReturnType<typeof mockResend>, deliveries: Awaited<ReturnType<typeof allDeliveries>>) => {
  const byEmail = new Map(resend.received.map((r) => [r.to[0], r.id]));
  for (const d of deliveries) expect(d).toMatchObject({ status: "sent", attempts: 1, provider_message_id: byEmail.get(d.email), error: null });
};
