import { Webhook } from "standardwebhooks";
import { ApiError } from "../../errors/api-error";

// What the Resend integration's configuration says about itself: /health reports it, and a base URL
// no request could be made to stops a send before it is accepted rather than after.

export type ConfigFinding = { status: "ok" | "warning" | "failed"; message: string };

/** More requests a second than any Resend account is granted: a rate above it is a typo (1e9) or a guess. */
const PLAUSIBLE_RPS = 100;

/** Resend's default rate, and the contract's default for RESEND_MAX_RPS. */
const DEFAULT_RPS = 2;

/** The rate from RESEND_MAX_RPS (a positive number, else the default of 2), and whether it was given as one. */
export const resendRate = (env: Pick<Env, "RESEND_MAX_RPS">): { rps: number; given: "valid" | "invalid" | "unset" } => {
  if (env.RESEND_MAX_RPS === undefined || env.RESEND_MAX_RPS === "") return { rps: DEFAULT_RPS, given: "unset" };
  const rps = Number(env.RESEND_MAX_RPS);
  return Number.isFinite(rps) && rps > 0 ? { rps, given: "valid" } : { rps: DEFAULT_RPS, given: "invalid" };
};

/** RESEND_BASE_URL as requests are made to it, or what is wrong with it. */
const resendBaseUrl = (env: Pick<Env, "RESEND_BASE_URL">): { url: string } | { problem: string } => {
  const value = env.RESEND_BASE_URL || "https://api.resend.com";
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "https:" && url.protocol !== "http:") || url.search || url.hash) {
    return { problem: `RESEND_BASE_URL (${value}) is not an http(s) URL to Resend's API: leave it unset for https://api.resend.com` };
  }
  return { url: value.replace(/\/+$/, "") };
};

/** The base URL, or a 503 `configuration_error` saying what to fix (nothing is sent with a bad one). */
export const requireResendBaseUrl = (env: Pick<Env, "RESEND_BASE_URL">): string => {
  const found = resendBaseUrl(env);
  if ("problem" in found) throw new ApiError("configuration_error", `${found.problem}; no message can be sent through Resend until it is fixed`);
  return found.url;
};

/** Fewer key bytes than a signing secret Resend shows (24) has: a typo or a stand-in, and guessable. */
const FEEDBACK_KEY_MIN_BYTES = 16;
/** The bytes a whsec_ secret's key has: its base64 digits after the prefix, padding aside, 6 bits each. */
const keyBytes = (secret: string): number => Math.floor((secret.replace(/^whsec_/, "").replace(/=/g, "").length * 6) / 8);

/** The verifier for RESEND_WEBHOOK_SECRET, or undefined when it is not a signing secret the library takes. */
export const feedbackVerifier = (secret: string): Webhook | undefined => {
  try {
    return new Webhook(secret);
  } catch {
    return undefined;
  }
};

/** Each problem of a configured Resend integration: the base URL, the rate, the feedback secret. */
export const resendConfigFindings = (env: Pick<Env, "RESEND_BASE_URL" | "RESEND_MAX_RPS" | "RESEND_WEBHOOK_SECRET">): ConfigFinding[] => {
  const findings: ConfigFinding[] = [];
  const base = resendBaseUrl(env);
  if ("problem" in base) findings.push({ status: "failed", message: base.problem });
  const { rps, given } = resendRate(env);
  if (given === "invalid") {
    findings.push({ status: "warning", message: `RESEND_MAX_RPS (${env.RESEND_MAX_RPS}) is not a positive number of requests a second: sending at Resend's default, ${DEFAULT_RPS}` });
  } else if (rps > PLAUSIBLE_RPS) {
    findings.push({
      status: "warning",
      message: `RESEND_MAX_RPS (${env.RESEND_MAX_RPS}) is more requests a second than a Resend account is granted: set the account's own rate (2 by default), or sends meet 429s`,
    });
  }
  if (!env.RESEND_WEBHOOK_SECRET) {
    findings.push({
      status: "warning",
      message: "RESEND_WEBHOOK_SECRET is unset: bounces and complaints are never received, so bounced and complaining addresses keep being mailed; add the webhook in Resend (POST /webhooks/resend) and set its secret",
    });
  } else if (!feedbackVerifier(env.RESEND_WEBHOOK_SECRET)) {
    findings.push({ status: "failed", message: "RESEND_WEBHOOK_SECRET is not a valid whsec_ signing secret: every feedback call from Resend is refused; set it to the one Resend shows" });
  } else {
    const bytes = keyBytes(env.RESEND_WEBHOOK_SECRET);
    if (bytes < FEEDBACK_KEY_MIN_BYTES) {
      findings.push({
        status: "warning",
        message: `RESEND_WEBHOOK_SECRET's key is ${bytes} bytes: too short to be the one Resend shows (24 bytes), and guessable, so anyone could forge bounces and complaints; set it to the webhook's signing secret`,
      });
    }
  }
  return findings;
};
