// The deployable bundle (`wrangler deploy --dry-run`) and the worker's start-up.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { wrangler } from "./wrangler.mjs";

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

/** Builds the bundle as `wrangler deploy` would (and, for comparison, minified). */
export const measureBundle = (outDir, minifiedOutDir) => {
  const output = wrangler(["deploy", "--dry-run", "--outdir", outDir]);
  const minified = wrangler(["deploy", "--dry-run", "--minify", "--outdir", minifiedOutDir]);
  return {
    ...sizes(outDir),
    wrangler: reported(output),
    minified: { ...sizes(minifiedOutDir), wrangler: reported(minified) },
    script: join(outDir, "index.js"),
  };
};

/**
 * `wrangler check startup`: workerd's CPU profile of evaluating the bundle's top level. The start-up
 * cost is the profiled time outside the idle state.
 */
export const profileStartup = (formFile, profileFile) => {
  wrangler(["deploy", "--dry-run", "--outfile", formFile]);
  wrangler(["check", "startup", "--worker", formFile, "--outfile", profileFile]);
  const profile = JSON.parse(readFileSync(profileFile, "utf8"));
  const idle = new Set(profile.nodes.filter((node) => node.callFrame.functionName === "(idle)").map((node) => node.id));
  let busyUs = 0;
  profile.samples.forEach((id, i) => {
    if (!idle.has(id)) busyUs += profile.timeDeltas[i] ?? 0;
  });
  return { cpuMs: busyUs / 1000, profileBytes: statSync(profileFile).size };
};
