#!/usr/bin/env node
// Fails when package-lock.json lacks an entry for any optional dependency of a locked package.
//
// npm records every platform's binary package (workerd, esbuild, sharp, …) in the lockfile, installed
// or not. When the registry has no such version for some platform, `npm install` still succeeds on this
// machine but writes a lockfile without it, and `npm ci` on a fresh clone then stops with
// "Missing: @cloudflare/workerd-darwin-64@… from lock file". This check makes that visible at once.
import { readFileSync } from "node:fs";
import { join } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8"));
const packages = lock.packages ?? {};

/** The entry node's resolution would find for `name` from the package at `location`. */
const resolve = (location, name) => {
  let dir = location;
  for (;;) {
    const candidate = dir === "" ? `node_modules/${name}` : `${dir}/node_modules/${name}`;
    if (packages[candidate]) return candidate;
    if (dir === "") return undefined;
    const parent = dir.lastIndexOf("/node_modules/");
    dir = parent === -1 ? "" : dir.slice(0, parent);
  }
};

const missing = [];
let checked = 0;
for (const [location, entry] of Object.entries(packages)) {
  if (location === "" || entry.link) continue;
  for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
    checked++;
    const found = resolve(location, name);
    // Platform packages are pinned to their parent's exact version: an older entry is as good as none.
    const exact = /^\d+\.\d+\.\d+(-[\w.]+)?$/.test(range);
    if (!found || (exact && packages[found].version !== range)) {
      missing.push(`${name}@${range} (optional dependency of ${location.replace(/^.*node_modules\//, "")}@${entry.version})`);
    }
  }
}

if (missing.length > 0) {
  console.error(`package-lock.json lacks ${missing.length} optional dependencies, so \`npm ci\` would fail:`);
  for (const line of missing) console.error(`  ${line}`);
  console.error("Pin versions whose every platform package exists in the registry (see README, Deploying), then regenerate the lockfile.");
  process.exit(1);
}
console.log(`package-lock.json: all ${checked} optional dependencies of locked packages have an entry`);
