import { escapeHtml, isolatedHtml, withoutDirectionControls } from "../lib/html";

// The hosted consent pages: self-contained HTML (inline CSS, no scripts, no images, no external
// requests), so they render the same offline and under the strict CSP they are sent with, readable
// from a 375 px phone to a desktop, in light and dark mode.

/** `ada@example.com` → `a***@example.com`: enough for its owner to recognise, little for anyone else. */
const maskEmail = (email: string) => {
  const at = email.lastIndexOf("@");
  if (at <= 0) return "***";
  return `${email[0]}***${email.slice(at)}`;
};

/**
 * The sender's own words (the newsletter's name, the address) isolated from the page's text around
 * them, without their own direction controls (src/lib/html.ts): `<bdi>` in the body; the title,
 * which is plain text, gets the Unicode isolates FSI … PDI.
 */
const isolated = (name: string) => `\u2068${withoutDirectionControls(name)}\u2069`;

/**
 * The masked address as the pages show it, one run of text exactly as the contract writes it
 * (`a***@example.com`: no markup inside, so the page's source holds it too), wrapping only where it is
 * wider than the line (main's overflow-wrap); isolated as the name is.
 */
const maskedAddress = (email: string) => `<bdi class="address">${escapeHtml(maskEmail(email))}</bdi>`;

const STYLE = `
:root{color-scheme:light dark;--bg:#f4f5f7;--card:#fff;--text:#1c1e21;--muted:#5f6672;--line:#e3e6ea;--accent:#1f5eff;--accent-text:#fff;--ok:#137a3e}
@media (prefers-color-scheme:dark){:root{--bg:#15171a;--card:#1f2226;--text:#eceef1;--muted:#a3a9b3;--line:#33373d;--accent:#5b8cff;--accent-text:#0b0d10;--ok:#4cc27f}}
*{box-sizing:border-box}
html,body{margin:0;padding:0}
body{min-height:100vh;display:flex;align-items:center;justify-content:center;background:var(--bg);color:var(--text);
font:16px/1.55 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;padding:24px 16px}
main{width:100%;min-width:0;max-width:440px;overflow-wrap:anywhere;background:var(--card);border:1px solid var(--line);border-radius:14px;padding:32px 28px;
box-shadow:0 1px 2px rgba(0,0,0,.04),0 8px 24px rgba(0,0,0,.06)}
.badge{display:inline-flex;align-items:center;justify-content:center;width:44px;height:44px;border-radius:50%;
background:var(--bg);border:1px solid var(--line);font-size:22px;margin-bottom:16px}
.eyebrow{margin:0 0 4px;color:var(--muted);font-size:14px;letter-spacing:.02em}
h1{margin:0 0 12px;font-size:22px;line-height:1.3;font-weight:650}
p{margin:0 0 16px}
.address{font-weight:600}
form{margin:24px 0 0}
button{width:100%;min-height:48px;border:0;border-radius:10px;background:var(--accent);color:var(--accent-text);
font:inherit;font-weight:600;cursor:pointer;padding:12px 16px}
button:focus-visible{outline:3px solid var(--accent);outline-offset:3px}
button.secondary{background:transparent;color:var(--accent);border:1px solid var(--line)}
.done{color:var(--ok)}
.note{margin-top:20px;padding-top:16px;border-top:1px solid var(--line);color:var(--muted);font-size:14px}
`;

type Page = { status: number; html: string };

const layout = (status: number, title: string, body: string): Page => ({
  status,
  html: `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="robots" content="noindex,nofollow">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`,
});

type Subject = { newsletterName: string; email: string; token: string };

/** A form that posts its one field (the pages' own confirmation that a person pressed the button). */
const buttonForm = (action: string, label: string, [name, value]: readonly [string, string], secondary = false) =>
  `<form method="post" action="${escapeHtml(action)}">
<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">
<button type="submit"${secondary ? ' class="secondary"' : ""}>${escapeHtml(label)}</button>
</form>`;

/** What an unsubscribe page's buttons post: RFC 8058's one-click body. */
export const ONE_CLICK = ["List-Unsubscribe", "One-Click"] as const;
/** What a confirmation page's button posts. */
export const CONFIRM = ["Confirm", "Yes"] as const;

const oneClickForm = (action: string, label: string, secondary = false) => buttonForm(action, label, ONE_CLICK, secondary);

const heading = (newsletterName: string, title: string, icon: string) =>
  `<div class="badge" aria-hidden="true">${icon}</div>
<p class="eyebrow">${isolatedHtml(newsletterName)}</p>
<h1>${escapeHtml(title)}</h1>`;

/**
 * GET: asks; changes nothing (mail scanners follow links). `canComeBack`: the link is in a message
 * the campaign sent, so leaving through it can be undone from it.
 */
export const confirmPage = ({ newsletterName, email, token }: Subject, canComeBack: boolean): Page =>
  layout(
    200,
    `Unsubscribe from ${isolated(newsletterName)}`,
    `${heading(newsletterName, "Unsubscribe from this newsletter?", "✉️")}
<p>You will stop receiving <strong>${isolatedHtml(newsletterName)}</strong>, and every other newsletter from the same sender, at ${maskedAddress(email)}.</p>
${oneClickForm(`/u/${token}`, "Unsubscribe")}
${canComeBack ? '<p class="note">Changed your mind later? You can subscribe again from this page.</p>' : ""}`,
  );

/** A link rendered for the sample subscriber (a preview or a test send): it names nobody, and changes nothing. */
export const sampleLinkPage = (newsletterName: string): Page =>
  layout(
    200,
    `Unsubscribe from ${isolated(newsletterName)}`,
    `${heading(newsletterName, "This is a test link", "ⓘ")}
<p>It comes from a preview or a test send, made for a sample subscriber. In the real message, this page lets the recipient unsubscribe in one click.</p>
<p class="note">Nothing was changed.</p>`,
  );

/** After the unsubscribe (or on a later visit): confirms, and offers to come back when that is allowed. */
export const unsubscribedPage = ({ newsletterName, email, token }: Subject, canResubscribe: boolean): Page =>
  layout(
    200,
    `Unsubscribed from ${isolated(newsletterName)}`,
    `${heading(newsletterName, "You’re unsubscribed", "✓")}
<p class="done">${maskedAddress(email)} will no longer receive ${isolatedHtml(newsletterName)}, nor any other newsletter from the same sender.</p>
${
  canResubscribe
    ? `<p>Unsubscribed by mistake?</p>${oneClickForm(`/u/${token}/resubscribe`, "Subscribe again", true)}`
    : ""
}
<p class="note">It can take a moment for messages already on their way to stop.</p>`,
  );

/** After a resubscribe: `again` when this request brought the address back, else it was subscribed already (nothing changed). */
export const resubscribedPage = ({ newsletterName, email }: Subject, again: boolean): Page =>
  layout(
    200,
    `Subscribed to ${isolated(newsletterName)}`,
    again
      ? `${heading(newsletterName, "You’re subscribed again", "✓")}
<p class="done">${maskedAddress(email)} will receive ${isolatedHtml(newsletterName)} again, and the sender’s other newsletters.</p>
<p class="note">Every message keeps an unsubscribe link at the bottom.</p>`
      : `${heading(newsletterName, "You’re subscribed", "✓")}
<p class="done">${maskedAddress(email)} is subscribed to ${isolatedHtml(newsletterName)}; nothing needed to change.</p>
<p class="note">Every message keeps an unsubscribe link at the bottom.</p>`,
  );

export const cannotResubscribePage = ({ newsletterName }: Subject): Page =>
  layout(
    409,
    `Subscribe to ${isolated(newsletterName)}`,
    `${heading(newsletterName, "This link can’t subscribe you again", "ⓘ")}
<p>Only an address that left through this link can come back through it. To subscribe again, sign up where you first did.</p>`,
  );

/** GET of a confirmation link: asks; changes nothing (mail scanners follow links). */
export const confirmSubscriptionPage = ({ newsletterName, email, token }: Subject): Page =>
  layout(
    200,
    `Confirm your subscription to ${isolated(newsletterName)}`,
    `${heading(newsletterName, "Confirm your subscription", "✉️")}
<p>Press the button to receive <strong>${isolatedHtml(newsletterName)}</strong> at ${maskedAddress(email)}.</p>
${buttonForm(`/c/${token}`, "Confirm subscription", CONFIRM)}
<p class="note">Didn’t ask for this? Ignore it: nothing is sent until you confirm.</p>`,
  );

/** After a confirmation: `now` when this request confirmed the address, else it was subscribed already (nothing changed). */
export const subscriptionConfirmedPage = ({ newsletterName, email }: Subject, now: boolean): Page =>
  layout(
    200,
    `Subscribed to ${isolated(newsletterName)}`,
    `${heading(newsletterName, now ? "Your subscription is confirmed" : "You’re subscribed", "✓")}
<p class="done">${maskedAddress(email)} ${now ? "will receive" : "already receives"} ${isolatedHtml(newsletterName)}.</p>
<p class="note">Every message has an unsubscribe link at the bottom.</p>`,
  );

/** A confirmation link of an address that has since unsubscribed or bounced: it brings nobody back. */
export const cannotConfirmPage = ({ newsletterName }: Subject): Page =>
  layout(
    409,
    `Confirm your subscription to ${isolated(newsletterName)}`,
    `${heading(newsletterName, "This link can’t confirm a subscription any more", "ⓘ")}
<p>The address left this sender’s list after the link was sent. To subscribe again, sign up where you first did.</p>`,
  );

/** Every problem page: a title and one sentence, no detail about what exists. */
export const problemPage = (status: number, title: string, message: string): Page =>
  layout(status, title, `${heading("Newsletter", title, "ⓘ")}\n<p>${escapeHtml(message)}</p>`);

export const invalidLinkPage = () =>
  problemPage(404, "This link is not valid", "It may be incomplete or changed. Try the link from the message again, in full.");
