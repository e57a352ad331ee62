import { AGAIN, commit, writeExplained } from "../db/commit";
import { holdsAll } from "../db/differs";
import { newsletters } from "../db/schema";
import { notFound } from "../errors/api-error";
import { createRouter } from "../lib/create-app";
import { envelope, givenFields, listPage } from "../lib/http";
import { newId } from "../lib/ids";
import { findNewsletter, insertNewsletter, listNewslettersPage, type NewsletterChanges, updateNewsletter as updateNewsletterRow } from "./newsletters.repository";
import { createNewsletter, getNewsletter, listNewsletters, updateNewsletter } from "./newsletters.routes";
import { serializeNewsletter } from "./newsletters.schemas";

export const newslettersRouter = createRouter()
  .openapi(createNewsletter, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const now = Date.now();
    const id = newId("newsletter", now);
    const [[row]] = await commit(c, [insertNewsletter(c.var.db, {
      id,
      workspaceId: workspace_id,
      name: body.name,
      fromName: body.from_name ?? null,
      fromEmail: body.from_email,
      replyTo: body.reply_to ?? null,
      address: body.address ?? null,
      createdAt: now,
      updatedAt: now,
    })], { status: 201, resource: "newsletter", id });
    // The insert is unconditional: no row means the write did not happen at all.
    if (!row) throw new Error("newsletter insert returned no row");
    return c.json(envelope(serializeNewsletter(row)), 201);
  })
  .openapi(updateNewsletter, async (c) => {
    const { workspace_id, newsletter_id } = c.req.valid("param");
    const body = c.req.valid("json");
    const changes: NewsletterChanges = {
      name: body.name,
      fromName: body.from_name,
      fromEmail: body.from_email,
      replyTo: body.reply_to,
      address: body.address,
    };
    const defined: NewsletterChanges = givenFields(changes);
    return writeExplained(async () => {
      const [[row]] = await commit(c, [updateNewsletterRow(c.var.db, workspace_id, newsletter_id, defined, Date.now())], {
        status: 200,
        resource: "newsletter",
        id: newsletter_id,
      });
      if (row) return c.json(envelope(serializeNewsletter(row)), 200);
      // Nothing written: no such newsletter, or every value given is already there.
      const current = await findNewsletter(c.var.db, workspace_id, newsletter_id);
      if (!current) throw notFound("newsletter", newsletter_id);
      return holdsAll(newsletters, current, defined) ? c.json(envelope(serializeNewsletter(current)), 200) : AGAIN;
    });
  })
  .openapi(getNewsletter, async (c) => {
    const { workspace_id, newsletter_id } = c.req.valid("param");
    const row = await findNewsletter(c.var.db, workspace_id, newsletter_id);
    if (!row) throw notFound("newsletter", newsletter_id);
    return c.json(envelope(serializeNewsletter(row)), 200);
  })
  .openapi(listNewsletters, async (c) => {
    const { workspace_id } = c.req.valid("param");
    const { limit, after } = c.req.valid("query");
    const request = { list: `newsletters:${workspace_id}`, after, limit };
    const page = await listPage(c, request, (position, take) => listNewslettersPage(c.var.db, workspace_id, position, take), serializeNewsletter);
    return c.json(page, 200);
  });
