#!/usr/bin/env node
// Fails when package-lock.json lacks an entry for any optional dependency of a locked package.
//
// npm records every platform's binary package (workerd, esbuild, sharp, …) in the lockfile, installed
// or not. When the registry has no such version for some platform, `npm install` still succeeds on this
// machine but writes a lockfile without it, and `npm ci` on a fresh clone then stops with
// "Missing: @cloudflare/workerd-darwin-64@… from lock file". This check makes that visible at once.
// It also holds the two rules that keep the lockfile so (README, Deploying): wrangler and the test
// plugin are pinned to exact versions, and wrangler.toml's compatibility_date is no newer than the
// oldest workerd locked (a newer date makes that runtime refuse to start).
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

const problems = [];
let checked = 0;
for (const [location, entry] of Object.entries(packages)) {
  if (location === "" || entry.link) continue;
  for (const [name, range] of Object.entries(entry.optionalDependencies ?? {})) {
    checked++;
    const found = resolve(location, name);
    // Platform packages are pinned to their parent's exact version: an older entry is as good as none.
    const exact = /^\d+\.\d+\.\d+(-[\w.]+)?$/.test(range);
    if (!found || (exact && packages[found].version !== range)) {
      problems.push(`${name}@${range} (optional dependency of ${location.replace(/^.*node_modules\//, "")}@${entry.version})`);
    }
  }
}

const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
for (const name of ["wrangler", "@cloudflare/vitest-plugin"]) {
  const range = manifest.devDependencies?.[name] ?? manifest.dependencies?.[name];
  if (!/^\d+\.\d+\.\d+$/.test(range ?? "")) problems.push(`${name} must be pinned to an exact version in package.json (it is "${range}")`);
}
// workerd's version carries its date: 1.20261023.1 is 2026-10-23.
const workerdDates = Object.entries(packages)
  .filter(([location]) => location.endsWith("node_modules/workerd"))
  .map(([, entry]) => /^1\.(\d{4})(\d{2})(\d{2})\./.exec(entry.version))
  .filter(Boolean)
  .map(([, y, m, d]) => `${y}-${m}-${d}`)
  .sort();
const compatibilityDate = /^compatibility_date\s*=\s*"(\d{4}-\d{2}-\d{2})"/m.exec(readFileSync(join(root, "wrangler.toml"), "utf8"))?.[1];
if (workerdDates.length === 0 || !compatibilityDate) problems.push("no workerd in package-lock.json, or no compatibility_date in wrangler.toml");
else if (compatibilityDate > workerdDates[0]) {
  problems.push(`wrangler.toml's compatibility_date ${compatibilityDate} is newer than the oldest locked workerd (${workerdDates[0]}): the runtime would not start`);
}

if (problems.length > 0) {
  console.error(`package-lock.json, package.json or wrangler.toml break ${problems.length} of the rules that keep \`npm ci\` and the runtime working:`);
  for (const line of problems) console.error(`  ${line}`);
  console.error("See README, Deploying: pin versions whose every platform package exists in the registry, regenerate the lockfile, and keep compatibility_date no newer than their workerd.");
  process.exit(1);
}
console.log(`package-lock.json: all ${checked} optional dependencies of locked packages have an entry; wrangler and the test plugin pinned; compatibility_date ${compatibilityDate} ≤ workerd ${workerdDates[0]}`);
