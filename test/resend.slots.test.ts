import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Pacer } from "../src/sending/pacer";
import { LEAD_MS } from "../src/sending/pacing";
import { awaitSlot, FRESH_LOOK_MS, type ResendConfig } from "../src/sending/integrations/resend-requests";

// The last look before a request (is everyone in it still to be mailed?) is made just before its slot
// is confirmed. When the pacer puts the start well after that look (a caller that came late, or one
// it moved), the request looks again just before it leaves: nobody who left in between is mailed.

/** A pacer that grants a slot at once and confirms it `delayMs` later than asked. */
const pacerConfirmingLate = (delayMs: number): Pacer => ({
  reserve: async () => ({ granted: true, at: Date.now() + LEAD_MS, waitMs: 0 }) as Awaited<ReturnType<Pacer["reserve"]>>,
  pause: async () => {},
  confirm: async (at) => at + delayMs,
  restart: async () => null,
});

const config = (pacer: Pacer): ResendConfig => ({ apiKey: "re_test", baseUrl: "https://resend.test", rps: 2, pacer });

// On a fake clock: what is asserted is the order of looks and departure, never a machine's timing.
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

const run = async (delayMs: number, stillAskable: boolean[] = [true, true]) => {
  const settled = runSlot(delayMs, stillAskable);
  await vi.advanceTimersByTimeAsync(5_000);
  return settled;
};

const runSlot = async (delayMs: number, stillAskable: boolean[]) => {
  const journal: string[] = [];
  let looks = 0;
  const began = Date.now();
  const late = await awaitSlot(
    config(pacerConfirmingLate(delayMs)),
    new AbortController().signal,
    async () => {
      journal.push(`look ${Date.now() - began}`);
      return stillAskable[looks++] ?? true;
    },
    async () => void journal.push("withdrawn"),
  );
  return { late, journal: journal.map((line) => line.replace(/ \d+$/, "")), leftAfterMs: Date.now() - began, lookedAt: journal.filter((l) => l.startsWith("look")).map((l) => Number(l.split(" ")[1])) };
};

describe("awaitSlot", () => {
  it("leaves on the look it made just before confirming when the start is the slot", async () => {
    const { late, journal, leftAfterMs } = await run(0);
    // It leaves, on the start the pacer recorded (which it tells the pacer about once answered).
    expect(late).toEqual({ kind: "leave", start: expect.any(Number) });
    expect(leftAfterMs).toBe(LEAD_MS);
    expect(journal).toEqual(["look"]);
  });

  it("looks again just before a start the pacer put well after the look, withdrawing the stale look's number first", async () => {
    const delay = 700;
    const { late, journal, lookedAt, leftAfterMs } = await run(delay);
    expect(late).toEqual({ kind: "leave", start: expect.any(Number) });
    expect(journal).toEqual(["look", "withdrawn", "look"]);
    // The second look is within the freshness bound of the departure.
    expect(leftAfterMs - (lookedAt[1] as number)).toBeLessThanOrEqual(FRESH_LOOK_MS);
    expect(lookedAt[1]! - lookedAt[0]!).toBeGreaterThanOrEqual(delay - LEAD_MS - 20);
  });

  it("sends nothing when nobody is left at the second look", async () => {
    const { late, journal } = await run(700, [true, false]);
    // Nothing leaves.
    expect(late).toBeUndefined();
    expect(journal).toEqual(["look", "withdrawn", "look"]);
  });
});
