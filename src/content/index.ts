import { ApiError } from "../errors/api-error";
import { type CampaignContent, compileCampaign, renderMessage, SAMPLE_RECIPIENT } from "./render";
import { checkTemplate, type TemplateField, TemplateError } from "./validate";

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
 * naming the field and listing every problem found, so no template can first fail at send time.
 */
export const validateCampaignContent = (content: CampaignContent): void => {
  try {
    renderMessage(compileCampaign(content, SAMPLE_NEWSLETTER), SAMPLE_RECIPIENT, SAMPLE_UNSUBSCRIBE_URL);
  } catch (err) {
    if (!(err instanceof TemplateError)) throw err;
    // Compiling stops at the first problem: only then is every template checked on its own, for all of them.
    const fields: TemplateField[] = ["subject", "preheader", "html", "text"];
    const problems = fields.flatMap((field) => {
      const source = content[field];
      const checked = source === null ? undefined : checkTemplate(field, source);
      return checked && "problems" in checked ? checked.problems : [];
    });
    throw templatesInvalid(problems[0] ?? err, problems.length > 0 ? problems : [err]);
  }
};

/**
 * A template that cannot be rendered, as the API answers it: 400 validation_failed naming the field.
 * Saving checks the sample subscriber and newsletter; a preview or test send for a real one (a
 * longer name, more tags) can still pass a ceiling, and is answered the same way.
 */
export const templateInvalid = (err: TemplateError): ApiError => templatesInvalid(err, [err]);

const templatesInvalid = (first: TemplateError, all: TemplateError[]): ApiError =>
  new ApiError("validation_failed", `${first.field}: ${first.message}`, {
    param: first.field,
    details: all.map((err) => ({ param: err.field, message: err.message })),
  });
