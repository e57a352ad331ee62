import { DurableObject } from "cloudflare:workers";
import { ARRIVAL_MS, answerSlot, confirmSlot, type PacerState, pauseUntil, type Reservation, reserveSlot, restartSlot, type Start } from "./pacing";

// The Durable Object that holds the account's pacing state (./pacing.ts: the slot arithmetic and
// why it keeps every second within RESEND_MAX_RPS), and what the Resend integration calls it by.

const STATE_KEY = "state";

/** The account-wide pacer for Resend requests; one instance, by the name `resend`. */
export class ResendPacer extends DurableObject<Env> {
  private state: PacerState = { next: 0 };

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // Kept in storage as well, so an evicted and recreated instance does not hand out slots that
    // were already given away.
    void ctx.blockConcurrencyWhile(async () => {
      const stored = await ctx.storage.get<Omit<PacerState, "starts"> & { starts?: (Start | number)[] }>(STATE_KEY);
      // A record kept before starts carried when they may arrive (plain times) counts each as the
      // guard allowed then.
      const starts = stored?.starts?.map((s): Start => (typeof s === "number" ? { at: s, by: s + ARRIVAL_MS } : s));
      this.state = stored ? { ...stored, starts } : { next: 0 };
    });
  }

  reserve(rps: number, maxWaitMs: number, urgent = false): Reservation {
    const { state, reservation } = reserveSlot(this.state, Date.now(), rps, maxWaitMs, urgent);
    this.save(state);
    return reservation;
  }

  pause(retryAfterMs: number): void {
    this.save(pauseUntil(this.state, Date.now(), retryAfterMs));
  }

  confirm(at: number, rps: number, urgent = false): number | null {
    const { state, start } = confirmSlot(this.state, Date.now(), at, rps, urgent);
    this.save(state);
    return start;
  }

  restart(start: number, rps: number, lateMs = 0): number | null {
    const moved = restartSlot(this.state, Date.now(), start, rps, lateMs);
    this.save(moved.state);
    return moved.start;
  }

  answered(start: number, afterMs: number): void {
    this.save(answerSlot(this.state, start, afterMs));
  }

  private save(state: PacerState) {
    if (state === this.state) return;
    this.state = state;
    // Not awaited: the output gate holds the answer until the write is durable.
    void this.ctx.storage.put(STATE_KEY, state);
  }
}

/** What the integration needs from the pacer: the RPC stub, or a stand-in in tests. */
export type Pacer = {
  /** A slot; `urgent`: for a client waiting on the answer, ahead of the sends' slots (reserveSlot). */
  reserve(rps: number, maxWaitMs: number, urgent?: boolean): Promise<Reservation>;
  pause(retryAfterMs: number): Promise<void>;
  /**
   * Just before the slot at `at`: null when a 429's pause has covered it since it was reserved (or
   * the rate leaves no start near it); otherwise the request's start is recorded, and this is when
   * the caller leaves: the slot, or a little later for a caller that came late (`urgent`: a slot
   * reserved as urgent, put off by up to URGENT_MAX_SHIFT_MS).
   */
  confirm(at: number, rps: number, urgent?: boolean): Promise<number | null>;
  /**
   * From a caller that could not leave at the start recorded for it (`start`, as `confirm` answered),
   * `lateMs` after it: the new start recorded for it (as far ahead as the caller was late, and
   * LEAD_MS), or null (it reserves again).
   */
  restart(start: number, rps: number, lateMs?: number): Promise<number | null>;
  /** The request that left at `start` (as `confirm` or `restart` answered) was answered `afterMs` after it. */
  answered?(start: number, afterMs: number): Promise<void>;
};

/** The pacer's stub, made on first use: resolving the integration (for /health, say) touches no binding. */
export const pacerFor = (env: Pick<Env, "RESEND_PACER">): Pacer => {
  let stub: DurableObjectStub<ResendPacer> | undefined;
  const pacer = () => (stub ??= env.RESEND_PACER.get(env.RESEND_PACER.idFromName("resend")));
  return {
    reserve: (rps, maxWaitMs, urgent) => pacer().reserve(rps, maxWaitMs, urgent),
    pause: (retryAfterMs) => pacer().pause(retryAfterMs),
    confirm: (at, rps, urgent) => pacer().confirm(at, rps, urgent),
    restart: (start, rps, lateMs) => pacer().restart(start, rps, lateMs),
    // A word that cannot be said (the pacer unreachable) must never fail the request it is about.
    answered: async (start, afterMs) => pacer().answered(start, afterMs),
  };
};
