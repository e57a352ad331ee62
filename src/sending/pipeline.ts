import { deliver } from "./deliver";
import { fanout } from "./fanout";
import { MAX_QUEUE_DELAY_SECONDS, type SendMessage } from "./messages";
import { loadOperationState, markOperationRunning, type OperationState } from "./send.repository";
import { type Attempt, enqueue, type StepDeps, type StepResult } from "./step";

// A send, step by step: `start` (the operation begins), `fanout` (the audience becomes deliveries,
// src/sending/fanout.ts), `deliver` (one chunk handed to the provider, src/sending/deliver.ts). Each
// step is one queue message, safe to run twice.

export type { StepDeps } from "./step";

export const runStep = (deps: StepDeps, message: SendMessage, attempt: Attempt): Promise<StepResult> => {
  switch (message.type) {
    case "start":
      return start(deps, message.operation_id);
    case "fanout":
      return fanout(deps, message.operation_id, message.after, attempt);
    case "deliver":
      return deliver(deps, message.operation_id, message.from, message.to, attempt);
  }
};

/** A queued send not due yet gets its start message again, timed for its start (true); false when it is due. */
const sleptUntilDue = async (deps: StepDeps, op: OperationState): Promise<boolean> => {
  const wait = Math.ceil(((op.startAt ?? 0) - deps.now()) / 1000);
  if (wait <= 0) return false;
  await enqueue(deps, [{ type: "start", operation_id: op.id }], Math.min(wait, MAX_QUEUE_DELAY_SECONDS));
  return true;
};

const start = async (deps: StepDeps, operationId: string): Promise<StepResult> => {
  const op = await loadOperationState(deps.d1, operationId);
  // Gone (e.g. deleted data) or already over: nothing left to do for this message.
  if (!op || op.status === "succeeded" || op.status === "failed") return;
  if (op.status === "queued") {
    // Woken early (a sweep ahead of time): sleep again rather than start a scheduled send early.
    if (await sleptUntilDue(deps, op)) return;
    if (!(await markOperationRunning(deps.d1, op, deps.now()))) {
      // Another start got there first, or a reschedule moved the send later since it was read (the
      // start only runs while it is due): then this message sleeps until the new time.
      const now = await loadOperationState(deps.d1, operationId);
      if (now?.status === "queued") await sleptUntilDue(deps, now);
      return;
    }
  } else if (op.fanoutCursor !== null || op.fanoutDone) {
    // A duplicate start of a fan-out that is under way: its own chain carries on.
    return;
  }
  // First start, or a duplicate of one whose first fan-out message may never have been sent.
  await enqueue(deps, [{ type: "fanout", operation_id: op.id, after: null }]);
};
