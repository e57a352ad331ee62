import { DurableObject } from "cloudflare:workers";

// Resend limits the whole account (RESEND_MAX_RPS requests a second), while sends run in many queue
// consumer invocations at once, in many isolates. One Durable Object instance (by name) is the single
// place that knows when the next request may leave: each caller reserves a slot before its request
// and waits until then. Slots are spaced just over 1000 / rps ms apart; what keeps every second at
// `rps` request starts or fewer is the record of the starts confirmed (below). A 429 pauses every
// caller until its Retry-After has passed, those holding a slot inside the pause included: a caller confirms its slot just before it comes, and reserves again if
// a pause has covered it since. Confirming records the moment the request leaves: its slot, or, for a
// caller that comes late, the earliest moment that keeps every sliding second at `rps` starts (a
// caller that woke late cannot crowd the callers that kept time; it waits the few ms it must). A
// caller that cannot leave at the start recorded for it (its isolate busy, the answer slow) says so
// before leaving, and its start moves likewise.

export type PacerState = {
  /** Earliest time (epoch ms) the next slot may start. */
  next: number;
  /** No request may start before this (epoch ms): the end of the latest 429's Retry-After. */
  pausedUntil?: number;
  /** When the requests confirmed within the last window leave (epoch ms), in no particular order. */
  starts?: number[];
};

type Reservation = {
  /**
   * When the request may leave (epoch ms). The caller waits until then by its own clock, so the
   * time the answer took to come back from the pacer is not added to the slot.
   */
  at: number;
  /** How far the slot was from the moment it was reserved (ms). */
  waitMs: number;
  /** false: the wait would exceed `maxWaitMs`; nothing was reserved and the caller should come back later. */
  granted: boolean;
};

/**
 * How far ahead of `now` the earliest slot lies. A slot is a moment the caller waits for; one that
 * began the instant it was reserved would already be past when the answer reaches the caller, and
 * its request would leave late by that trip, squeezing the gap to the next one. A lead just longer
 * than the trip keeps every request on its slot; it only delays a request after a quiet period.
 */
export const LEAD_MS = 50;

/**
 * The slot arithmetic: the next free slot at or after `now` + LEAD_MS, and the state after taking it.
 * An `urgent` caller (a client waiting for its answer: a test send, a confirmation mail) does not
 * queue behind the slots handed out to sends: it takes the first moment the starts recorded so far
 * leave free (and no pause covers); the send whose slot it comes before is moved back when it
 * confirms (confirmSlot), as is every one after it, by one slot each.
 */
export const reserveSlot = (
  state: PacerState,
  now: number,
  rps: number,
  maxWaitMs: number,
  urgent = false,
): { state: PacerState; reservation: Reservation } => {
  const slot = urgent ? firstFree(state, now, rps) : Math.max(now + LEAD_MS, state.next);
  const waitMs = slot - now;
  if (waitMs > maxWaitMs) return { state, reservation: { at: slot, waitMs, granted: false } };
  return { state: { ...state, next: Math.max(state.next, slot + intervalMs(rps)) }, reservation: { at: slot, waitMs, granted: true } };
};

/** The first moment from `now` + LEAD_MS that no pause covers and that keeps the recorded starts within the rate. */
const firstFree = (state: PacerState, now: number, rps: number): number => {
  const window = startWindow(rps);
  const from = Math.max(now + LEAD_MS, state.pausedUntil ?? 0);
  const recent = (state.starts ?? []).filter((s) => s > from - window.ms).sort((a, b) => a - b);
  // Free once the start `count` before the end of the recorded ones leaves the window.
  const blocking = recent.length >= window.count ? (recent[recent.length - window.count] as number) : undefined;
  return blocking === undefined ? from : Math.max(from, blocking + window.ms);
};

/** After a 429: no slot starts before `retryAfterMs` from now, not even one handed out already. */
export const pauseUntil = (state: PacerState, now: number, retryAfterMs: number): PacerState => ({
  // The starts confirmed so far stay: a pause shorter than a window must not let a later confirm
  // put more than the rate's starts into one window with them.
  ...state,
  next: Math.max(state.next, now + retryAfterMs),
  pausedUntil: Math.max(state.pausedUntil ?? 0, now + retryAfterMs),
});

/** Whether a slot handed out earlier may still be used: no pause has covered it since. */
export const slotStands = (state: PacerState, at: number): boolean => at >= (state.pausedUntil ?? 0);

/**
 * How late past its recorded start a request may leave without saying so (resend-requests.ts). The
 * window below is that much wider than the rate's second (plus GUARD_MS), so a sender that leaves
 * up to this late still keeps every second within the rate.
 */
export const LATE_MS = 10;

/**
 * What a request may take, beyond LATE_MS, from leaving its worker to reaching Resend, more than the
 * request two slots before it took: the rate is counted where requests arrive. Measured against a
 * stand-in under `wrangler dev`: 5 ms at the median, up to about 25 ms on a fresh connection or
 * while the isolate renders another chunk. At 10 ms, a 10,000-recipient send met 0 to 4 429s a run;
 * at 30, none in the runs measured, for 20 ms more a slot (bench/README.md).
 */
export const GUARD_MS = 30;

/**
 * The limit as a window: at most `count` request starts in any `ms`: 1000 ms (for a rate under 1 a
 * second, 1000 / rps), widened by GUARD_MS and LATE_MS. A fractional rate over 1 (2.5) keeps to its whole part in
 * every second.
 */
export const startWindow = (rps: number): { count: number; ms: number } =>
  rps >= 1 ? { count: Math.floor(rps), ms: 1_000 + GUARD_MS + LATE_MS } : { count: 1, ms: Math.ceil(1000 / rps) + GUARD_MS + LATE_MS };

/**
 * Time between slots: 1000 / rps plus GUARD_MS, and never less than the window allows (at 2 a
 * second, 530 ms: two slots are 1,060 ms apart, a window being 1,040 ms; at 1, 1,040 ms), so slots
 * kept on time always fit. The guard in each interval counts again across the next: a start and the
 * one two after it are 60 ms clear of a second. Slots sharing the window evenly (520 ms, 40 ms
 * clear) met a 429 in the 10,000-recipient bench, a request reaching the stand-in 43 ms late.
 */
export const intervalMs = (rps: number) => {
  const window = startWindow(rps);
  // A fractional rate over 1 is spaced as its whole part (2.5 as 2), as its window counts.
  const spaced = rps >= 1 ? Math.floor(rps) : rps;
  return Math.max(Math.ceil(1000 / spaced) + GUARD_MS, Math.ceil(window.ms / window.count));
};

/** Whether `starts` (sorted) keep every window at `count` starts or fewer. */
const fits = (starts: readonly number[], window: { count: number; ms: number }): boolean => {
  for (let i = 0; i + window.count < starts.length; i++) {
    if ((starts[i + window.count] as number) - (starts[i] as number) < window.ms) return false;
  }
  return true;
};

/**
 * A start that cannot be at its slot is put off by at most this: a sender woken a little late costs
 * the account that little, and the later senders' slots shift with it, rather than losing its turn
 * (a slot at the end of every sender's queue). Past it, the sender reserves again.
 */
export const MAX_SHIFT_MS = 1_000;

/**
 * How late the first requests after a quiet spell (the first `floor(rps)` when none left in the
 * two windows before) may reach Resend: a send's first requests leave while its isolate is busiest
 * (the fan-out, the first chunks read and rendered, new connections), and were measured reaching a
 * stand-in up to 440 ms after they left. They leave on time, but count this much later, so the
 * starts after them keep clear of where they may arrive: at 2 a second the third start after a quiet
 * spell comes this much later, once.
 */
export const COLD_MS = 500;

/**
 * Records a request's start at the earliest moment from `from` on that keeps every window at `count`
 * starts or fewer, given the starts already recorded (those of the callers that kept time, and any
 * confirmed for later); null when that is more than MAX_SHIFT_MS away. Starts older than two windows
 * are dropped: the last window's can share one with a request yet to come, and both say whether the
 * account was quiet (a cold start, COLD_MS).
 */
const recordStart = (state: PacerState, now: number, from: number, rps: number): { state: PacerState; start: number | null } => {
  const window = startWindow(rps);
  // Two windows are kept: the last says where a start fits, both whether the account was quiet.
  const kept = (state.starts ?? []).filter((s) => s > now - 2 * window.ms);
  const recent = kept.filter((s) => s > now - window.ms).sort((a, b) => a - b);
  // The first starts after a quiet spell may reach Resend up to COLD_MS late: counted that late.
  const cold = kept.length < window.count;
  const counted = (t: number) => (cold ? t + COLD_MS : t);
  // The earliest fitting moment is `from`, or one window after a recorded start (the first moment it
  // stops counting), or a recorded start itself (where the group around it changes).
  const candidates = [from, ...recent.flatMap((s) => [s, s + window.ms])].filter((t) => t >= from && t - from <= MAX_SHIFT_MS).sort((a, b) => a - b);
  const start = candidates.find((t) => fits([...recent, t].sort((a, b) => a - b), window) && fits([...recent, counted(t)].sort((a, b) => a - b), window));
  if (start === undefined) return { state, start: null };
  const starts = [...kept, counted(start)].sort((a, b) => a - b);
  // Slots handed out from now on come after it (after the start itself: where a cold start is counted
  // decides only which later starts fit a window, so at a high rate the first ones do not space out).
  return { state: { ...state, starts, next: Math.max(state.next, start + intervalMs(rps)) }, start };
};

/**
 * Confirming the slot at `at`, just before it (or after it, from a caller that woke late): refused
 * (null) when a pause has covered it since it was reserved; otherwise the request's start is
 * recorded and answered: `at`, or LEAD_MS from `now` for a caller already past it, or a little after
 * either when leaving then would put more than `count` starts into a window (a late caller cannot
 * crowd the callers that kept time).
 */
export const confirmSlot = (state: PacerState, now: number, at: number, rps: number): { state: PacerState; start: number | null } =>
  // A caller already past its slot is given the same lead as a reservation: leaving at `now`, it
  // would be late by the answer's trip back before it could leave.
  slotStands(state, at) ? recordStart(state, now, at >= now ? at : now + LEAD_MS, rps) : { state, start: null };

/**
 * A caller whose request was recorded as leaving at `start` could not leave then (its isolate was
 * busy with other work, or the pacer's answer came back slowly): its start moves to the earliest
 * moment from LEAD_MS on (the answer's trip back) that keeps every window within the rate (null: none
 * near enough, or a pause covers now; the caller reserves again).
 */
export const restartSlot = (state: PacerState, now: number, start: number, rps: number, lateMs = 0): { state: PacerState; start: number | null } => {
  const starts = [...(state.starts ?? [])];
  // Recorded as it was counted (a cold start, COLD_MS later).
  const own = starts.includes(start) ? starts.indexOf(start) : starts.indexOf(start + COLD_MS);
  if (own >= 0) starts.splice(own, 1);
  const without = { ...state, starts };
  if (!slotStands(without, now)) return { state: without, start: null };
  // The caller came back `lateMs` late last time (its answer's trip, the clocks' offset): as much more.
  const moved = recordStart(without, now, now + LEAD_MS + Math.min(Math.max(0, lateMs), MAX_SHIFT_MS), rps);
  return moved.start === null ? { state: without, start: null } : moved;
};


const STATE_KEY = "state";

/** The account-wide pacer for Resend requests; one instance, by the name `resend`. */
export class ResendPacer extends DurableObject<Env> {
  private state: PacerState = { next: 0 };

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    // Kept in storage as well, so an evicted and recreated instance does not hand out slots that
    // were already given away.
    void ctx.blockConcurrencyWhile(async () => {
      this.state = (await ctx.storage.get<PacerState>(STATE_KEY)) ?? { next: 0 };
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

  confirm(at: number, rps: number): number | null {
    const { state, start } = confirmSlot(this.state, Date.now(), at, rps);
    this.save(state);
    return start;
  }

  restart(start: number, rps: number, lateMs = 0): number | null {
    const moved = restartSlot(this.state, Date.now(), start, rps, lateMs);
    this.save(moved.state);
    return moved.start;
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
   * the caller leaves: the slot, or a little later for a caller that came late.
   */
  confirm(at: number, rps: number): Promise<number | null>;
  /**
   * From a caller that could not leave at the start recorded for it (`start`, as `confirm` answered),
   * `lateMs` after it: the new start recorded for it (as far ahead as the caller was late, and
   * LEAD_MS), or null (it reserves again).
   */
  restart(start: number, rps: number, lateMs?: number): Promise<number | null>;
};

/** The pacer's stub, made on first use: resolving the integration (for /health, say) touches no binding. */
export const pacerFor = (env: Pick<Env, "RESEND_PACER">): Pacer => {
  let stub: DurableObjectStub<ResendPacer> | undefined;
  const pacer = () => (stub ??= env.RESEND_PACER.get(env.RESEND_PACER.idFromName("resend")));
  return {
    reserve: (rps, maxWaitMs, urgent) => pacer().reserve(rps, maxWaitMs, urgent),
    pause: (retryAfterMs) => pacer().pause(retryAfterMs),
    confirm: (at, rps) => pacer().confirm(at, rps),
    restart: (start, rps, lateMs) => pacer().restart(start, rps, lateMs),
  };
};
