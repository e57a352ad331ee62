import { resendIntegration } from "./resend";
import { sandboxIntegration } from "./sandbox";
import type { Integration } from "./types";

export const integrationSlugs = ["sandbox", "resend"] as const;
export type IntegrationSlug = (typeof integrationSlugs)[number];

export const isIntegrationSlug = (slug: string): slug is IntegrationSlug =>
  (integrationSlugs as readonly string[]).includes(slug);

/** The integration behind a slug in this deployment, or undefined when it is not configured. */
export const resolveIntegration = (slug: IntegrationSlug, env: Env): Integration | undefined => {
  switch (slug) {
    case "sandbox":
      return sandboxIntegration;
    case "resend":
      return env.RESEND_API_KEY ? resendIntegration(env.RESEND_API_KEY, env) : undefined;
  }
};
