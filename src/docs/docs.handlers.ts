import { createRoute, z } from "@hono/zod-openapi";
import { ConfigurationError, missingOptionalBindings } from "../errors/configuration";
import { requestIdHeader } from "../errors/openapi";
import { createRouter } from "../lib/create-app";
import { routeName } from "../lib/route";

export const API_TITLE = "Newsletter Service API";

/** Where the reference's script lives in the worker's static assets (scripts/docs-assets.mjs puts it there). */
const SCALAR_SCRIPT = "/docs/scalar-standalone.js";
const INIT_SCRIPT = "/docs/init.js";

/**
 * Scripts only from this origin, and no inline script: the page's configuration is a script of its own.
 * Styles allow 'unsafe-inline' because the reference injects its stylesheets and theme as <style>
 * elements at run time (a nonce reaches only one of them); inline styles cannot run code. Fonts are the
 * system's (`withDefaultFonts: false`), and requests go to this origin only, so nothing leaves for a CDN.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

// The link to the document is plain HTML outside the reference's mount point, so it shows when
// scripts are disabled, blocked, or fail to load.
const page = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>${API_TITLE}</title>
  </head>
  <body>
    <p id="openapi-link" style="margin: 0; padding: 8px 16px; font: 14px system-ui, sans-serif; background: #fff; color: #1a1a1a">
      ${API_TITLE}: the machine-readable contract is <a href="/openapi.json" style="color: #0b57d0">/openapi.json</a> (OpenAPI 3.1).
    </p>
    <noscript><p style="margin: 0; padding: 0 16px 8px; font: 14px system-ui, sans-serif; background: #fff; color: #1a1a1a">The interactive reference needs JavaScript.</p></noscript>
    <div id="app"></div>
    <script src="${SCALAR_SCRIPT}"></script>
    <script src="${INIT_SCRIPT}"></script>
  </body>
</html>
`;

// The AI agent, MCP, developer tools and the "Open API Client" button work through Scalar's cloud, which
// this page cannot reach (and which would be handed the document's URL).
const init = `Scalar.createApiReference("#app", ${JSON.stringify({
  url: "/openapi.json",
  withDefaultFonts: false,
  telemetry: false,
  showDeveloperTools: "never",
  hideClientButton: true,
  agent: { disabled: true },
  mcp: { disabled: true },
})});
`;

const docsRoute = createRoute({
  method: "get",
  path: "/docs",
  middleware: [routeName("get", "/docs")] as const,
  tags: ["Utility"],
  summary: "API reference",
  description: `An interactive reference for this document, served with its script from this origin (Content-Security-Policy: scripts from 'self' only). A plain link to \`/openapi.json\` shows without JavaScript.`,
  operationId: "docs",
  security: [],
  responses: {
    200: { description: "The reference page", headers: requestIdHeader, content: { "text/html": { schema: z.string() } } },
  },
});

export const docsRouter = createRouter();

docsRouter.openapi(docsRoute, (c) => {
  c.header("Content-Security-Policy", CONTENT_SECURITY_POLICY);
  return c.html(page, 200);
});

docsRouter.get(INIT_SCRIPT, routeName("get", INIT_SCRIPT), (c) => {
  c.header("Cache-Control", "no-cache");
  return c.body(init, 200, { "Content-Type": "text/javascript; charset=utf-8" });
});

// Through the worker (run_worker_first), so the /v1 alias and the Request-Id header apply here too.
docsRouter.get(SCALAR_SCRIPT, routeName("get", SCALAR_SCRIPT), (c) => {
  // A deployment without [assets]: said, as any missing binding is (the page itself still links the document).
  if (missingOptionalBindings(c.env).includes("ASSETS")) throw ConfigurationError.bindings(["ASSETS"]);
  return c.env.ASSETS.fetch(new URL(SCALAR_SCRIPT, c.req.url));
});
