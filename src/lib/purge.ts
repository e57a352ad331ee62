/**
 * A bounded purge: `deleteSome(size)` deletes up to `size` rows and says how many it did; called
 * again while it finds a full batch, at most `rounds` times, so one sweep stays short.
 */
export const purgeInRounds = async (deleteSome: (size: number) => Promise<number>, size = 1000, rounds = 10): Promise<void> => {
  for (let round = 0; round < rounds; round++) {
    if ((await deleteSome(size)) < size) return;
  }
};
