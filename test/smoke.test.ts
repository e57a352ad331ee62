import { describe, expect, it } from "vitest";
import { call, tenant } from "./helpers";

describe("smoke", () => {
  it("creates and reads a subscriber", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "Ada@Example.com", tags: ["a", "b", "a"] } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.data.tags).toEqual(["a", "b"]);
    const list = await t.call("GET", `${t.ws}/subscribers?tag=b`);
    expect(list.status, list.text).toBe(200);
    expect(list.body.data).toHaveLength(1);
    const health = await call("GET", "/health");
    expect(health.status).toBe(200);
  });
});
