import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext } from "playwright-core";

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Screenshots and other artifacts (git-ignored). */
export const RESULTS_DIR = new URL("../../../test-results/", import.meta.url).pathname;

// The machine may have no internet: without these, Chromium keeps trying to reach Google's services.
const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * Headless Debian Chromium, driven by playwright-core (each launch gets a fresh, temporary user-data-dir).
 * A missing browser is a failure with instructions, never a skip: a browser test that silently does
 * not run proves nothing.
 */
export const launchChromium = async (): Promise<Browser> => {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM_PATH}; the browser tests need it. Install it with ` +
        "`apt-get update && apt-get install -y chromium` (Debian; .ci/run does this as root), or set CHROMIUM_PATH.",
    );
  }
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: FLAGS });
};

export type OfflineContext = {
  context: BrowserContext;
  /** Every request the pages tried to make to another origin (each was aborted). */
  blocked: string[];
};

/**
 * A browser context that can reach `origin` only: every other request is aborted, as if offline,
 * and recorded, so a test can prove a page needs nothing from a CDN.
 */
export const offlineContext = async (
  browser: Browser,
  origin: string,
  options: { javaScriptEnabled?: boolean; colorScheme?: "light" | "dark" } = {},
): Promise<OfflineContext> => {
  const context = await browser.newContext({
    javaScriptEnabled: options.javaScriptEnabled ?? true,
    viewport: { width: 1280, height: 900 },
    colorScheme: options.colorScheme ?? "light",
  });
  const blocked: string[] = [];
  await context.route("**/*", (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) return route.continue();
    blocked.push(url);
    return route.abort("internetdisconnected");
  });
  return { context, blocked };
};

export const screenshotPath = (name: string) => {
  mkdirSync(RESULTS_DIR, { recursive: true });
  return join(RESULTS_DIR, name);
};

/** WCAG's contrast ratio of two opaque `rgb(…)` colours. */
export const contrast = (a: string, b: string) => {
  const luminance = (colour: string) => {
    const [r, g, bl] = (colour.match(/\d+(\.\d+)?/g) ?? []).slice(0, 3).map((v) => {
      const c = Number(v) / 255;
      return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * (r ?? 0) + 0.7152 * (g ?? 0) + 0.0722 * (bl ?? 0);
  };
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return ((light ?? 0) + 0.05) / ((dark ?? 0) + 0.05);
};
