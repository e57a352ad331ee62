/** Text as it may appear in html content or a quoted attribute. */
export const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch] ?? ch);

/**
 * Explicit direction controls (embeddings, overrides, isolates: U+202A-U+202E, U+2066-U+2069): one
 * left unmatched in a sender's words (a newsletter's name) would reach past them, and past any
 * isolate put around them, into the service's own text. Marks (U+200E, U+200F), which open nothing, stay.
 */
const DIRECTION_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;
export const withoutDirectionControls = (text: string) => text.replace(DIRECTION_CONTROLS, "");

/** A sender's words in html, isolated (`<bdi>`): a right-to-left name changes only itself, never the sentence it stands in. */
export const isolatedHtml = (text: string) => `<bdi>${escapeHtml(withoutDirectionControls(text))}</bdi>`;
