import { expect } from "vitest";
import { ApiError } from "../src/errors/api-error";
import { type CampaignContent, compileCampaign, type Recipient, renderMessage, validateCampaignContent } from "../src/content";

// A campaign's content rendered and checked as the service does, for the content tests.

export const newsletter = { name: "Weekly Notes", address: "1 Main Street, Springfield" };
export const bob: Recipient = { email: "bob@example.com", name: "<b>Bob</b>", tags: ["vip", "beta"], location: "Paris", source: "import" };
export const URL = "https://news.example.com/u/TOKEN";

export const content = (over: Partial<CampaignContent>): CampaignContent => ({ subject: "Hello", preheader: null, html: null, text: null, ...over });
export const render = (over: Partial<CampaignContent>, recipient: Recipient = bob) =>
  renderMessage(compileCampaign(content(over), newsletter), recipient, URL);

/** The template's own part of the html rendered for bob with `over`: what comes before the footer. */
export const ownPart = (template: string, over: Partial<Recipient>) => {
  const html = render({ html: template }, { ...bob, ...over }).html ?? "";
  return html.slice(0, html.indexOf("<div"));
};

/** The 400 a template gets when saved. */
export const rejection = (over: Partial<CampaignContent>) => {
  try {
    validateCampaignContent(content(over));
  } catch (err) {
    expect(err).toBeInstanceOf(ApiError);
    const e = err as ApiError;
    expect(e.code).toBe("validation_failed");
    return { param: e.param, message: e.message };
  }
  throw new Error("expected the content to be rejected");
};
