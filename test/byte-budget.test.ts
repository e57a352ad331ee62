import { describe, expect, it } from "vitest";
import { ByteBudget, Turns } from "../src/lib/byte-budget";

describe("ByteBudget", () => {
  it("holds at most its limit, hands bytes back to waiters first come first served, and counts an oversized take as the limit", async () => {
    const budget = new ByteBudget(10);
    const order: string[] = [];
    expect(await budget.take(6)).toBe(6);
    const a = budget.take(5).then((n) => (order.push("a"), n));
    // A smaller take that would fit still waits its turn behind the first waiter.
    const b = budget.take(1).then((n) => (order.push("b"), n));
    await Promise.resolve();
    expect(order).toEqual([]);
    budget.give(6);
    expect(await a).toBe(5);
    expect(await b).toBe(1);
    expect(order).toEqual(["a", "b"]);
    budget.give(6);
    expect(await budget.take(50)).toBe(10);
    expect(budget.peak).toBe(10);
    budget.give(10);
  });
});

describe("Turns", () => {
  it("gives one turn at a time, in the order asked", async () => {
    const turns = new Turns();
    const log: string[] = [];
    const work = async (name: string) => {
      const end = await turns.acquire();
      log.push(`${name}:start`);
      await new Promise((resolve) => setTimeout(resolve, 5));
      log.push(`${name}:end`);
      end();
    };
    await Promise.all([work("a"), work("b"), work("c")]);
    expect(log).toEqual(["a:start", "a:end", "b:start", "b:end", "c:start", "c:end"]);
  });
});
