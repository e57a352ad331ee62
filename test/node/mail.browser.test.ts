import { afterAll, describe, expect, inject, it } from "vitest";
import type { Browser } from "playwright-core";
import { contrast, launchChromium, offlineContext, screenshotPath } from "./harness/browser";
import { ADMIN_TOKEN } from "./harness/worker";

const origin = inject("workerOrigin");
let launched: Promise<Browser> | undefined;
const browser = () => (launched ??= launchChromium());

afterAll(async () => {
  await (await launched?.catch(() => undefined))?.close();
});

const api = async (token: string, method: string, path: string, body: unknown, expected: number) => {
  const res = await fetch(`${origin}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  expect(res.status, `${method} ${path}: ${text}`).toBe(expected);
  return JSON.parse(text).data;
};

/** A light template with a dark mode of its own, as most adaptive newsletters are written: the text colour on <body>, the dark rules on its own elements. */
const ADAPTIVE = `<!doctype html><html><head><meta charset="utf-8"><meta name="color-scheme" content="light dark">
<style>@media (prefers-color-scheme: dark) { body, .bg { background:#18181b !important; } .card { background:#27272a !important; } .txt { color:#f4f4f5 !important; } }</style></head>
<body style="margin:0;padding:0;background:#f4f4f5;color:#18181b">
<table class="bg" role="presentation" width="100%" style="background:#f4f4f5"><tr><td align="center">
<table role="presentation" width="600"><tr><td class="card txt" style="background:#ffffff;padding:24px">Hello {{ subscriber.name }}, this week's notes.</td></tr></table>
</td></tr></table></body></html>`;

describe("the message's footer in headless Chromium", () => {
  it("reads at WCAG AA contrast in light and dark mode, in a template with a dark mode of its own and in one without", async () => {
    const workspace = await api(ADMIN_TOKEN, "POST", "/admin/workspaces", { name: "Footer Co" }, 201);
    const { token } = await api(ADMIN_TOKEN, "POST", "/admin/credentials", { mode: "test", workspace_ids: [workspace.id] }, 201);
    const ws = `/v1/workspaces/${workspace.id}`;
    const newsletter = await api(token, "POST", `${ws}/newsletters`, { name: "The Field Notes", from_email: "notes@example.com", address: "12 Harbour Road, Bristol" }, 201);
    const plain = '<body style="color:#333;background:#fff"><p>Hello {{ subscriber.name }}</p></body>';
    for (const [name, html] of [["adaptive", ADAPTIVE], ["light", plain]] as const) {
      const campaign = await api(token, "POST", `${ws}/campaigns`, { newsletter_id: newsletter.id, subject: "Notes", html }, 201);
      const message = await api(token, "POST", `${ws}/campaigns/${campaign.id}/preview`, {}, 200);
      for (const colorScheme of ["light", "dark"] as const) {
        // The template in its own scheme only: one without a dark mode is shown light, as clients do.
        if (name === "light" && colorScheme === "dark") continue;
        const { context, blocked } = await offlineContext(await browser(), origin, { colorScheme, javaScriptEnabled: false });
        const page = await context.newPage();
        await page.setViewportSize({ width: 375, height: 800 });
        await page.setContent(message.html);
        // The colour of each footer line and link, on the first opaque background behind it.
        const colours = await page.evaluate<{ what: string; text: string; background: string }[]>(
          `(() => {
            const behind = (el) => {
              for (let at = el; at; at = at.parentElement) {
                const bg = getComputedStyle(at).backgroundColor;
                if (bg !== "rgba(0, 0, 0, 0)" && bg !== "transparent") return bg;
              }
              return "rgb(255, 255, 255)";
            };
            const sentence = [...document.querySelectorAll("p")].find((p) => p.textContent.includes("You’re receiving this email"));
            const link = [...document.querySelectorAll("a")].find((a) => a.textContent === "Unsubscribe");
            const address = [...document.querySelectorAll("p")].find((p) => p.textContent.includes("12 Harbour Road"));
            return [["sentence", sentence], ["link", link], ["address", address]].map(([what, el]) => ({
              what, text: getComputedStyle(el).color, background: behind(el),
            }));
          })()`,
        );
        for (const { what, text, background } of colours) {
          expect(contrast(text, background), `${name} template, ${colorScheme}: the footer's ${what}, ${text} on ${background}`).toBeGreaterThanOrEqual(4.5);
        }
        await page.screenshot({ path: screenshotPath(`mail-footer-${name}-${colorScheme}.png`), fullPage: true });
        expect(blocked).toEqual([]);
        await context.close();
      }
    }
  });
});
