#!/usr/bin/env node
// `npm run dev`: local secrets, migrations, `wrangler dev`, then a working demo credential printed.
// On a Node older than wrangler needs, the first import stops it with the one line `npm ci` printed.
import "./check-node.mjs";
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { maskTokenPaths } from "./token-paths.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const wrangler = join(root, "node_modules", ".bin", "wrangler");
const port = Number(process.env.PORT ?? 8787);
const base = `http://localhost:${port}`;
const env = { ...process.env, WRANGLER_SEND_METRICS: "false" };

// 1. Local secrets (.dev.vars is git-ignored; wrangler dev reads it).
const devVars = join(root, ".dev.vars");
const readVars = () =>
  Object.fromEntries(
    (existsSync(devVars) ? readFileSync(devVars, "utf8") : "")
      .split("\n")
      .filter((line) => line.includes("="))
      .map((line) => [line.slice(0, line.indexOf("=")).trim(), line.slice(line.indexOf("=") + 1).trim()]),
  );
// A .dev.vars made by hand (with RESEND_API_KEY, say) may lack the operator token: it gets one too.
if (!readVars().ADMIN_TOKEN) {
  const existed = existsSync(devVars);
  const before = existed ? readFileSync(devVars, "utf8") : "";
  writeFileSync(devVars, `${before}${before && !before.endsWith("\n") ? "\n" : ""}ADMIN_TOKEN=${randomBytes(24).toString("base64url")}\n`);
  console.log(existed ? "Added a local ADMIN_TOKEN to .dev.vars (the operator API needs one)." : "Created .dev.vars with a local ADMIN_TOKEN.");
}
const vars = readVars();

// 2. Migrations on the local D1 database (wrangler's tables of them shown only when it fails).
const migrate = spawnSync(wrangler, ["d1", "migrations", "apply", "DB", "--local"], { cwd: root, env, stdio: ["inherit", "pipe", "pipe"], encoding: "utf8" });
if (migrate.status !== 0) {
  process.stdout.write(migrate.stdout ?? "");
  process.stderr.write(migrate.stderr ?? "");
  process.exit(migrate.status ?? 1);
}
// wrangler prints its table once per migration applied: count the names.
const applied = new Set(migrate.stdout.match(/\b\d{4}_\w+\.sql\b(?=[^\n]*✅)/g) ?? []).size;
console.log(applied > 0 ? `Applied ${applied} migration(s) to the local database.` : "The local database is up to date.");

// 3. The service. `wrangler dev` does not fire cron triggers: with --test-scheduled it exposes the
// scheduled handler, and step 5 calls it every minute, as the deployed cron does (the sweeper that
// restarts work a crash left behind, purges, scheduled sends).
// Links in mail point at this port unless PUBLIC_BASE_URL is set otherwise (.dev.vars or --var).
const args = process.argv.slice(2);
const ownBase = vars.PUBLIC_BASE_URL || args.some((arg) => arg.includes("PUBLIC_BASE_URL")) ? [] : ["--var", `PUBLIC_BASE_URL:${base}`];
// wrangler prints each request's path as it came, and a link's token is in it: its output passes
// through maskTokenPaths. (Output that is not a terminal: wrangler then shows no hotkeys; FORCE_COLOR
// keeps its colours.)
const forward = (from, to) => {
  let pending = "";
  let timer;
  const flush = (upTo = pending.length) => {
    to.write(maskTokenPaths(pending.slice(0, upTo)));
    pending = pending.slice(upTo);
  };
  from.setEncoding("utf8");
  from.on("data", (chunk) => {
    clearTimeout(timer);
    pending += chunk;
    flush(pending.lastIndexOf("\n") + 1);
    // A line with no end yet (a prompt) shows after a moment.
    if (pending) timer = setTimeout(flush, 50);
  });
  from.on("end", () => flush());
};
const colour = process.stdout.isTTY && !process.env.NO_COLOR ? { FORCE_COLOR: "1" } : {};
const dev = spawn(wrangler, ["dev", "--port", String(port), "--test-scheduled", ...ownBase, ...args], {
  cwd: root,
  env: { ...env, ...colour },
  stdio: ["inherit", "pipe", "pipe"],
});
forward(dev.stdout, process.stdout);
forward(dev.stderr, process.stderr);
let cron;
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => dev.kill(signal));
dev.on("exit", (code) => {
  clearInterval(cron);
  process.exit(code ?? 0);
});

// 4. A demo workspace and test credential, made through the operator API and remembered.
const statePath = join(root, ".wrangler", "demo-credential.json");
const admin = (path, body) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${vars.ADMIN_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  }).then(async (res) => {
    if (!res.ok) throw new Error(`${path} answered ${res.status}: ${await res.text()}`);
    return (await res.json()).data;
  });

/** Waits for the service to answer /health; an answer that is not 200 says what to fix (it is not a timeout). */
const waitForHealth = async () => {
  for (let i = 0; i < 600; i++) {
    let res;
    try {
      res = await fetch(`${base}/health`);
    } catch {}
    if (res?.ok) return;
    if (res?.status === 503) {
      const body = await res.json().catch(() => undefined);
      const failed = Object.entries(body?.checks ?? {}).filter(([, check]) => check.status === "failed");
      throw new Error(`the service is up but unavailable: ${failed.map(([name, check]) => `${name}: ${check.message}`).join("; ") || "see GET /health"}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("wrangler dev did not answer /health within 120 s");
};

const demoCredential = async () => {
  if (existsSync(statePath)) {
    const saved = JSON.parse(readFileSync(statePath, "utf8"));
    const probe = await fetch(`${base}/v1/workspaces/${saved.workspace_id}`, { headers: { authorization: `Bearer ${saved.token}` } });
    if (probe.ok) return saved;
  }
  const workspace = await admin("/admin/workspaces", { name: "Demo workspace" });
  const credential = await admin("/admin/credentials", { mode: "test", workspace_ids: [workspace.id], name: "demo" });
  const saved = { workspace_id: workspace.id, token: credential.token };
  mkdirSync(dirname(statePath), { recursive: true });
  writeFileSync(statePath, JSON.stringify(saved, null, 2));
  return saved;
};

try {
  await waitForHealth();
  const { workspace_id, token } = await demoCredential();
  console.log(`
──────────────────────────────────────────────────────────────────────
 Newsletter service: ${base}   (API reference: ${base}/docs)
 Demo workspace:  ${workspace_id}
 Test credential: ${token}

   export NEWSLETTER_TOKEN=${token}
   export WS=${workspace_id}
   curl -s ${base}/v1/workspaces -H "Authorization: Bearer $NEWSLETTER_TOKEN"
──────────────────────────────────────────────────────────────────────
`);
} catch (error) {
  console.error(`Could not create the demo credential: ${error.message}`);
}

// 5. The cron trigger (`* * * * *` in wrangler.toml), every minute while the service runs.
const sweep = () => fetch(`${base}/cdn-cgi/handler/scheduled?cron=*+*+*+*+*`).catch(() => undefined);
cron = setInterval(sweep, 60_000);
