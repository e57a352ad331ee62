// The pacing of Resend requests, as pure arithmetic over the pacer's state (./pacer.ts holds it).
// Resend limits the whole account (RESEND_MAX_RPS requests a second), while sends run in many queue
// consumer invocations at once, in many isolates. One Durable Object instance (by name) is the single
// place that knows when the next request may leave: each caller reserves a slot before its request
// and waits until then. What keeps every second at `rps` requests or fewer is the record of the
// starts confirmed (below), each with the latest moment it may reach Resend: a request cannot arrive
// before it leaves, nor after its answer comes back, so a start `rps` after another leaves a second
// after the earlier one may have arrived. Until its answer says sooner, a request is taken to arrive
// within ARRIVAL_MS of leaving (COLD_MS after a quiet spell). A 429 pauses every caller until its
// Retry-After has passed, those holding a slot inside the pause included: a caller confirms its slot
// just before it comes, and reserves again if a pause has covered it since. Confirming records the
// moment the request leaves: its slot, or, for a caller that comes late, the earliest moment that
// keeps every second within the rate (a caller that woke late cannot crowd the callers that kept
// time; it waits the few ms it must). A caller that cannot leave at the start recorded for it (its
// isolate busy, the answer slow) says so before leaving, and its start moves likewise; once its
// answer is back, it says when.

/** A request start the pacer recorded. */
export type Start = {
  /** When the request leaves (epoch ms): it cannot reach Resend before. */
  at: number;
  /**
   * The latest it may reach Resend (epoch ms): `at` + ARRIVAL_MS (COLD_MS after a quiet spell) until
   * its answer comes back, then as answerSlot counts it.
   */
  by: number;
  /** Its answer came back. */
  answered?: true;
};

export type PacerState = {
  /** Earliest time (epoch ms) the next slot may start. */
  next: number;
  /** No request may start before this (epoch ms): the end of the latest 429's Retry-After. */
  pausedUntil?: number;
  /** The requests confirmed within the last two windows, in no particular order. */
  starts?: Start[];
  /**
   * How late the last RECENT_ARRIVALS answered requests were counted as arriving, ms after their
   * start (at most ARRIVAL_MS), oldest first: what the slots handed out are spaced by.
   */
  arrivals?: number[];
};

export type Reservation = {
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

/** How late past its recorded start a request may leave without saying so (resend-requests.ts). */
export const LATE_MS = 10;

/**
 * The latest a request is taken to reach Resend after its recorded start while its answer has not
 * come back sooner: LATE_MS for a sender that leaves that late without saying so, and 50 ms on the
 * way. Measured against a stand-in under `wrangler dev`: 3 to 5 ms at the median, up to about 25 ms
 * on a fresh connection or while the isolate renders another chunk, 43 ms once. A request whose
 * answer came back sooner is counted where its answer says (most, against a stand-in nearby);
 * one whose answer takes longer (Resend itself, a few hundred ms for a batch) is counted this late.
 */
export const ARRIVAL_MS = 60;

/**
 * How late the first requests after a quiet spell (the first `floor(rps)` when none was recorded in
 * the two windows before) are taken to reach Resend until their answers say sooner: a send's first
 * requests leave while its isolate is busiest (the fan-out, the first chunks read and rendered, new
 * connections), and were measured reaching a stand-in up to 440 ms after they left, and up to 750 ms
 * beside a 50,000-recipient fan-out. Answered sooner (as they mostly are), they hold nobody back.
 */
export const COLD_MS = 1_000;

/**
 * A start that cannot be at its slot is put off by at most this: a sender woken a little late costs
 * the account that little, and the later senders' slots shift with it, rather than losing its turn
 * (a slot at the end of every sender's queue). Past it, the sender reserves again.
 */
const MAX_SHIFT_MS = 1_000;

/**
 * As far as an urgent caller's start may be put off. The sends' chunks it moved back confirm their
 * new starts before its moment comes, and take the rate's next second: within MAX_SHIFT_MS there is
 * then often no start left for it, and reserving again puts it behind the same chunks again (logged
 * at the pacer during a 5,000-recipient send: up to four times). Up to 2 s, it leaves instead.
 */
export const URGENT_MAX_SHIFT_MS = 2 * MAX_SHIFT_MS;

/**
 * The limit as a window: at most `count` requests reaching Resend in any `ms`: a second (for a rate
 * under 1 a second, 1000 / rps). A fractional rate over 1 (2.5) keeps to its whole part in every second.
 */
export const startWindow = (rps: number): { count: number; ms: number } =>
  rps >= 1 ? { count: Math.floor(rps), ms: 1_000 } : { count: 1, ms: Math.ceil(1000 / rps) };

/** How many answered requests the slots' spacing is drawn from. */
const RECENT_ARRIVALS = 8;

/**
 * How late requests reach Resend, as the recent answers say: three in four of the last
 * RECENT_ARRIVALS arrived within this (none answered yet: ARRIVAL_MS). Slots spaced by it are kept
 * on time when requests arrive as they lately did; one that arrived later moves the slots after it
 * back a little when they confirm (the rate never depends on it).
 */
const recentArrivalMs = (state: PacerState): number => {
  const sorted = [...(state.arrivals ?? [])].sort((a, b) => a - b);
  return sorted.length === 0 ? ARRIVAL_MS : (sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.75))] as number);
};

/**
 * Time between slots: the window shared by the `count` starts it may hold, each allowed to arrive
 * `arrivalMs` after it leaves (at 2 a second, 530 ms until answers say the requests arrive sooner;
 * 503 ms when they arrive within 5 ms), so slots kept on time always fit.
 */
export const intervalMs = (rps: number, arrivalMs = ARRIVAL_MS) => {
  const window = startWindow(rps);
  return Math.ceil((window.ms + arrivalMs) / window.count);
};

/**
 * Whether every request of `starts` that leaves after `count` others left leaves a window after each
 * of those may have reached Resend: then no window holds more than `count` arrivals, in whatever
 * order they arrive.
 */
const fits = (starts: readonly Start[], window: { count: number; ms: number }): boolean => {
  const sorted = [...starts].sort((a, b) => a.at - b.at);
  let latest = -Infinity;
  for (let z = window.count; z < sorted.length; z++) {
    latest = Math.max(latest, (sorted[z - window.count] as Start).by);
    if ((sorted[z] as Start).at - latest < window.ms) return false;
  }
  return true;
};

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
  const next = Math.max(state.next, slot + intervalMs(rps, recentArrivalMs(state)));
  return { state: { ...state, next }, reservation: { at: slot, waitMs, granted: true } };
};

/**
 * The first moment from `now` + LEAD_MS that no pause covers and that leaves a window after every
 * recorded start but the last `count` - 1 may have reached Resend.
 */
const firstFree = (state: PacerState, now: number, rps: number): number => {
  const window = startWindow(rps);
  const from = Math.max(now + LEAD_MS, state.pausedUntil ?? 0);
  const sorted = [...(state.starts ?? [])].sort((a, b) => a.at - b.at);
  const blocking = sorted.slice(0, Math.max(0, sorted.length - window.count + 1)).map((s) => s.by);
  return blocking.length === 0 ? from : Math.max(from, Math.max(...blocking) + window.ms);
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
 * Records a request's start at the earliest moment from `from` on that keeps every window within the
 * rate, given the starts already recorded (those of the callers that kept time, and any confirmed
 * for later); null when that is more than `maxShiftMs` away. Starts that may have reached Resend more
 * than two windows ago are dropped: the last window's can share one with a request yet to come, and
 * both say whether the account was quiet (a cold start, COLD_MS).
 */
const recordStart = (state: PacerState, now: number, from: number, rps: number, maxShiftMs = MAX_SHIFT_MS): { state: PacerState; start: number | null } => {
  const window = startWindow(rps);
  const kept = (state.starts ?? []).filter((s) => s.by > now - 2 * window.ms);
  const reach = kept.length < window.count ? COLD_MS : ARRIVAL_MS;
  const recorded = (t: number): Start => ({ at: t, by: t + reach });
  // The earliest fitting moment is `from`, or a window after a recorded start may have arrived (the
  // first moment it stops counting), or a recorded start itself (past it, the order changes).
  const candidates = [from, ...kept.flatMap((s) => [s.at, s.by + window.ms])].filter((t) => t >= from && t - from <= maxShiftMs).sort((a, b) => a - b);
  const start = candidates.find((t) => fits([...kept, recorded(t)], window));
  if (start === undefined) return { state, start: null };
  // Slots handed out from now on come after it (after the start itself: how late a cold start may
  // arrive decides only which later starts fit a window, so at a high rate the first ones do not space out).
  const next = Math.max(state.next, start + intervalMs(rps, recentArrivalMs(state)));
  return { state: { ...state, starts: [...kept, recorded(start)], next }, start };
};

/**
 * Confirming the slot at `at`, just before it (or after it, from a caller that woke late): refused
 * (null) when a pause has covered it since it was reserved; otherwise the request's start is
 * recorded and answered: `at`, or LEAD_MS from `now` for a caller already past it, or a little after
 * either when leaving then would put more than `count` requests into a window (a late caller cannot
 * crowd the callers that kept time).
 */
export const confirmSlot = (state: PacerState, now: number, at: number, rps: number, urgent = false): { state: PacerState; start: number | null } =>
  // A caller already past its slot is given the same lead as a reservation: leaving at `now`, it
  // would be late by the answer's trip back before it could leave.
  slotStands(state, at) ? recordStart(state, now, at >= now ? at : now + LEAD_MS, rps, urgent ? URGENT_MAX_SHIFT_MS : MAX_SHIFT_MS) : { state, start: null };

/**
 * A caller whose request was recorded as leaving at `start` could not leave then (its isolate was
 * busy with other work, or the pacer's answer came back slowly): its start moves to the earliest
 * moment from LEAD_MS on (the answer's trip back) that keeps every window within the rate (null: none
 * near enough, or a pause covers now; the caller reserves again).
 */
export const restartSlot = (state: PacerState, now: number, start: number, rps: number, lateMs = 0): { state: PacerState; start: number | null } => {
  // Its own record only: another request may have been recorded at the same moment.
  const starts = [...(state.starts ?? [])];
  const own = starts.findIndex((s) => s.at === start && !s.answered);
  if (own >= 0) starts.splice(own, 1);
  const without = { ...state, starts };
  if (!slotStands(without, now)) return { state: without, start: null };
  // The caller came back `lateMs` late last time (its answer's trip, the clocks' offset): as much more.
  const moved = recordStart(without, now, now + LEAD_MS + Math.min(Math.max(0, lateMs), MAX_SHIFT_MS), rps);
  return moved.start === null ? { state: without, start: null } : moved;
};

/**
 * The request that left at `start` was answered `afterMs` later: it reached Resend by then, so the
 * requests after it need keep clear only of that, when sooner than it was counted. Where answers
 * lately came back within ARRIVAL_MS (three in four), a slower one most likely waited on its way
 * there (its isolate busy with other work sends a request only once that work yields): it is counted
 * as late as it came, up to COLD_MS. Where they take longer (Resend's own, a few hundred ms for a
 * batch), a request stays counted as it was.
 */
export const answerSlot = (state: PacerState, start: number, afterMs: number): PacerState => {
  // Two requests recorded at the same moment cannot be told apart: neither is counted sooner.
  const recorded = (state.starts ?? []).filter((s) => s.at === start && !s.answered);
  const own = recorded.length === 1 ? recorded[0] : undefined;
  if (!own) return state;
  const counted = own.by - own.at;
  const by = own.at + Math.min(Math.max(0, afterMs), recentArrivalMs(state) < ARRIVAL_MS ? Math.max(counted, COLD_MS) : counted);
  const arrivals = [...(state.arrivals ?? []), Math.min(by - own.at, ARRIVAL_MS)].slice(-RECENT_ARRIVALS);
  return { ...state, starts: state.starts?.map((s) => (s === own ? { ...s, by, answered: true } : s)), arrivals };
};
