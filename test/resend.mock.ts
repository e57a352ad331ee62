import { vi } from "vitest";

// A stand-in for Resend's API inside workerd: the batch endpoint behind `fetch`, with its rate limit
// (429 + Retry-After), idempotency keys, injectable faults and a record of every message received.

export type ResendMessage = {
  from: string;
  to: string[];
  subject: string;
  html?: string;
  text: string;
  headers: Record<string, string>;
  reply_to?: string;
  tags?: { name: string; value: string }[];
};

/** What the next calls answer, in order (then `ok`). `reject` names indexes rejected by permissive validation. */
export type Fault =
  | { kind: "ok" }
  /** Answered with `status`; after `delayMs` when given (a slow answer: an ask beside it may leave meanwhile). */
  | { kind: "status"; status: number; name: string; message?: string; retryAfter?: number; delayMs?: number }
  /** The request reaches Resend and is processed, but the answer never arrives (the client times out). */
  | { kind: "timeout" }
  /**
   * The request is processed, but its answer stays on the way until the client gives up on it: the
   * call ends `timeout` when the client's own timeout fires, `abandoned` when the client aborts it.
   */
  | { kind: "hang" }
  /** The request never reaches Resend's processing, and no answer comes until the client gives up on it. */
  | { kind: "stall" }
  /**
   * The request takes `ms` to answer. Meanwhile its key is in progress, and another request under
   * it is answered 409 `concurrent_idempotent_requests`, as Resend does.
   */
  | { kind: "slow"; ms: number }
  /** The connection fails before Resend sees the request. */
  | { kind: "network" }
  | { kind: "reject"; indexes: number[] };

export type Call = { at: number; key: string | null; url: string; auth: string | null; validation: string | null; messages: ResendMessage[]; status: number | "timeout" | "network" | "hanging" | "abandoned" };

export const mockResend = (options: { rps?: number } = {}) => {
  const calls: Call[] = [];
  /** Every message Resend accepted (sent), once per message however often its batch was asked for. */
  const received: (ResendMessage & { id: string })[] = [];
  const faults: Fault[] = [];
  /** Each key's answer, with the request body it answered (Resend refuses the key with any other). */
  const answered = new Map<string, { status: number; body: unknown; payload: string }>();
  const inProgress = new Set<string>();
  let nextId = 0;

  /** No answer until the client gives up: the call ends `timeout` at the client's timeout, `abandoned` when it aborts. */
  const answerNever = (call: Call, signal: AbortSignal | null | undefined) => {
    call.status = "hanging";
    return new Promise<Response>((_, reject) => {
      signal?.addEventListener("abort", () => {
        call.status = signal.reason instanceof DOMException && signal.reason.name === "TimeoutError" ? "timeout" : "abandoned";
        reject(signal.reason);
      });
    });
  };

  const answer = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });

  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const headers = new Headers(init?.headers);
    const messages = JSON.parse(String(init?.body)) as ResendMessage[];
    const at = Date.now();
    const call: Call = {
      at,
      url,
      key: headers.get("idempotency-key"),
      auth: headers.get("authorization"),
      validation: headers.get("x-batch-validation"),
      messages,
      status: 200,
    };
    calls.push(call);
    if (options.rps !== undefined && calls.filter((c) => c.at > at - 1000 && c.status !== "network").length > options.rps) {
      call.status = 429;
      return answer(429, { name: "rate_limit_exceeded", message: "Too many requests" }, { "retry-after": "1" });
    }
    if (call.key !== null && inProgress.has(call.key)) {
      call.status = 409;
      return answer(409, { name: "concurrent_idempotent_requests", message: "Same idempotency key used while original request is still in progress" });
    }
    const fault = faults.shift() ?? { kind: "ok" };
    if (fault.kind === "slow" && call.key !== null) {
      const key = call.key;
      inProgress.add(key);
      await new Promise((resolve) => setTimeout(resolve, fault.ms));
      inProgress.delete(key);
    }
    if (fault.kind === "stall") {
      return answerNever(call, init?.signal);
    }
    if (fault.kind === "network") {
      call.status = "network";
      throw new TypeError("injected: connection reset");
    }
    if (fault.kind === "status") {
      if (fault.delayMs !== undefined) await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
      call.status = fault.status;
      const extra: Record<string, string> = fault.retryAfter === undefined ? {} : { "retry-after": String(fault.retryAfter) };
      return answer(fault.status, { name: fault.name, message: fault.message ?? fault.name }, extra);
    }
    // Resend keeps the answer for a key: the same batch asked again is not sent again; other
    // content under the key is refused.
    const previous = call.key === null ? undefined : answered.get(call.key);
    if (previous && previous.payload !== String(init?.body)) {
      call.status = 409;
      return answer(409, { name: "invalid_idempotent_request", message: "Same idempotency key used with a different request payload" });
    }
    let result = previous;
    if (!result) {
      const rejected = new Set(fault.kind === "reject" ? fault.indexes : []);
      const data: { id: string }[] = [];
      messages.forEach((m, i) => {
        if (rejected.has(i)) return;
        const id = `re_${++nextId}`;
        received.push({ ...m, id });
        data.push({ id });
      });
      result = { status: 200, body: { data, errors: [...rejected].map((index) => ({ index, message: "Invalid `to` field" })) }, payload: String(init?.body) };
      if (call.key !== null) answered.set(call.key, result);
    }
    if (fault.kind === "timeout") {
      call.status = "timeout";
      throw new DOMException("The operation was aborted due to timeout", "TimeoutError");
    }
    if (fault.kind === "hang") {
      return answerNever(call, init?.signal);
    }
    return answer(result.status, result.body);
  });

  return {
    spy,
    calls,
    received,
    /** Queues faults for the next calls, in order. */
    inject: (...next: Fault[]) => faults.push(...next),
    /** Drops the faults not yet used. */
    clearFaults: () => void faults.splice(0),
    /** How many messages each recipient received. */
    copiesPerRecipient: () => {
      const counts = new Map<string, number>();
      for (const m of received) for (const to of m.to) counts.set(to, (counts.get(to) ?? 0) + 1);
      return counts;
    },
  };
};
