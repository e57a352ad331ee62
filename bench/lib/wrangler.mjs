// Wrangler from node_modules/.bin, with its config, data and cache under .cache/ and no telemetry.
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const root = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
export const cacheDir = join(root, ".cache", "bench");
const bin = join(root, "node_modules", ".bin", "wrangler");

const xdg = join(root, ".cache", "xdg");
for (const dir of ["config", "data", "cache"]) mkdirSync(join(xdg, dir), { recursive: true });

export const wranglerEnv = {
  ...process.env,
  WRANGLER_SEND_METRICS: "false",
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  XDG_CONFIG_HOME: join(xdg, "config"),
  XDG_DATA_HOME: join(xdg, "data"),
  XDG_CACHE_HOME: join(xdg, "cache"),
};

/** Runs a wrangler command to completion; throws with its output when it fails. */
export const wrangler = (args, { quiet = true } = {}) => {
  const res = spawnSync(bin, args, { cwd: root, env: wranglerEnv, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (res.status !== 0) throw new Error(`wrangler ${args.join(" ")} failed:\n${res.stdout}\n${res.stderr}`);
  if (!quiet) process.stdout.write(res.stdout);
  return res.stdout;
};

export const wranglerVersion = () => wrangler(["--version"]).trim();

/**
 * A copy of wrangler.toml beside the state folder: wrangler dev reloads the worker whenever its config
 * file changes, and other work may edit the project's. Relative paths in it are made absolute, and no
 * .dev.vars is read from there, so the run uses only the secrets it passes itself.
 */
const configSnapshot = (persistTo) => {
  const file = join(persistTo, "..", "wrangler.bench.toml");
  const text = readFileSync(join(root, "wrangler.toml"), "utf8")
    .replace(/^main = "(.+)"$/m, (_, path) => `main = "${join(root, path)}"`)
    .replace(/^migrations_dir = "(.+)"$/m, (_, path) => `migrations_dir = "${join(root, path)}"`);
  writeFileSync(file, text);
  return file;
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts `wrangler dev` on a prebuilt bundle (so edits to src/ during a run cannot reload the worker
 * under measurement) and resolves once /health answers, with the time that took from spawning.
 */
export const startDev = async ({ script, port, inspectorPort, persistTo, vars, logFile }) => {
  const args = [
    "dev",
    script,
    "--no-bundle",
    "--config",
    configSnapshot(persistTo),
    "--ip",
    "127.0.0.1",
    "--port",
    String(port),
    "--inspector-port",
    String(inspectorPort),
    "--persist-to",
    persistTo,
    "--show-interactive-dev-session=false",
    ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
  ];
  const started = performance.now();
  const child = spawn(bin, args, { cwd: root, env: wranglerEnv, stdio: ["ignore", "pipe", "pipe"], detached: true });
  const { createWriteStream } = await import("node:fs");
  const log = createWriteStream(logFile);
  child.stdout.pipe(log);
  child.stderr.pipe(log);
  let exited = false;
  child.on("exit", () => {
    exited = true;
  });
  const base = `http://127.0.0.1:${port}`;
  for (;;) {
    if (exited) throw new Error(`wrangler dev exited before answering; see ${logFile}`);
    try {
      const res = await fetch(`${base}/health`);
      if (res.ok) break;
    } catch {}
    if (performance.now() - started > 120_000) throw new Error(`wrangler dev did not answer /health in 120 s; see ${logFile}`);
    await sleep(20);
  }
  const startupMs = performance.now() - started;
  const stop = async () => {
    if (exited) return;
    // The process group: wrangler and the workerd processes it started.
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {}
    for (let i = 0; i < 50 && !exited; i++) await sleep(100);
    if (!exited) {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {}
    }
  };
  return { base, startupMs, stop, pid: child.pid };
};
