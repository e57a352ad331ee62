import { describe, expect, it } from "vitest";
import * as lean from "../src/lib/zod-lean";
import * as zod from "zod/v4";

// The deployable bundle aliases "zod" to src/lib/zod-lean (wrangler.toml), a copy of zod's entry without
// its locales. If a zod upgrade adds an export, the copy must follow or the bundle would lack it.
describe("the locale-free zod entry", () => {
  it("exports everything zod does, except its locales", () => {
    const expected = Object.keys(zod).filter((name) => name !== "locales").sort();
    const actual = Object.keys(lean).sort();
    expect(actual).toEqual(expected);
    expect(Object.keys(lean.z).sort()).toEqual(Object.keys(zod.z).filter((name) => name !== "locales").sort());
  });
});
