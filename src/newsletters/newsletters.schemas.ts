import { z } from "@hono/zod-openapi";
import type { newsletters } from "../db/schema";
import {
  afterQuery,
  emailAddress,
  idParam,
  isoDateTime,
  limitQuery,
  optionalEmailAddress,
  optionalLine,
  optionalText,
  requiredLine,
  WorkspaceParams,
  somethingToChange,
} from "../lib/schemas";
import { iso } from "../lib/time";

export const NewsletterParams = WorkspaceParams.extend({ newsletter_id: idParam("newsletter", "newsletter_id") });

export const NewsletterSchema = z
  .object({
    id: z.string().openapi({ example: "nl_01JD6Q3Z6W9X8B4N2M5K7P1R3T" }),
    object: z.literal("newsletter"),
    name: z.string(),
    from_name: z.string().nullable(),
    from_email: z.string().openapi({ example: "news@example.com" }),
    reply_to: z.string().nullable(),
    address: z.string().nullable().openapi({ description: "Postal address printed in every campaign's footer.", example: "Acme Inc., 1 Main Street, Springfield" }),
    created_at: isoDateTime,
    updated_at: isoDateTime,
  })
  .openapi("Newsletter");

export type Newsletter = z.infer<typeof NewsletterSchema>;

const addressField = optionalText(500).openapi({
  description:
    "The postal address anti-spam laws require in commercial email, printed in the footer of every campaign (lines kept). At most 500 characters, trimmed; `null` or blank: none.",
  example: "Acme Inc., 1 Main Street, Springfield",
});

const nameField = requiredLine(200).openapi({
  description:
    "The newsletter's name: one line of 1 to 200 characters, trimmed (it is the subject of a message whose own subject renders blank, and is named in every footer).",
});

export const CreateNewsletterBody = z
  .strictObject({
    name: nameField,
    from_email: emailAddress("The sender address every campaign of this newsletter is sent from."),
    from_name: optionalLine(200).openapi({ description: "The sender's display name: one line of at most 200 characters, trimmed; `null` or blank: none." }),
    reply_to: optionalEmailAddress("Where replies go."),
    address: addressField,
  })
  .openapi("CreateNewsletterRequest", {
    example: { name: "Acme Weekly", from_email: "news@example.com", from_name: "Acme", address: "1 Main Street, Springfield" },
  });

export const UpdateNewsletterBody = somethingToChange(
  z.strictObject({
    name: nameField.optional(),
    from_name: optionalLine(200).openapi({ description: "The sender's display name: one line; `null` or blank: none." }),
    from_email: emailAddress("The sender address every campaign of this newsletter is sent from.").optional(),
    reply_to: optionalEmailAddress("Where replies go."),
    address: addressField,
  }),
).openapi("UpdateNewsletterRequest", { minProperties: 1, example: { name: "Acme Weekly" } });

export const ListNewslettersQuery = z.strictObject({ limit: limitQuery, after: afterQuery });

export const serializeNewsletter = (row: typeof newsletters.$inferSelect): Newsletter => ({
  id: row.id,
  object: "newsletter",
  name: row.name,
  from_name: row.fromName,
  from_email: row.fromEmail,
  reply_to: row.replyTo,
  address: row.address,
  created_at: iso(row.createdAt),
  updated_at: iso(row.updatedAt),
});
