#!/usr/bin/env node
// Copies the API reference's standalone script out of the pinned @scalar/api-reference package into
// the git-ignored static-assets folder that wrangler.toml's [assets] serves (/docs loads it from there,
// not from a CDN). wrangler's [build] command runs this before `wrangler dev` and `wrangler deploy`
// (so npm run dev, npm run deploy and the bench), and vitest.config.ts before the tests.
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const assetsDir = join(root, ".cache", "assets");

export const prepareDocsAssets = () => {
  // A direct dependency, so npm installs it at the top of node_modules (its exports hide the browser build).
  const packageDir = join(root, "node_modules", "@scalar", "api-reference");
  const { version } = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8"));
  const source = join(packageDir, "dist", "browser", "standalone.js");
  const target = join(assetsDir, "docs", "scalar-standalone.js");
  // Skipped when already current: wrangler dev reruns the build command on every source change.
  const current = existsSync(target) && statSync(target).size === statSync(source).size && statSync(target).mtimeMs >= statSync(source).mtimeMs;
  if (!current) {
    mkdirSync(dirname(target), { recursive: true });
    copyFileSync(source, target);
  }
  return { version, target };
};

if (process.argv[1] === fileURLToPath(import.meta.url)) prepareDocsAssets();
