import { TemplateError } from "../content";
import { newId } from "../lib/ids";
import { type Composer, composeEmail } from "./compose";
import { advanceFanout, type Candidate, deliveryStatements, type NewDelivery, recipientWindow } from "./fanout.repository";
import type { Integration } from "./integrations/types";
import type { SendMessage } from "./messages";
import { loadOperationState, type OperationState } from "./send.repository";
import { type Attempt, enqueue, FALLBACK_CHUNK, integrationFor, loadComposer, type StepDeps, type StepResult } from "./step";

// The fan-out step of a send: the audience, window by window, becomes deliveries (settled at once
// for the sandbox; otherwise queued in provider-sized chunks, each with its work message).

/** Active subscribers scanned per fan-out window (matching or not): one read, one batched insert. */
export const FANOUT_WINDOW = 500;
/**
 * Windows one fan-out message works through before enqueueing the next: fewer queue hops and
 * operation reads per recipient, while a message still does a small, bounded amount of work
 * (about 15 D1 and queue calls, well under a second).
 */
export const FANOUT_WINDOWS_PER_MESSAGE = 4;
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
  let read = recipientWindow(deps.d1, op, position, FANOUT_WINDOW);
  for (let i = 0; i < FANOUT_WINDOWS_PER_MESSAGE; i++) {
    const candidates = await read;
    // The next window's read goes out now, so it overlaps this window's rendering and writes (a read
    // changes nothing: if this window does not advance, it is dropped). Its subscribers all sort
    // after this window's, whatever this window writes.
    if (candidates.length === FANOUT_WINDOW && i + 1 < FANOUT_WINDOWS_PER_MESSAGE) {
      read = recipientWindow(deps.d1, op, candidates.at(-1)?.id ?? position, FANOUT_WINDOW);
      read.catch(() => undefined); // awaited (and its error thrown) on the next turn, if there is one
    }
    const window = await fanoutWindow(deps, op, integration, composer, position, candidates, attempt);
    // Not advanced: a duplicate of this message got there first and carries on from there.
    if (!window.advanced || window.done) return;
    position = window.last;
  }
  await enqueue(deps, [{ type: "fanout", operation_id: op.id, after: position }]);
};

/** One window (`window`: the next FANOUT_WINDOW active subscribers after `after`): its deliveries, then the position. */
const fanoutWindow = async (
  deps: StepDeps,
  op: OperationState,
  integration: Integration | undefined,
  composer: Composer | undefined,
  after: string | null,
  window: Candidate[],
  attempt: Attempt,
): Promise<{ advanced: boolean; done: boolean; last: string | null }> => {
  const done = window.length < FANOUT_WINDOW;
  const last = window.at(-1)?.id ?? after;
  const now = deps.now();
  const matched = window.filter((c) => c.matches);
  const chunk = integration?.chunkSize ?? FALLBACK_CHUNK;
  // Each delivery records the last member of its provider batch (see queuedChunk).
  const chunkEndOf = (i: number) => matched[Math.min(Math.floor(i / chunk) * chunk + chunk - 1, matched.length - 1)]?.id;
  const settle = integration?.settleAtCreation;
  // Rows settled at creation (the sandbox) are never read by chunk: they get no chunk_end, and their
  // JSON stays as small as it was.
  const planned = matched.map((c, i) => ({
    candidate: c,
    row: { id: newId("delivery", now), subscriberId: c.id, email: c.email, ...(!settle && { chunkEnd: chunkEndOf(i) }) } satisfies NewDelivery,
  }));
  const rows: NewDelivery[] = planned.map((p) => p.row);
  // A delivery settled at creation is handed over here: its message is rendered as any other
  // (what the sandbox measures is what a provider send costs). One that cannot be rendered is
  // created queued instead, and the delivery step records why it failed.
  let unsettled: typeof rows = [];
  let settled = rows;
  if (settle && composer) {
    const rendered = await Promise.all(
      planned.map(({ candidate: c, row }) =>
        composeEmail(composer, { id: c.id, email: c.email, ...c.fields }, row.id).then(
          () => true,
          (err: unknown) => {
            if (err instanceof TemplateError) return false;
            throw err;
          },
        ),
      ),
    );
    settled = rows.filter((_, i) => rendered[i]);
    unsettled = rows.flatMap((row, i) => (rendered[i] ? [] : [{ ...row, chunkEnd: chunkEndOf(i) }]));
  }
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
