import { ApiError } from "../errors/api-error";
import { type CampaignContent, compileCampaign, renderMessage, SAMPLE_RECIPIENT } from "./render";
import { TemplateError } from "./validate";

export { compileCampaign, renderMessage, SAMPLE_RECIPIENT, MAX_RENDERED } from "./render";
export type { CampaignContent, CompiledCampaign, NewsletterContent, Recipient, RenderedMessage } from "./render";
export { TemplateError } from "./validate";

/** Stored template sizes, in UTF-8 bytes (MAIL.md). */
export const CONTENT_LIMITS = { html: 512 * 1024, text: 256 * 1024 } as const;

const SAMPLE_NEWSLETTER = { name: "Sample Newsletter", address: "1 Sample Street, Sample City" };
const SAMPLE_UNSUBSCRIBE_URL = "https://example.com/u/sample";

/**
 * Checks a campaign's templates as they would be saved: every one parses, names only known variables,
 * and renders for the sample subscriber within the ceilings. Bad input is a 400 validation_failed
 * naming the field, so no template can first fail at send time.
 */
export const validateCampaignContent = (content: CampaignContent): void => {
  try {
    renderMessage(compileCampaign(content, SAMPLE_NEWSLETTER), SAMPLE_RECIPIENT, SAMPLE_UNSUBSCRIBE_URL);
  } catch (err) {
    if (err instanceof TemplateError) {
      throw new ApiError("validation_failed", `${err.field}: ${err.message}`, {
        param: err.field,
        details: [{ param: err.field, message: err.message }],
      });
    }
    throw err;
  }
};
