import { afterAll, describe, expect, inject, it } from "vitest";
import type { Browser, Page } from "playwright-core";
import { launchChromium, offlineContext, screenshotPath } from "./harness/browser";
import { ADMIN_TOKEN } from "./harness/worker";

const origin = inject("workerOrigin");
const resendOrigin = inject("resendOrigin");
let launched: Promise<Browser> | undefined;
const browser = () => (launched ??= launchChromium());

afterAll(async () => {
  await (await launched?.catch(() => undefined))?.close();
});

/**
 * On a 375 px phone and a 1280 px desktop, the page's one button is on screen, a comfortable tap
 * target, and nothing scrolls sideways; a screenshot of each (`{shot}-{width}.png`).
 */
const expectButtonFits = async (page: Page, name: string, shot: string) => {
  for (const width of [375, 1280]) {
    await page.setViewportSize({ width, height: width === 375 ? 740 : 900 });
    const box = await page.getByRole("button", { name }).boundingBox();
    expect(box && box.x >= 0 && box.x + box.width <= width && box.height >= 44, `button at ${width}px: ${JSON.stringify(box)}`).toBe(true);
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(width);
    await page.screenshot({ path: screenshotPath(`${shot}-${width}.png`), fullPage: true });
  }
};

/** One call to the local worker's API; every answer here must be the expected status. */
const api = async (token: string, method: string, path: string, body: unknown, expected: number) => {
  const res = await fetch(`${origin}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  expect(res.status, `${method} ${path}: ${text}`).toBe(expected);
  return JSON.parse(text).data;
};

/**
 * A real send through the local Resend stand-in (a live credential: the `resend` integration), then the
 * recipient's message as the stand-in received it: its List-Unsubscribe header and its footer link.
 */
const sentMessage = async () => {
  const workspace = await api(ADMIN_TOKEN, "POST", "/admin/workspaces", { name: "Browser Co" }, 201);
  const { token } = await api(ADMIN_TOKEN, "POST", "/admin/credentials", { mode: "live", workspace_ids: [workspace.id] }, 201);
  const ws = `/v1/workspaces/${workspace.id}`;
  const newsletter = await api(token, "POST", `${ws}/newsletters`, {
    name: "The Field Notes",
    from_email: "notes@example.com",
    address: "12 Harbour Road, Bristol BS1 4RN",
  }, 201);
  const subscriber = await api(token, "POST", `${ws}/subscribers`, { email: "margaret.hamilton@example.com", name: "Margaret" }, 201);
  const campaign = await api(token, "POST", `${ws}/campaigns`, {
    newsletter_id: newsletter.id,
    subject: "Notes for {{ subscriber.name }}",
    html: "<h1>Hello {{ subscriber.name }}</h1><p>This week's notes.</p>",
  }, 201);
  await api(token, "POST", `${ws}/campaigns/${campaign.id}/send`, { integration_slug: "resend" }, 202);
  const deadline = Date.now() + 20_000;
  let status = "";
  while (Date.now() < deadline && status !== "sent") {
    status = (await api(token, "GET", `${ws}/campaigns/${campaign.id}`, undefined, 200)).status;
    if (status !== "sent") await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(status, "the campaign's send finished").toBe("sent");
  const received = (await (await fetch(`${resendOrigin}/messages`)).json()) as { data: { to: string[]; subject: string; html: string; headers: Record<string, string> }[] };
  const messages = received.data.filter((m) => m.subject === "Notes for Margaret");
  expect(messages.map((m) => m.to)).toEqual([["margaret.hamilton@example.com"]]);
  const [message] = messages;
  expect(message!.headers["List-Unsubscribe-Post"]).toBe("List-Unsubscribe=One-Click");
  const link = new URL(message!.headers["List-Unsubscribe"]!.slice(1, -1));
  // The footer links to the same page as the header.
  expect(message!.html).toContain(link.pathname);
  return { token, ws, subscriberId: subscriber.id as string, path: link.pathname };
};

describe("the unsubscribe page in headless Chromium, from a real send, with every other origin unreachable", () => {
  it("shows the newsletter and masked address on a phone and a desktop, unsubscribes with one press, and the API sees it", async () => {
    const sent = await sentMessage();
    const { context, blocked } = await offlineContext(await browser(), origin, { javaScriptEnabled: false });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error") problems.push(message.text());
    });

    const opened = await page.goto(`${origin}${sent.path}`);
    expect(opened?.status()).toBe(200);
    expect(opened?.headers()["content-security-policy"]).toContain("default-src 'none'");
    await page.getByRole("heading", { name: "Unsubscribe from this newsletter?" }).waitFor();
    const body = await page.locator("body").innerText();
    expect(body).toContain("The Field Notes");
    expect(body).not.toContain("margaret.hamilton@example.com");
    expect(body).toMatch(/m\S*@example\.com/);
    // Opening the page changed nothing.
    expect((await api(sent.token, "GET", `${sent.ws}/subscribers/${sent.subscriberId}`, undefined, 200)).status).toBe("active");

    await expectButtonFits(page, "Unsubscribe", "unsubscribe");

    await page.getByRole("button", { name: "Unsubscribe" }).click();
    await page.getByRole("heading", { name: "You’re unsubscribed" }).waitFor();
    await page.screenshot({ path: screenshotPath("unsubscribed-1280.png"), fullPage: true });

    const subscriber = await api(sent.token, "GET", `${sent.ws}/subscribers/${sent.subscriberId}`, undefined, 200);
    expect(subscriber.status).toBe("unsubscribed");
    expect(blocked, "requests to other origins").toEqual([]);
    expect(problems, "console errors").toEqual([]);
    await context.close();
  });
});

describe("the confirmation page in headless Chromium, with every other origin unreachable", () => {
  it("asks on a phone and a desktop, confirms with one press, and the API sees the subscriber active", async () => {
    const workspace = await api(ADMIN_TOKEN, "POST", "/admin/workspaces", { name: "Opt-in Co" }, 201);
    const { token } = await api(ADMIN_TOKEN, "POST", "/admin/credentials", { mode: "test", workspace_ids: [workspace.id] }, 201);
    const ws = `/v1/workspaces/${workspace.id}`;
    const newsletter = await api(token, "POST", `${ws}/newsletters`, { name: "The Field Notes", from_email: "notes@example.com" }, 201);
    const subscriber = await api(token, "POST", `${ws}/subscribers`, { email: "katherine.johnson@example.com", status: "pending" }, 201);
    // Mailed through the sandbox (a test credential): the link is the one the message carries.
    const asked = await api(token, "POST", `${ws}/subscribers/${subscriber.id}/confirmation`, { newsletter_id: newsletter.id }, 200);
    expect(asked.result.status).toBe("sent");

    const { context, blocked } = await offlineContext(await browser(), origin, { javaScriptEnabled: false });
    const page = await context.newPage();
    // (PUBLIC_BASE_URL is the default origin here; the worker runs on a port of its own.)
    const opened = await page.goto(`${origin}${new URL(asked.confirmation_url).pathname}`);
    expect(opened?.status()).toBe(200);
    await page.getByRole("heading", { name: "Confirm your subscription" }).waitFor();
    const body = await page.locator("body").innerText();
    expect(body).toContain("The Field Notes");
    expect(body).not.toContain("katherine.johnson@example.com");
    expect((await api(token, "GET", `${ws}/subscribers/${subscriber.id}`, undefined, 200)).status).toBe("pending");

    await expectButtonFits(page, "Confirm subscription", "confirm");

    await page.getByRole("button", { name: "Confirm subscription" }).click();
    await page.getByRole("heading", { name: "Your subscription is confirmed" }).waitFor();
    await page.screenshot({ path: screenshotPath("confirmed-1280.png"), fullPage: true });
    expect((await api(token, "GET", `${ws}/subscribers/${subscriber.id}`, undefined, 200)).status).toBe("active");
    expect(blocked, "requests to other origins").toEqual([]);
    await context.close();
  });
});
