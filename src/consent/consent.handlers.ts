import { logError } from "../lib/log";
import { Hono, type Context } from "hono";
import { createMiddleware } from "hono/factory";
import { ApiError } from "../errors/api-error";
import { requestOutbox } from "../events/outbox";
import type { AppEnv } from "../lib/types";
import { publicLimitWait } from "../middleware/client-ip";
import { readCapped } from "../middleware/request-context";
import { SAMPLE_SUBSCRIBER_ID } from "../sending/compose";
import { type ConsentState, findConsentState, newsletterNameOf, resubscribeThroughLink, unsubscribeThroughLink } from "./consent.repository";
import { type ConfirmState, confirmThroughLink, findConfirmState } from "./confirmation.repository";
import { readConfirmToken, type ConfirmTarget } from "./confirm-token";
import {
  CONFIRM,
  cannotConfirmPage,
  cannotResubscribePage,
  confirmPage,
  confirmSubscriptionPage,
  invalidLinkPage,
  ONE_CLICK,
  problemPage,
  resubscribedPage,
  sampleLinkPage,
  subscriptionConfirmedPage,
  unsubscribedPage,
} from "./pages";
import { readUnsubscribeToken, type UnsubscribeTarget } from "./unsubscribe-token";

// The public side of consent: the unsubscribe link in every message (RFC 8058 one-click, and the
// hosted page for people), and the confirmation (double opt-in) link. No credential; the signed token
// is the authority. A GET never changes anything; a POST changes the subscriber (and the delivery) in
// one atomic batch and is idempotent.


/** Bodies a one-click POST or the page's form may carry; anything larger is refused unread. */
const MAX_FORM_BYTES = 8 * 1024;

const PAGE_HEADERS = {
  "Content-Type": "text/html; charset=utf-8",
  "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
  "Cache-Control": "no-store",
  "Referrer-Policy": "no-referrer",
  "X-Robots-Tag": "noindex",
  "X-Content-Type-Options": "nosniff",
};

const respond = (page: { status: number; html: string }, headers: Record<string, string> = {}) =>
  new Response(page.html, { status: page.status, headers: { ...PAGE_HEADERS, ...headers } });

const notAllowed = (allow: string) =>
  respond(problemPage(405, "This page can’t do that", "This address only answers its own links and buttons."), { Allow: allow });

/** Per client IP, so one client cannot exhaust D1 or probe links; mailbox providers stay well under it. */
const perIpLimit = createMiddleware<AppEnv>(async (c, next) => {
  const wait = await publicLimitWait(c, "u");
  if (wait !== undefined) {
    return respond(problemPage(429, "Too many requests", `Please try again in ${wait} seconds.`), { "Retry-After": String(wait) });
  }
  await next();
});

/** The token's target, or null for a malformed, altered or foreign token. */
const targetOf = (c: Context<AppEnv>): Promise<UnsubscribeTarget | null> =>
  readUnsubscribeToken(c.var.signer, c.req.param("token") ?? "");

/** A sample subscriber's link (preview, test send): a page saying so, for a campaign that exists. */
const samplePage = async (c: Context<AppEnv>, target: UnsubscribeTarget) => {
  const name = await newsletterNameOf(c.var.db.$client, target.campaignId);
  return name === undefined ? invalidLinkPage() : sampleLinkPage(name);
};

/**
 * The link's subscriber and campaign, or the answer that ends the request here: the invalid-link
 * page, the refusal of a POST's form, or the test-link page of a sample subscriber's link.
 */
const linkTarget = async (c: Context<AppEnv>, { form }: { form: boolean }): Promise<UnsubscribeTarget | Response> => {
  const target = await targetOf(c);
  if (!target) return respond(invalidLinkPage());
  if (form) {
    const checked = await checkForm(c, ONE_CLICK);
    if (!checked.ok) return checked.page;
  }
  if (target.subscriberId === SAMPLE_SUBSCRIBER_ID) return respond(await samplePage(c, target));
  return target;
};

/** What a page says of the link's subscriber. */
const subjectOf = (c: Context<AppEnv>, state: Pick<ConsentState, "newsletterName" | "email">) => ({ newsletterName: state.newsletterName, email: state.email, token: c.req.param("token") ?? "" });

type FormCheck = { ok: true } | { ok: false; page: Response };

/** What a refused form's page tells the reader: these pages have no button, the link's page has. */
const AGAIN = "Nothing was changed. Open the link in the email again and press the button on its page.";

/**
 * A one-click POST (RFC 8058) carries `List-Unsubscribe=One-Click`, form-encoded or as multipart; the
 * page's own form carries the same (a confirmation page's, `Confirm=Yes`). An empty body is accepted
 * too (some clients send none). Anything else changes nothing.
 */
const checkForm = async (c: Context<AppEnv>, [name, value]: readonly [string, string]): Promise<FormCheck> => {
  let bytes: Uint8Array;
  try {
    bytes = await readCapped(c, MAX_FORM_BYTES);
  } catch (err) {
    if (err instanceof ApiError && err.code === "payload_too_large") {
      return { ok: false, page: respond(problemPage(413, "Request too large", "This form takes a few bytes at most.")) };
    }
    return { ok: false, page: respond(problemPage(400, "Request incomplete", "The request ended early. Please try again.")) };
  }
  if (bytes.byteLength === 0) return { ok: true };
  // The media type is compared without case; the header goes to the parser as sent (a multipart
  // boundary is case-sensitive).
  const header = c.req.header("content-type") ?? "";
  const type = header.toLowerCase();
  let form: URLSearchParams | FormData;
  try {
    if (type.startsWith("application/x-www-form-urlencoded")) form = new URLSearchParams(new TextDecoder().decode(bytes));
    else if (type.startsWith("multipart/form-data")) form = await new Response(bytes, { headers: { "content-type": header } }).formData();
    else return { ok: false, page: respond(problemPage(415, "Unsupported request", AGAIN)) };
  } catch {
    return { ok: false, page: respond(problemPage(400, "Unreadable request", AGAIN)) };
  }
  // RFC 8058's body is exactly `List-Unsubscribe=One-Click`; a client that ends it with a line break means the same.
  const field = form.get(name);
  if (typeof field !== "string" || field.trimEnd() !== value) {
    return { ok: false, page: respond(problemPage(400, "Incomplete request", `The form did not say what to do (${name}=${value}). ${AGAIN}`)) };
  }
  return { ok: true };
};

/** The confirmation link's target, or the answer that ends the request here (invalid link, refused form). */
const confirmTarget = async (c: Context<AppEnv>, { form }: { form: boolean }): Promise<ConfirmTarget | Response> => {
  const target = await readConfirmToken(c.var.signer, c.req.param("token") ?? "");
  if (!target) return respond(invalidLinkPage());
  if (form) {
    const checked = await checkForm(c, CONFIRM);
    if (!checked.ok) return checked.page;
  }
  return target;
};

/** A confirmation link's page for a subscriber that is not (or no longer) pending. */
const afterConfirmation = (subject: ReturnType<typeof subjectOf>, status: ConfirmState["status"], changed: boolean) =>
  respond(status === "active" ? subscriptionConfirmedPage(subject, changed) : cannotConfirmPage(subject));

export const consentRouter = new Hono<AppEnv>()
  .use("/u/*", perIpLimit)
  .use("/c/*", perIpLimit)
  .get("/c/:token", async (c) => {
    if (c.req.method === "HEAD") return notAllowed("GET, POST");
    const target = await confirmTarget(c, { form: false });
    if (target instanceof Response) return target;
    const state = await findConfirmState(c.var.db.$client, c.var.signer, target);
    if (!state) return respond(invalidLinkPage());
    const subject = subjectOf(c, state);
    return state.status === "pending" ? respond(confirmSubscriptionPage(subject)) : afterConfirmation(subject, state.status, false);
  })
  .post("/c/:token", async (c) => {
    const target = await confirmTarget(c, { form: true });
    if (target instanceof Response) return target;
    // The address the link was mailed to, as the subscriber has it now: the write confirms only that one.
    const before = await findConfirmState(c.var.db.$client, c.var.signer, target);
    if (!before) return respond(invalidLinkPage());
    if (before.status !== "pending") return afterConfirmation(subjectOf(c, before), before.status, false);
    const { changed, state } = await confirmThroughLink(requestOutbox(c), c.var.signer, target, before.email, Date.now());
    if (!state) return respond(invalidLinkPage());
    return afterConfirmation(subjectOf(c, state), state.status, changed);
  })
  .all("/c/:token", () => notAllowed("GET, POST"))
  .all("/c/*", () => respond(invalidLinkPage()))
  .get("/u/:token", async (c) => {
    // Hono answers HEAD through the GET route; this page answers GET only.
    if (c.req.method === "HEAD") return notAllowed("GET, POST");
    const target = await linkTarget(c, { form: false });
    if (target instanceof Response) return target;
    const state = await findConsentState(c.var.db.$client, target);
    if (!state) return respond(invalidLinkPage());
    const subject = subjectOf(c, state);
    return respond(
      state.status === "active" || state.status === "pending" ? confirmPage(subject, state.fromDelivery) : unsubscribedPage(subject, state.canResubscribe),
    );
  })
  .post("/u/:token", async (c) => {
    const target = await linkTarget(c, { form: true });
    if (target instanceof Response) return target;
    const state = await unsubscribeThroughLink(requestOutbox(c), target, Date.now());
    if (!state) return respond(invalidLinkPage());
    return respond(unsubscribedPage(subjectOf(c, state), state.canResubscribe));
  })
  .post("/u/:token/resubscribe", async (c) => {
    const target = await linkTarget(c, { form: true });
    if (target instanceof Response) return target;
    const { changed, state } = await resubscribeThroughLink(requestOutbox(c), target, Date.now());
    if (!state) return respond(invalidLinkPage());
    // An active subscriber (a repeated resubscribe, or one who never left) is told so; nothing changes.
    if (changed || state.status === "active") return respond(resubscribedPage(subjectOf(c, state), changed));
    return respond(cannotResubscribePage(subjectOf(c, state)));
  })
  .all("/u/:token", () => notAllowed("GET, POST"))
  .all("/u/:token/resubscribe", () => notAllowed("POST"))
  .all("/u/*", () => respond(invalidLinkPage()))
  .onError((err, c) => {
    logError("consent_failed", { request_id: c.get("requestId") }, err);
    return respond(problemPage(err instanceof ApiError && err.status === 503 ? 503 : 500, "Something went wrong", "Please try again in a moment."));
  });
