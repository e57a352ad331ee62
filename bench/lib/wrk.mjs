// wrk: detection (installing it from Debian when possible) and one measured run.
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { median } from "./util.mjs";

const version = () => {
  const res = spawnSync("wrk", ["--version"], { encoding: "utf8" });
  if (res.error) return undefined;
  return `${res.stdout}${res.stderr}`.split("\n")[0].replace(/ Copyright.*$/, "").trim();
};

/** wrk's version line; installs it with apt-get when running as root on Debian, else explains and exits. */
export const ensureWrk = () => {
  const found = version();
  if (found) return found;
  const root = typeof process.getuid === "function" && process.getuid() === 0;
  const apt = spawnSync("sh", ["-c", "command -v apt-get"], { encoding: "utf8" }).status === 0;
  if (root && apt) {
    console.log("wrk is missing: installing it with apt-get (Debian package `wrk`)…");
    spawnSync("sh", ["-c", "apt-get update -qq && apt-get install -y -qq wrk"], { stdio: "inherit" });
    const installed = version();
    if (installed) return installed;
  }
  console.error(
    "\nThe benchmark needs the load generator wrk, which is not installed.\n" +
      "  Debian/Ubuntu: sudo apt-get update && sudo apt-get install -y wrk\n" +
      "  macOS:         brew install wrk\n",
  );
  process.exit(2);
};

/** A request line for the driver script (see wrk.lua). */
export const requestLine = ({ method = "GET", path, token = "", key = "", body = "" }) =>
  [method, path, token, key, typeof body === "string" ? body : JSON.stringify(body)].join("\t");

/**
 * Runs wrk against `base` with the given request lines and returns its summary: throughput,
 * latency percentiles (ms) and the count of non-2xx/3xx answers.
 */
export const runWrk = ({ base, lines, seconds, connections, workDir, name, prefix = "" }) => {
  const file = join(workDir, `${name}.requests`);
  writeFileSync(file, `${lines.join("\n")}\n`);
  const script = new URL("./wrk.lua", import.meta.url).pathname;
  const args = ["-t1", `-c${connections}`, `-d${seconds}s`, "--timeout", "10s", "-s", script, base, "--", file, prefix];
  const res = spawnSync("wrk", args, { encoding: "utf8" });
  const match = /WRK_RESULT (\{.*\})/.exec(res.stdout ?? "");
  if (!match) throw new Error(`wrk failed for ${name}: ${res.stderr || res.stdout}`);
  const raw = JSON.parse(match[1]);
  return {
    requests: raw.requests,
    rps: raw.requests / (raw.duration_us / 1e6),
    p50: raw.p50_us / 1000,
    p90: raw.p90_us / 1000,
    p99: raw.p99_us / 1000,
    mean: raw.mean_us / 1000,
    errors: raw.status_errors + raw.socket_errors + raw.timeouts,
  };
};

/** Rounds of one series merged: the median round for each figure (robust to a burst of other load), all errors. */
export const merge = (runs) => ({
  requests: runs.reduce((sum, run) => sum + run.requests, 0),
  rps: median(runs.map((run) => run.rps)),
  p50: median(runs.map((run) => run.p50)),
  p99: median(runs.map((run) => run.p99)),
  errors: runs.reduce((sum, run) => sum + run.errors, 0),
  rounds: runs.length,
});
