// Bytes an isolate lets its concurrent work hold at once, and a turn for the work that takes them.
// A queue consumer runs up to 25 delivery steps side by side, each holding its rendered batch while
// it waits for its provider slot: without a bound, 25 batches of large newsletters would pass an
// isolate's 128 MB. Taking in turns (one taker at a time, the others only giving back) never
// deadlocks: whoever holds bytes and is not taking is on its way to giving them back.

/** A FIFO of callers taking turns: `acquire` resolves with the function that ends the turn. */
export class Turns {
  private last: Promise<void> = Promise.resolve();

  acquire(): Promise<() => void> {
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    const turn = this.last.then(() => end);
    this.last = this.last.then(() => ended);
    return turn;
  }
}

/** Bytes held at once, at most `limit` (a single take larger than the limit counts as the limit). */
export class ByteBudget {
  private held = 0;
  private highest = 0;
  private readonly waiting: { bytes: number; resolve: () => void }[] = [];

  constructor(readonly limit: number) {}

  /** The most held at once so far. */
  get peak(): number {
    return this.highest;
  }

  /** Waits until `bytes` fit, first come first served; returns what was taken (give that back). */
  async take(bytes: number): Promise<number> {
    const taken = Math.min(bytes, this.limit);
    if (this.waiting.length === 0 && this.held + taken <= this.limit) this.hold(taken);
    else await new Promise<void>((resolve) => this.waiting.push({ bytes: taken, resolve }));
    return taken;
  }

  give(bytes: number): void {
    this.held -= bytes;
    for (let next = this.waiting[0]; next && this.held + next.bytes <= this.limit; next = this.waiting[0]) {
      this.waiting.shift();
      this.hold(next.bytes);
      next.resolve();
    }
  }

  private hold(bytes: number) {
    this.held += bytes;
    this.highest = Math.max(this.highest, this.held);
  }
}

/**
 * What the concurrent work of one invocation shares: bytes held at once, and turns to take them. One
 * per invocation, never per isolate: the runtime cancels a request (or a queue batch) waiting on a
 * promise only another one's work can settle, as hung, and what it was given is then never given back.
 */
export type InvocationBudget = { bytes: ByteBudget; turns: Turns };
