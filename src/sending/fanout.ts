import { TemplateError } from "../content";
import { newId } from "../lib/ids";
import { type Composer, composeEmail } from "./compose";
import { advanceFanout, type Candidate, deliveryStatements, type NewDelivery, recipientWindow } from "./fanout.repository";
import type { Integration } from "./integrations/types";
import type { SendMessage } from "./messages";
import { loadOperationState, type OperationState } from "./send.repository";
import { type Attempt, chunkSizeOf, enqueue, integrationFor, loadComposer, type StepDeps, type StepResult } from "./step";

// The fan-out step of a send: the audience, window by window, becomes deliveries (settled at once
// for the sandbox; otherwise queued in provider-sized chunks, each with its work message).

/** Active subscribers scanned per fan-out window (matching or not): one read, one batched insert. */
export const FANOUT_WINDOW = 500;
/**
 * Active subscribers scanned per read for a segment sent in provider batches: a sparse segment
 * matches few of a window, and a provider batch never spans two commits, so narrow windows would
 * send batches of one or two (a 1-in-1,000 segment of 100 recipients made 100 requests of Resend's
 * shared rate). Reads this wide, gathered until a batch is full (or the message's reads are spent),
 * fill the batches of any segment matching one subscriber in 200 or more. A read checks each
 * subscriber's tags by key, so it costs the same whatever the workspace holds.
 */
export const SEGMENT_WINDOW = 5_000;
/**
 * Windows one fan-out message works through before enqueueing the next: fewer queue hops and
 * operation reads per recipient, while a message still does a small, bounded amount of work
 * (about 15 D1 and queue calls, well under a second).
 */
export const FANOUT_WINDOWS_PER_MESSAGE = 4;
/**
 * Characters of rendered mail (html and text) one fan-out message that renders (the sandbox's) may
 * produce before it hands the rest to the next message. Rendering dominates such a message's CPU:
 * the 20 KB benchmark template's 2,000 messages (html and text) are under 80 MB, well inside; a
 * template at the size limit whose loops print a megabyte a message costs some 80 ms each, and would
 * otherwise spend minutes in one invocation. The window then ends at the last recipient rendered; at
 * least one is, always.
 */
export const FANOUT_RENDER_BUDGET = 96 * 1024 * 1024;
/** Messages rendered at once (their tokens signed side by side) between two looks at the budget. */
const RENDER_SLICE = 50;

/** What a fan-out message has left to render. */
type RenderBudget = { left: number };

/**
 * Works through up to FANOUT_WINDOWS_PER_MESSAGE windows from `after`, each committed on its own
 * (deliveries, then the position), and hands the rest to the next message. Every window is a
 * bounded unit of work, so a message that dies part-way has lost nothing: its redelivery resumes
 * from the last committed position.
 */
export const fanout = async (deps: StepDeps, operationId: string, after: string | null, attempt: Attempt): Promise<StepResult> => {
  const op = await loadOperationState(deps.d1, operationId);
  if (!op || op.status !== "running" || op.fanoutDone) return;
  if (op.fanoutCursor !== after) {
    // Another copy of this message already moved the position on. A redelivered copy may be the
    // one whose follow-up was never enqueued (crash after commit): resume from where it stands.
    if (attempt.attempts > 1) await enqueue(deps, [{ type: "fanout", operation_id: op.id, after: op.fanoutCursor }]);
    return;
  }
  const integration = integrationFor(deps, op.deliveryIntegration);
  // Only a fan-out that settles deliveries as it creates them hands messages over (renders) itself.
  const composer = integration?.settleAtCreation ? await loadComposer(deps, op.campaignId) : undefined;
  let position = after;
  const budget: RenderBudget = { left: FANOUT_RENDER_BUDGET };
  // A segment sent in provider batches (not settled at creation) gathers wide reads into one window
  // until a batch is full: see SEGMENT_WINDOW.
  const gathers = op.segmentFilter !== null && integration !== undefined && !integration.settleAtCreation;
  const size = gathers ? SEGMENT_WINDOW : FANOUT_WINDOW;
  const batch = chunkSizeOf(integration);
  let read = recipientWindow(deps.d1, op, position, size);
  let gathered: Candidate[] = [];
  for (let i = 0; i < FANOUT_WINDOWS_PER_MESSAGE; i++) {
    const candidates = await read;
    const exhausted = candidates.length < size;
    const last = i + 1 === FANOUT_WINDOWS_PER_MESSAGE;
    // The next window's read goes out now, so it overlaps this window's rendering and writes (a read
    // changes nothing: if this window does not advance, it is dropped). Its subscribers all sort
    // after this window's, whatever this window writes.
    if (!exhausted && !last) {
      read = recipientWindow(deps.d1, op, candidates.at(-1)?.id ?? position, size);
      read.catch(() => undefined); // awaited (and its error thrown) on the next turn, if there is one
    }
    gathered = gathered.length === 0 ? candidates : [...gathered, ...candidates];
    if (gathers && !exhausted && !last && gathered.filter((c) => c.matches).length < batch) continue;
    const window = await fanoutWindow(deps, op, integration, composer, position, gathered, exhausted, attempt, budget);
    gathered = [];
    // Not advanced: a duplicate of this message got there first and carries on from there.
    if (!window.advanced || window.done) return;
    position = window.last;
    // The budget spent (the window may have ended early): the next message goes on from here.
    if (budget.left <= 0) break;
  }
  await enqueue(deps, [{ type: "fanout", operation_id: op.id, after: position }]);
};

/**
 * One window (`scanned`: the next active subscribers after `after`, one read's or several gathered,
 * cut short by the render budget; `exhausted`: none after them): its deliveries, then the position.
 */
const fanoutWindow = async (
  deps: StepDeps,
  op: OperationState,
  integration: Integration | undefined,
  composer: Composer | undefined,
  after: string | null,
  scanned: Candidate[],
  exhausted: boolean,
  attempt: Attempt,
  budget: RenderBudget,
): Promise<{ advanced: boolean; done: boolean; last: string | null }> => {
  const now = deps.now();
  const settle = integration?.settleAtCreation;
  // Rendered here (settled at creation): as far as the budget goes, the window ending there.
  const rendering = settle && composer ? await renderWithin(composer, scanned, now, budget) : undefined;
  const window = rendering ? scanned.slice(0, rendering.scanned) : scanned;
  const done = exhausted && window.length === scanned.length;
  const last = window.at(-1)?.id ?? after;
  const matched = window.filter((c) => c.matches);
  const chunk = chunkSizeOf(integration);
  // Each delivery records the last member of its provider batch (see queuedChunk).
  const chunkEndOf = (i: number) => matched[Math.min(Math.floor(i / chunk) * chunk + chunk - 1, matched.length - 1)]?.id;
  // Rows settled at creation (the sandbox) are never read by chunk: they get no chunk_end, and their
  // JSON stays as small as it was; their ids are the ones their messages were rendered for.
  const rows: NewDelivery[] = rendering
    ? rendering.rows
    : matched.map((c, i) => ({ id: newId("delivery", now), subscriberId: c.id, email: c.email, ...(!settle && { chunkEnd: chunkEndOf(i) }) }));
  // A delivery settled at creation is handed over here: its message is rendered as any other
  // (what the sandbox measures is what a provider send costs). One that cannot be rendered is
  // created queued instead, and the delivery step records why it failed.
  const settled = rendering ? rows.filter((_, i) => rendering.rendered[i]) : rows;
  const unsettled = rendering ? rows.flatMap((row, i) => (rendering.rendered[i] ? [] : [{ ...row, chunkEnd: chunkEndOf(i) }])) : [];
  const deliveries = deliveryStatements(deps.d1, op, now, { settled, queued: unsettled, settle });

  // Deliveries settled at creation need no work: they and the position commit in one batch.
  const needsWork = (!settle && (matched.length > 0 || attempt.attempts > 1)) || unsettled.length > 0;
  if (!needsWork) {
    const advanced = await advanceFanout(deps.d1, op, after, last, done, deps.now(), deliveries);
    return { advanced, done, last };
  }
  if (deliveries.length > 0) await deps.d1.batch(deliveries);

  // Delivery work is enqueued before the position moves: if this invocation dies in between, the
  // redelivered message redoes this window and enqueues it again, so no delivery is left without
  // work. A redelivery enqueues even when nothing matches now, in case an earlier try created rows.
  const bounds: (string | null)[] = [];
  for (let i = chunk - 1; i < matched.length - 1; i += chunk) bounds.push(matched[i]?.id ?? null);
  bounds.push(done ? null : last);
  let from = after;
  const work: SendMessage[] = bounds.map((to) => {
    const message: SendMessage = { type: "deliver", operation_id: op.id, from, to };
    from = to;
    return message;
  });
  await enqueue(deps, work);

  const advanced = await advanceFanout(deps.d1, op, after, last, done, deps.now());
  return { advanced, done, last };
};

/**
 * Renders the matching recipients of `scanned` in order, RENDER_SLICE at a time, until the budget is
 * spent (the first slice always renders): how many of `scanned` that covers, the deliveries of those
 * that match, and whether each one's message rendered (a TemplateError: not, the delivery fails).
 */
const renderWithin = async (composer: Composer, scanned: Candidate[], now: number, budget: RenderBudget) => {
  const rows: NewDelivery[] = [];
  const rendered: boolean[] = [];
  let covered = 0;
  while (covered < scanned.length && (rows.length === 0 || budget.left > 0)) {
    // The next slice: up to RENDER_SLICE matching recipients, and those that do not match between them.
    const slice: Candidate[] = [];
    let end = covered;
    while (end < scanned.length && slice.length < RENDER_SLICE) {
      const candidate = scanned[end++] as Candidate;
      if (candidate.matches) slice.push(candidate);
    }
    const made = slice.map((c) => ({ id: newId("delivery", now), subscriberId: c.id, email: c.email }) satisfies NewDelivery);
    const outcomes = await Promise.all(
      slice.map((c, i) =>
        composeEmail(composer, { id: c.id, email: c.email, ...c.fields }, (made[i] as NewDelivery).id).then(
          (email) => email.text.length + (email.html?.length ?? 0),
          (err: unknown) => {
            if (err instanceof TemplateError) return -1;
            throw err;
          },
        ),
      ),
    );
    for (const size of outcomes) {
      rendered.push(size >= 0);
      budget.left -= Math.max(size, 0);
    }
    rows.push(...made);
    covered = end;
  }
  return { scanned: covered, rows, rendered };
};
