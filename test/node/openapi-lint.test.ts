import { createConfig, lintFromString, stringifyYaml } from "@redocly/openapi-core";
import { expect, inject, it } from "vitest";

it("the generated OpenAPI document passes Redocly's recommended ruleset (and tag, contact and license rules) with no errors", async () => {
  const res = await fetch(`${inject("workerOrigin")}/openapi.json`);
  expect(res.status).toBe(200);
  const document = await res.json();
  // Beyond "recommended", as errors: what Spectral's OpenAPI ruleset also asks for.
  const config = await createConfig({
    extends: ["recommended"],
    rules: {
      "operation-tag-defined": "error",
      "tag-description": "error",
      "info-contact": "error",
      "info-license-strict": "error",
    },
  });
  const problems = await lintFromString({ source: stringifyYaml(document), absoluteRef: "openapi.yaml", config });
  const describe = (p: (typeof problems)[number]) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`;
  const errors = problems.filter((p) => p.severity === "error");
  const warnings = problems.filter((p) => p.severity === "warn");
  console.log(`Redocly recommended: ${errors.length} errors, ${warnings.length} warnings${warnings.map((w) => `\n  ${describe(w)}`).join("")}`);
  expect(errors.map(describe)).toEqual([]);
});
