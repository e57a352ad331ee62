import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { expect, it } from "vitest";

// src/db/schema.ts and migrations/ must not drift: drizzle-kit, run on a copy of the migrations,
// finds nothing to generate. A schema edit without `npm run db:generate` fails here.
it("the migrations describe src/db/schema.ts exactly (drizzle-kit generate has nothing to add)", () => {
  const root = resolve(import.meta.dirname, "../..");
  // Inside the project (drizzle-kit takes `--out` relative to it), in the ignored cache folder.
  mkdirSync(join(root, ".cache"), { recursive: true });
  const out = mkdtempSync(join(root, ".cache", "migrations-check-"));
  try {
    cpSync(join(root, "migrations"), out, { recursive: true });
    const before = readdirSync(out).sort();
    const output = execFileSync(
      join(root, "node_modules/.bin/drizzle-kit"),
      ["generate", "--dialect", "sqlite", "--schema", "./src/db/schema.ts", "--casing", "snake_case", "--out", `./${relative(root, out)}`],
      { cwd: root, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } },
    );
    expect(output).toContain("No schema changes");
    expect(readdirSync(out).sort()).toEqual(before);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}, 60_000);
