import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, vi } from "vitest";
import { createApp } from "../src/app";
import worker from "../src/index";
import { createCredential, createWorkspace, type CallOptions } from "./helpers";
import { CapturedQueue, type Tenant } from "./send.fixtures";

// A send driven message by message: the app and the consumer get an env whose SEND_QUEUE keeps what
// is sent, so a test hands messages to the consumer itself and can inject faults between the steps.

const app = createApp();

export const harness = async (mode: "test" | "live" = "live", overrides: Partial<Env> = {}) => {
  const queue = new CapturedQueue();
  const testEnv = { ...env, RESEND_API_KEY: "re_test_key", RESEND_MAX_RPS: "1000", SEND_QUEUE: queue.asBinding(), ...overrides } as Env;
  const workspace = await createWorkspace();
  const credential = await createCredential([workspace.id], { mode });
  const call = async (method: string, path: string, options: Omit<CallOptions, "token"> = {}) => {
    const headers = new Headers(options.headers);
    headers.set("authorization", `Bearer ${credential.token}`);
    if (options.body !== undefined) headers.set("content-type", "application/json");
    const res = await app.fetch(
      new Request(`https://api.example.test${path}`, {
        method,
        headers,
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
      }),
      testEnv,
      createExecutionContext(),
    );
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined, text };
  };
  const t: Tenant = { workspace, credential, token: credential.token, ws: `/v1/workspaces/${workspace.id}`, call };

  let nextId = 0;
  /** Hands up to 10 captured messages to the consumer; retried ones go back with attempts + 1. */
  const step = async (queueName = "newsletter-send") => {
    const taken = queue.messages.splice(0, 10);
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

