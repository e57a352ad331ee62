import { afterAll, describe, expect, inject, it } from "vitest";
import type { Browser } from "playwright-core";
import { contrast, launchChromium, offlineContext, screenshotPath } from "./harness/browser";

const origin = inject("workerOrigin");
// Launched by the first test that needs it, so a missing Chromium fails each test (a failing
// beforeAll would report them as skipped).
let launched: Promise<Browser> | undefined;
const browser = () => (launched ??= launchChromium());

afterAll(async () => {
  await (await launched?.catch(() => undefined))?.close();
});

describe("/docs in headless Chromium, with every other origin unreachable", () => {
  it("renders the reference from this origin alone, within its Content-Security-Policy", async () => {
    const { context, blocked } = await offlineContext(await browser(), origin);
    const page = await context.newPage();
    const problems: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error") problems.push(message.text());
    });
    page.on("pageerror", (error) => problems.push(error.message));
    const response = await page.goto(`${origin}/docs`);
    expect(response?.status()).toBe(200);
    // The title, tag descriptions and operation summaries come from /openapi.json: they show only
    // once the reference has loaded and rendered the document.
    await page.getByRole("heading", { name: "Newsletter Service API" }).waitFor({ timeout: 30_000 });
    await page.getByText("The workspaces a credential may access.").first().waitFor();
    await page.getByText("List workspaces").first().waitFor();
    await page.screenshot({ path: screenshotPath("docs.png") });
    expect(blocked, "requests to other origins").toEqual([]);
    // Nothing that would hand the document's URL to Scalar's cloud.
    expect(await page.locator('a[href*="client.scalar.com"]').count()).toBe(0);
    expect(await page.getByText("Open API Client").count()).toBe(0);
    expect(problems.filter((text) => /Content Security Policy|Refused to/i.test(text)), "CSP violations").toEqual([]);
    await context.close();
  });

  it("keeps the line that links to /openapi.json readable in light and dark mode (WCAG AA contrast)", async () => {
    for (const colorScheme of ["light", "dark"] as const) {
      const { context } = await offlineContext(await browser(), origin, { colorScheme });
      const page = await context.newPage();
      await page.goto(`${origin}/docs`);
      await page.getByRole("heading", { name: "Newsletter Service API" }).waitFor({ timeout: 30_000 });
      // The line's own background, behind its text and its link.
      const colours = await page.evaluate<{ text: string; background: string }[]>(
        `["#openapi-link", "#openapi-link a"].map((selector) => ({
          text: getComputedStyle(document.querySelector(selector)).color,
          background: getComputedStyle(document.querySelector("#openapi-link")).backgroundColor,
        }))`,
      );
      for (const { text, background } of colours) expect(contrast(text, background), `${colorScheme}: ${text} on ${background}`).toBeGreaterThanOrEqual(4.5);
      await context.close();
    }
  });

  it("shows a working link to /openapi.json with JavaScript disabled", async () => {
    const { context, blocked } = await offlineContext(await browser(), origin, { javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(`${origin}/docs`);
    const link = page.getByRole("link", { name: "/openapi.json" });
    expect(await link.isVisible()).toBe(true);
    await page.screenshot({ path: screenshotPath("docs-no-javascript.png") });
    const [response] = await Promise.all([page.waitForNavigation(), link.click()]);
    expect(response?.status()).toBe(200);
    expect(response?.headers()["content-type"]).toMatch(/^application\/json/);
    expect((await response?.json()).openapi).toBe("3.1.0");
    expect(blocked).toEqual([]);
    await context.close();
  });
});
