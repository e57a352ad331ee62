import { resendIntegration } from "./resend";
import { sandboxIntegration } from "./sandbox";
import type { Integration } from "./types";

import type { IntegrationSlug } from "./slugs";

export { type IntegrationSlug, integrationSlugs, isIntegrationSlug } from "./slugs";

/** The integration behind a slug in this deployment, or undefined when it is not configured. */
export const resolveIntegration = (slug: IntegrationSlug, env: Env): Integration | undefined => {
  switch (slug) {
    case "sandbox":
      return sandboxIntegration;
    case "resend":
      return env.RESEND_API_KEY ? resendIntegration(env.RESEND_API_KEY, env) : undefined;
  }
};
