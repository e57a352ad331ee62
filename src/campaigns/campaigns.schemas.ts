import { invalidParam } from "../errors/api-error";
import { z } from "@hono/zod-openapi";
import { campaignStatuses, type campaigns } from "../db/schema";
import {
  afterQuery,
  bodyString,
  emailAddress,
  idParam,
  isoDateTime,
  limitQuery,
  noAddressTwice,
  oneOffResultSchema,
  optionalText,
  queryEnum,
  rawText,
  requiredText,
  WorkspaceParams,
  somethingToChange,
} from "../lib/schemas";
import { anyTextPattern } from "../lib/text-patterns";
import { iso } from "../lib/time";
import { integrationSlugs } from "../sending/integrations";
import { CONTENT_LIMITS } from "../content";

const encoder = new TextEncoder();

/** A Liquid template field: at most `maxBytes` of UTF-8, not trimmed (whitespace is content); `null` or empty: none. */
const templateField = (maxBytes: number, description: string, example: string) => {
  const tooLarge = `must be at most ${maxBytes} bytes (${maxBytes / 1024} KiB) of UTF-8`;
  // More characters than that many bytes is too large whatever they are (and no need to encode them).
  return bodyString()
    .max(maxBytes, { abort: true, error: tooLarge })
    .refine((value) => value.length * 3 <= maxBytes || encoder.encode(value).byteLength <= maxBytes, { error: tooLarge })
    .transform((value) => (value === "" ? null : value))
    .nullable()
    .optional()
    // x-max-bytes: the limit in UTF-8 bytes, which maxLength (characters) cannot state.
    .openapi({ description, example, pattern: anyTextPattern, "x-max-bytes": maxBytes });
};

const TEMPLATE_NOTE =
  "A Liquid template (variables `subscriber.email`, `subscriber.name`, `subscriber.tags`, `subscriber.location`, `subscriber.source`, `campaign.subject`, `newsletter.name`, `newsletter.address`, `unsubscribe_url`; filters such as `default`, `upcase`, `capitalize`), checked when saved: a syntax error or an unknown variable is a 400 `validation_failed` naming this field and the line. A message that does not show `unsubscribe_url` gets the service's footer (the link and the newsletter's `address`); one that shows the link but not the address gets a footer with the address alone.";

const htmlField = templateField(
  CONTENT_LIMITS.html,
  `The html body. ${TEMPLATE_NOTE} Every output is HTML-escaped. A footer with the unsubscribe link and the newsletter's address is added to every message that does not show \`{{ unsubscribe_url }}\` as an \`<a>\` element's \`href\` (outside html comments), decided per message. At most 512 KiB of UTF-8 (\`x-max-bytes\`; \`maxLength\` bounds the characters, a looser bound for text beyond ASCII).`,
  '<html><body><h1>Hello {{ subscriber.name | default: "there" }}!</h1><p>This week in {{ newsletter.name }}…</p><p><a href="{{ unsubscribe_url }}">Unsubscribe</a></p></body></html>',
);

const textField = templateField(
  CONTENT_LIMITS.text,
  `The plain-text body. ${TEMPLATE_NOTE} Without it, the text part is derived from \`html\` (links kept as URLs), else it is the preheader or the subject. At most 256 KiB of UTF-8 (\`x-max-bytes\`; \`maxLength\` bounds the characters).`,
  "Hello {{ subscriber.name | default: \"there\" }}!\n\nThis week in {{ newsletter.name }}…\n\nUnsubscribe: {{ unsubscribe_url }}",
);

export const CampaignParams = WorkspaceParams.extend({ campaign_id: idParam("campaign", "campaign_id") });

export const CampaignSchema = z
  .object({
    id: z.string().openapi({ example: "cmp_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("campaign"),
    subject: z.string(),
    preheader: z.string().nullable(),
    html: z.string().nullable().openapi({ description: "The html body's Liquid template." }),
    text: z.string().nullable().openapi({ description: "The plain-text body's Liquid template; null: derived from `html`." }),
    status: z.enum(campaignStatuses),
    newsletter_id: z.string(),
    segment_id: z.string().nullable(),
    scheduled_at: isoDateTime.nullable(),
    sent_at: isoDateTime.nullable().openapi({ description: "When the send finished, for a `sent` campaign." }),
    created_at: isoDateTime,
    updated_at: isoDateTime,
  })
  .openapi("Campaign");

export type Campaign = z.infer<typeof CampaignSchema>;

/** A referenced id: any text; one that names nothing in the workspace is a 400 resource_missing. */
const reference = (example: string) => rawText(100).openapi({ example });

const dateTime = z.iso.datetime({ offset: true, abort: true });

/**
 * The last instant every timestamp the API writes can show (`2026-11-21T12:00:00.000Z`, four-digit
 * year): a 9999-12-31 local time west of UTC is already in year 10000.
 */
const LAST_INSTANT = "9999-12-31T23:59:59.999Z";
const untilLastInstant = (value: string) => Date.parse(value) <= Date.parse(LAST_INSTANT);
const untilLastInstantError = { error: `must be no later than ${LAST_INSTANT}` };

const scheduledAtDoc = (future: string) => ({
  format: "date-time",
  // zod's own expression for what it accepts, so the document's pattern cannot drift from it.
  pattern: dateTime._zod.pattern.source,
  description: `When the send starts processing, if later than the send request. ISO 8601 with a time zone, ${future} and no later than ${LAST_INSTANT} (rules no schema can state).`,
});

// abort: a value that is not a date-time gets that one message, not "must be in the future" too.
const scheduledAt = dateTime
  .refine((value) => Date.parse(value) > Date.now(), { error: "must be in the future" })
  .refine(untilLastInstant, untilLastInstantError)
  .nullable()
  .optional()
  .openapi(scheduledAtDoc("in the future"));

/** On PATCH the future is checked against the campaign: the value already there may be past (a no-op). */
const scheduledAtEdit = dateTime.refine(untilLastInstant, untilLastInstantError).nullable().optional().openapi(scheduledAtDoc("in the future unless it is the value the campaign already has"));

/** The PATCH's rule for `scheduled_at` (src/campaigns/campaigns.handlers.ts). */
export const scheduledInPast = () => invalidParam("scheduled_at", "scheduled_at must be in the future");

export const CreateCampaignBody = z
  .strictObject({
    subject: requiredText(255),
    newsletter_id: reference("nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T"),
    preheader: optionalText(255).openapi({ description: "At most 255 characters, trimmed; `null` or blank: none." }),
    segment_id: reference("seg_01JD6Q3Z6W9X8B4N2M5K7P1R3T").nullable().optional(),
    html: htmlField,
    text: textField,
    scheduled_at: scheduledAt,
  })
  .openapi("CreateCampaignRequest", {
    example: {
      subject: "{{ subscriber.name | default: 'Hello' }}, this week's notes",
      newsletter_id: "nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T",
      html: "<p>Hi {{ subscriber.name | default: 'there' }}</p>",
    },
  });

export const UpdateCampaignBody = somethingToChange(
  z.strictObject({
    subject: requiredText(255).optional(),
    preheader: optionalText(255).openapi({ description: "At most 255 characters, trimmed; `null` or blank: none." }),
    html: htmlField,
    text: textField,
    segment_id: reference("seg_01JD6Q3Z6W9X8B4N2M5K7P1R3T").nullable().optional().openapi({ description: "`null`: the whole audience." }),
    scheduled_at: scheduledAtEdit,
  }),
).openapi("UpdateCampaignRequest", {
    minProperties: 1,
    example: { subject: "{{ subscriber.name | default: 'Hello' }}, this week's notes", html: "<p>Hi {{ subscriber.name | default: 'there' }}</p>" },
  });

export const ListCampaignsQuery = z.strictObject({
  limit: limitQuery,
  after: afterQuery,
  status: queryEnum(campaignStatuses).optional().openapi({ description: "Only campaigns with this status." }),
});

export const SendCampaignBody = z
  .strictObject({
    // Matched exactly (case-sensitive, untrimmed) against the configured integrations by the send
    // itself, so that a name it does not know (the empty one too) is a 400 unknown_integration rather
    // than a shape error.
    integration_slug: bodyString()
      .max(64)
      .nullable()
      .optional()
      .openapi({
        enum: [...integrationSlugs, null],
        description:
          "`sandbox` (records messages as sent, no network) or `resend`. Omitted or `null`: `resend` for a live credential (a 400 `integration_not_configured` when no real integration is configured), `sandbox` for a test one. Any other value, or `resend` when it is not configured, is a 400 `unknown_integration`. Test credentials always deliver through the sandbox; the operation records what was asked.",
        example: "sandbox",
      }),
  })
  .openapi("SendCampaignRequest");

export const serializeCampaign = (row: typeof campaigns.$inferSelect): Campaign => ({
  id: row.id,
  object: "campaign",
  subject: row.subject,
  preheader: row.preheader,
  html: row.html,
  text: row.text,
  status: row.status,
  newsletter_id: row.newsletterId,
  segment_id: row.segmentId,
  scheduled_at: iso(row.scheduledAt),
  sent_at: iso(row.sentAt),
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
});

// ---- preview and test send ----

export const PreviewCampaignBody = z
  .strictObject({
    subscriber_id: reference("sub_01JD6Q3Z6W9X8B4N2M5K7P1R3T")
      .nullable()
      .optional()
      .openapi({
        description: "Render for this subscriber of the workspace; omitted: a sample subscriber (`subscriber@example.com`, `Sample Subscriber`).",
      }),
  })
  .openapi("PreviewCampaignRequest");

export const EmailPreviewSchema = z
  .object({
    object: z.literal("email_preview"),
    from: z.string().openapi({ example: '"Acme Weekly" <news@acme.test>' }),
    reply_to: z.string().nullable(),
    to: z.string().openapi({ example: "ada@example.com" }),
    subject: z.string().openapi({ example: "Ada, this week's notes" }),
    html: z.string().nullable().openapi({ example: '<html><body><h1>Hello Ada!</h1><p><a href="http://localhost:8787/u/AQGT…">Unsubscribe</a></p></body></html>' }),
    text: z.string().openapi({ example: "Hello Ada!\n\nUnsubscribe <http://localhost:8787/u/AQGT…>" }),
    headers: z.record(z.string(), z.string()).openapi({
      example: { "List-Unsubscribe": "<http://localhost:8787/u/AQGT…>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click" },
    }),
  })
  .openapi("EmailPreview");

const TEST_SEND_MAX = 5;

export const TestSendBody = z
  .strictObject({
    emails: z
      .array(emailAddress("A recipient of the test."))
      .min(1)
      .max(TEST_SEND_MAX)
      // One message an address: the same address twice is a mistake, as in a subscriber batch.
      .superRefine(
        noAddressTwice(
          (email) => email,
          (i) => [i],
          (first) => `emails[${first}]`,
        ),
      )
      .openapi({ description: `1 to ${TEST_SEND_MAX} addresses, no address twice (case-insensitively).`, example: ["ada@example.com"] }),
    integration_slug: SendCampaignBody.shape.integration_slug,
  })
  .openapi("TestSendRequest");

export const TestSendSchema = z
  .object({
    object: z.literal("test_send"),
    results: z.array(
      oneOffResultSchema({ email: z.string() }).openapi("TestSendResult"),
    ),
  })
  .openapi("TestSend");
