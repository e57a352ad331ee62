// `npm install` / `npm ci` runs this first (package.json "preinstall"): vitest needs Node >= 22.12 (wrangler >= 22),
// so an older Node stops here with one line saying what to do, instead of installing and crashing at
// `npm run dev`. A check here rather than `engine-strict`, so that `npm ci --dry-run` (which installs
// nothing) still verifies the lockfile on any Node.
const [major, minor] = process.versions.node.split(".").map(Number);
const dryRun = process.env.npm_config_dry_run === "true";
if (!dryRun && (major < 22 || (major === 22 && minor < 12))) {
  console.error(`This project needs Node >= 22.12 (found ${process.version}): run \`nvm use\` (.nvmrc), or see the README's Quick start.`);
  process.exit(1);
}
