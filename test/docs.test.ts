import { describe, expect, it } from "vitest";
import { call } from "./helpers";

describe("GET /docs", () => {
  it("serves the reference page with its scripts from this origin only", async () => {
    const res = await call("GET", "/v1/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toMatch(/https?:|\*/);
    const scripts = [...res.text.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.map(([, attributes]) => attributes?.match(/src="([^"]+)"/)?.[1])).toEqual([
      "/docs/scalar-standalone.js",
      "/docs/init.js",
    ]);
    // No inline script: the CSP would block it.
    expect(scripts.every(([, , body]) => body?.trim() === "")).toBe(true);
    expect(res.text).not.toMatch(/https?:\/\//);
  });

  it("links to /openapi.json in plain HTML, outside the reference's mount point", async () => {
    const res = await call("GET", "/docs");
    const withoutScripts = res.text.replace(/<script[\s\S]*?<\/script>/g, "").replace(/<noscript>[\s\S]*?<\/noscript>/g, "");
    expect(withoutScripts).toContain('<a href="/openapi.json" style="color: #0b57d0">/openapi.json</a>');
  });

  it("serves the reference's script from the worker's static assets, under /v1 too", async () => {
    for (const path of ["/docs/scalar-standalone.js", "/v1/docs/scalar-standalone.js"]) {
      const res = await call("GET", path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/javascript/);
      expect(res.text).toContain("createApiReference");
      expect(res.headers.get("request-id")).toMatch(/^req_/);
    }
    const init = await call("GET", "/docs/init.js");
    expect(init.status).toBe(200);
    expect(init.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect(init.text).toContain('"url":"/openapi.json"');
  });

  it("does not expose other static files or change unknown paths' 404", async () => {
    const res = await call("GET", "/docs/other.js");
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe("not_found");
  });
});
