// The deployed worker's start-up (its CPU time evaluating the bundle) and bundle size; the bench entry's bundle.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { wrangler } from "./wrangler.mjs";
import { median } from "./util.mjs";

const sizes = (dir) => {
  const files = readdirSync(dir).filter((file) => /\.(m?js|wasm)$/.test(file));
  const bytes = files.map((file) => readFileSync(join(dir, file)));
  return {
    files,
    rawBytes: bytes.reduce((sum, b) => sum + b.length, 0),
    gzipBytes: bytes.reduce((sum, b) => sum + gzipSync(b, { level: 9 }).length, 0),
  };
};

/** Wrangler's own "Total Upload: X KiB / gzip: Y KiB" line. */
const reported = (output) => {
  const match = /Total Upload: ([\d.]+) KiB \/ gzip: ([\d.]+) KiB/.exec(output);
  return match ? { uploadKiB: Number(match[1]), gzipKiB: Number(match[2]) } : undefined;
};

/** The deployable bundle's size, built as `wrangler deploy` builds it (wrangler.toml, minified). */
export const measureBundle = (outDir) => {
  const output = wrangler(["deploy", "--dry-run", "--outdir", outDir]);
  return { ...sizes(outDir), wrangler: reported(output) };
};

/** The bench entry (bench/worker/index.ts: the deployed worker plus the baselines), built to be served. */
export const buildBenchBundle = (outDir, config) => {
  wrangler(["deploy", "--dry-run", "--config", config, "--outdir", outDir]);
  return join(outDir, "index.js");
};

/** CPU time in a workerd CPU profile outside the idle state, in ms. */
const busyMs = (profileFile) => {
  const profile = JSON.parse(readFileSync(profileFile, "utf8"));
  const idle = new Set(profile.nodes.filter((node) => node.callFrame.functionName === "(idle)").map((node) => node.id));
  let busyUs = 0;
  profile.samples.forEach((id, i) => {
    if (!idle.has(id)) busyUs += profile.timeDeltas[i] ?? 0;
  });
  return busyUs / 1000;
};

/**
 * The deployed worker's start-up: `wrangler check startup`, workerd's CPU profile of evaluating the
 * bundle's top level (what Cloudflare's start-up limit applies to), `rounds` times. One profile varies
 * by a factor of two with the machine's load, so the figure is the median.
 */
export const profileStartup = (formFile, profileDir, rounds = 5) => {
  wrangler(["deploy", "--dry-run", "--outfile", formFile]);
  const cpuMs = [];
  for (let round = 0; round < rounds; round++) {
    const profileFile = join(profileDir, `startup-${round}.cpuprofile`);
    wrangler(["check", "startup", "--worker", formFile, "--outfile", profileFile]);
    cpuMs.push(busyMs(profileFile));
  }
  return { cpuMs: median(cpuMs), rounds: cpuMs, profileBytes: statSync(join(profileDir, "startup-0.cpuprofile")).size };
};
