import { describe, expect, it } from "vitest";
import { createApp } from "../src/app";
import { call, tenant } from "./helpers";
import { accepts, resolve, type Schema } from "./openapi/arbitraries";

type Operation = { tags?: string[]; security?: unknown[] };

describe("GET /openapi.json", () => {
  it("documents every route the service answers, with every method it takes (but the HTML pages, their scripts and Resend's feedback)", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const documented = new Set(
      Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`)),
    );
    // Hono's routes, in the document's spelling: `{name}` for `:name`.
    const served = createApp()
      .routes.filter(({ method, path }) => method !== "ALL" && !path.includes("*"))
      .map(({ method, path }) => `${method} ${path.replace(/:([A-Za-z_]+)/g, "{$1}")}`)
      .filter((route) => !/^\w+ \/[uc]\/|^GET \/docs\/[\w-]+\.js$|^POST \/webhooks\/resend$/.test(route));
    expect(served.length).toBeGreaterThan(40);
    expect([...new Set(served)].filter((route) => !documented.has(route))).toEqual([]);
    expect([...documented].filter((route) => !served.includes(route))).toEqual([]);
  });

  it("marks the headers every answer carries as required: Request-Id everywhere, WWW-Authenticate on a 401, Retry-After on a 429", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    type Responses = Record<string, { headers?: Record<string, { required?: boolean }> }>;
    const lacking: string[] = [];
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, { responses: Responses }>>)) {
      for (const [method, operation] of Object.entries(item)) {
        for (const [status, response] of Object.entries(operation.responses)) {
          const must = ["Request-Id", ...(status === "401" ? ["WWW-Authenticate"] : []), ...(status === "429" ? ["Retry-After"] : [])];
          for (const name of must) if (response.headers?.[name]?.required !== true) lacking.push(`${method} ${path} ${status} ${name}`);
        }
      }
    }
    expect(lacking).toEqual([]);
  });

  it("documents the credential-free routes with an empty security requirement", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    for (const path of ["/health", "/openapi.json", "/docs"]) {
      expect(doc.paths[path]?.get?.security, path).toEqual([]);
      expect(doc.paths[path].get.tags, path).toEqual(["Utility"]);
    }
  });

  it("declares every operation's tag once, with a description, and names a contact and a license", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const used = new Set(
      Object.values(doc.paths as Record<string, Record<string, Operation>>).flatMap((item) => Object.values(item).flatMap((op) => op.tags ?? [])),
    );
    const declared = doc.tags as { name: string; description: string }[];
    expect(declared.map((t) => t.name).sort()).toEqual([...used].sort());
    for (const tag of declared) expect(tag.description, tag.name).toMatch(/\w/);
    expect(doc.info.contact).toMatchObject({ name: expect.any(String), url: expect.stringMatching(/\/docs$/) });
    expect(doc.info.license).toMatchObject({ name: "Proprietary", identifier: expect.any(String) });
  });

  it("names in each 400 and 409 every code the route can answer with, and gives every operation the 503", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const codes = new Set<string>(doc.components.schemas.Error.properties.error.properties.code.enum);
    type Responses = Record<string, { description: string }>;
    const operations = new Map<string, Responses>();
    for (const item of Object.values(doc.paths as Record<string, Record<string, { operationId: string; responses: Responses }>>)) {
      for (const op of Object.values(item)) operations.set(op.operationId, op.responses);
    }
    const named = (operationId: string, status: string) => operations.get(operationId)?.[status]?.description.split(", ") ?? [];
    for (const [operationId, responses] of operations) {
      if (["health", "openapiJson", "docs"].includes(operationId) || !responses["401"]) continue;
      expect(responses["503"]?.description, operationId).toMatch(/^configuration_error/);
      for (const status of ["400", "409"]) for (const code of named(operationId, status)) expect(codes.has(code), `${operationId} ${status} ${code}`).toBe(true);
    }
    expect(named("updateSubscriber", "409")).toEqual(["subscriber_exists", "idempotency_key_in_use"]);
    expect(named("createNewsletter", "409")).toEqual(["idempotency_key_in_use"]);
    expect(named("sendCampaign", "409")).toEqual(["campaign_not_sendable", "idempotency_key_in_use"]);
    expect(named("sendCampaignTest", "400")).toEqual(["validation_failed", "invalid_json", "unknown_integration", "integration_not_configured"]);
    expect(named("listSubscribers", "400")).toEqual(["validation_failed", "invalid_cursor"]);
    expect(named("retrieveSubscriber", "400")).toEqual(["validation_failed"]);
    expect(named("createCredential", "400")).toContain("resource_missing");
  });

  it("describes what an endpoint receives for every event type, and the payload a delivery carries fits it", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    // Event is one schema per resource family, told apart by `type`.
    const mapping: Record<string, string> = doc.components.schemas.Event.discriminator.mapping;
    expect(doc.components.schemas.Event.discriminator.propertyName).toBe("type");
    const types = Object.keys(mapping);
    expect(Object.keys(doc.webhooks).sort()).toEqual([...types].sort());
    for (const type of types) {
      const hook = doc.webhooks[type].post;
      expect(hook.security, type).toEqual([]);
      expect(hook.parameters.map((p: { name: string }) => p.name).sort()).toEqual(["webhook-id", "webhook-signature", "webhook-timestamp"]);
    }
    expect(doc.webhooks["subscriber.created"].post.requestBody.content["application/json"].schema.properties.data.properties.object.$ref).toBe(
      "#/components/schemas/Subscriber",
    );
    expect(mapping["subscriber.created"]).toBe("#/components/schemas/SubscriberEvent");
    expect(mapping["delivery.bounced"]).toBe("#/components/schemas/DeliveryEvent");
    for (const ref of new Set(Object.values(mapping))) {
      const member = doc.components.schemas[ref.split("/").pop() as string];
      const family = Object.entries(mapping).filter(([, r]) => r === ref).map(([type]) => type);
      expect(member.properties.type.enum, ref).toEqual(family);
    }
    // A real event, as delivered ({type, timestamp, data}), is what the document says.
    const t = await tenant();
    await t.call("POST", `${t.ws}/subscribers`, { body: { email: "hook@example.com", name: "Hook" } });
    const [event] = (await t.call("GET", `${t.ws}/events`)).body.data;
    const payload = { type: event.type, timestamp: event.created_at, data: event.data };
    const schema = resolve(doc, doc.webhooks["subscriber.created"].post.requestBody.content["application/json"].schema);
    expect(accepts(schema)(payload)).toBe(true);
    expect(accepts(schema)({ ...payload, type: "subscriber.updated" })).toBe(false);
    expect(accepts(resolve(doc, doc.components.schemas.Event))(event)).toBe(true);
    expect(accepts(resolve(doc, doc.components.schemas.Event))({ ...event, type: "campaign.sent" })).toBe(false);
    // WebhookPayload: every delivery body under one name, told apart by `type` as Event is.
    const payloads = doc.components.schemas.WebhookPayload;
    expect(payloads.discriminator.propertyName).toBe("type");
    expect(Object.keys(payloads.discriminator.mapping).sort()).toEqual([...types].sort());
    expect(payloads.discriminator.mapping["campaign.sent"]).toBe("#/components/schemas/CampaignWebhookPayload");
    expect(accepts(resolve(doc, payloads))(payload)).toBe(true);
    expect(accepts(resolve(doc, payloads))({ ...payload, type: "delivery.bounced" })).toBe(false);
    expect(accepts(resolve(doc, payloads))(event)).toBe(false);
    // What an event says of its resource is said on its `data`: the resources' own components, which
    // their routes answer with, keep their own descriptions.
    expect(doc.components.schemas.SubscriberEvent.properties.data.description).toContain("as the change left it");
    for (const name of ["Subscriber", "Campaign", "Delivery", "WebhookEndpoint"]) {
      expect(doc.components.schemas[name].description ?? "", name).not.toMatch(/change left it|tested/);
    }
  });

  it("gives every create request an example the service accepts, no fixed Idempotency-Key to paste twice, and /health's checks one type", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const schemas = doc.components.schemas as Record<string, { example?: unknown }>;
    // Every create and update request: an update's example changes only what it names (no nulls that would clear fields).
    const requests = Object.keys(schemas).filter((name) => /^(Create|Update)\w+Request$/.test(name));
    expect(requests.length).toBeGreaterThan(10);
    for (const name of requests) {
      const example = schemas[name]?.example;
      expect(example, name).toBeDefined();
      expect(accepts(resolve(doc, schemas[name] as Schema))(example), name).toBe(true);
      if (name.startsWith("Update")) expect(Object.values(example as object), name).not.toContain(null);
    }
    // /health's checks are one schema, referenced as is (no allOf a generator would turn into `HealthCheck & unknown`).
    for (const check of Object.values(doc.components.schemas.Health.properties.checks.properties)) expect(check).toEqual({ $ref: "#/components/schemas/HealthCheck" });
    const keyed = doc.paths["/workspaces/{workspace_id}/subscribers"].post.parameters.find((p: { name: string }) => p.name === "Idempotency-Key");
    expect(keyed.example ?? keyed.schema.example).toBeUndefined();
    // The examples as a client sends them: each accepted.
    const t = await tenant();
    const newsletter = await t.call("POST", `${t.ws}/newsletters`, { body: schemas.CreateNewsletterRequest?.example });
    expect(newsletter.status, newsletter.text).toBe(201);
    expect((await t.call("POST", `${t.ws}/segments`, { body: schemas.CreateSegmentRequest?.example })).status).toBe(201);
    const campaign = { ...(schemas.CreateCampaignRequest?.example as object), newsletter_id: newsletter.body.data.id };
    expect((await t.call("POST", `${t.ws}/campaigns`, { body: campaign })).status).toBe(201);
  });

  it("puts Idempotent-Replayed only on answers a replay can have, and the credential's token only where it always is", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const responses = doc.paths["/workspaces/{workspace_id}/campaigns/{campaign_id}/send"].post.responses as Record<string, { headers?: Record<string, unknown> }>;
    for (const [status, response] of Object.entries(responses)) {
      const replayable = /^(2\d\d|400|404|409)$/.test(status);
      expect("Idempotent-Replayed" in (response.headers ?? {}), status).toBe(replayable);
    }
    const created = doc.paths["/admin/credentials"].post.responses["201"].content["application/json"].schema;
    expect(created.properties.data.$ref).toBe("#/components/schemas/CredentialWithToken");
    const parts = doc.components.schemas.CredentialWithToken.allOf as { $ref?: string; required?: string[] }[];
    expect(parts.map((part) => part.$ref ?? part.required)).toEqual(["#/components/schemas/Credential", ["token"]]);
    const revoked = resolve(doc, doc.paths["/admin/credentials/{credential_id}"].delete.responses["200"].content["application/json"].schema.properties.data);
    expect(Object.keys(revoked.properties ?? {})).not.toContain("token");
  });

  it("types responses as tightly as requests: Pagination's cursor is a string exactly when there is more, slugs and event types are enums", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const pagination = doc.components.schemas.Pagination;
    const members = (pagination.anyOf ?? pagination.oneOf) as { properties: Record<string, { enum?: unknown[]; type?: unknown }> }[];
    expect(members.map((m) => [m.properties.has_more?.enum, m.properties.next_cursor?.type])).toEqual([
      [[true], "string"],
      [[false], "null"],
    ]);
    expect(doc.components.schemas.Operation.properties.integration_slug.enum).toEqual(["sandbox", "resend"]);
    expect(doc.components.schemas.WebhookEndpoint.properties.events.items.enum).toContain("*");
    // A message sent at once: error only after "failed", never after "sent".
    for (const name of ["TestSendResult", "ConfirmationSendResult"]) {
      const schema = doc.components.schemas[name];
      // The confirmation's result is also null (no mail asked): that member has no properties.
      const parts = (schema.anyOf as { properties?: Record<string, { enum?: unknown[]; type?: unknown }> }[]).filter((m) => m.properties);
      expect(
        parts.map((m) => [m.properties!.status?.enum, m.properties!.error?.type, m.properties!.provider_message_id?.type]),
        name,
      ).toEqual([
        [["sent"], "null", ["string", "null"]],
        [["failed"], "object", "null"],
      ]);
    }
  });

  it("shows a webhook secret example of the documented form: whsec_ and 32 bytes", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const example: string = doc.components.schemas.WebhookEndpointWithSecret.properties.secret.example;
    expect(example).toMatch(/^whsec_/);
    expect(atob(example.slice(6))).toHaveLength(32);
  });

  it("says every edit body needs at least one field, as the service does", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    for (const name of ["UpdateSubscriberRequest", "UpdateCampaignRequest", "UpdateNewsletterRequest", "UpdateWebhookEndpointRequest"]) {
      expect(doc.components.schemas[name]?.minProperties, name).toBe(1);
    }
  });

  it("states each route's own body limit in its 413", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const tooLarge = (path: string, method: string) => doc.paths[path][method].responses["413"].description;
    expect(tooLarge("/workspaces/{workspace_id}/campaigns", "post")).toBe("payload_too_large: body over 5 MiB");
    expect(tooLarge("/workspaces/{workspace_id}/campaigns/{campaign_id}", "patch")).toBe("payload_too_large: body over 5 MiB");
    expect(tooLarge("/workspaces/{workspace_id}/subscribers", "post")).toBe("payload_too_large: body over 64 KiB");
  });

  it("gives CreateSubscriberRequest.status no schema default, so generated clients keep it optional", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const schema = doc.components.schemas.CreateSubscriberRequest;
    expect(schema.properties.status).not.toHaveProperty("default");
    expect(schema.properties.status.description).toContain("`active`");
    expect(schema.required).toEqual(["email"]);
    const t = await tenant();
    const res = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "default@example.com" } });
    expect(res.body.data.status).toBe("active");
  });

  it("states the segment filter's rule as two whole shapes, so a generated client types it exactly: one list required, lists of strings", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const filter = doc.components.schemas.SegmentFilter;
    expect(filter).not.toHaveProperty("minProperties");
    // No properties beside the rule (a generator would type them as a shape of their own: `{}` allowed).
    expect(Object.keys(filter).sort()).toEqual(["anyOf", "description"]);
    const tags = { $ref: "#/components/schemas/SegmentFilterTags" };
    for (const [own, other] of [["tags_any", "tags_all"], ["tags_all", "tags_any"]] as const) {
      const shape = filter.anyOf.find((s: { required: string[] }) => s.required[0] === own);
      expect(shape).toMatchObject({ type: "object", additionalProperties: false, required: [own] });
      expect(shape.properties[own]).toMatchObject(tags);
      expect(shape.properties[other].anyOf).toEqual([tags, { type: "null" }]);
    }
    expect(doc.components.schemas.SegmentFilterTags).toMatchObject({ type: "array", minItems: 1, maxItems: 50, items: { type: "string" } });
    // What a validator makes of it: the service's own answers (openapi.property.test.ts holds them to it).
    const valid = accepts(resolve(doc, filter));
    expect([{ tags_any: ["a"] }, { tags_all: ["a"], tags_any: null }, { tags_any: ["a"], tags_all: ["b"] }].every(valid)).toBe(true);
    expect([{}, { tags_any: null, tags_all: null }, { tags_any: [1] }, { tags_any: [] }, { tags_any: ["a"], x: 1 }].some(valid)).toBe(false);
  });

  it("anchors every request text pattern and states it for whitespace-only and control-character text", async () => {
    const doc = (await call("GET", "/openapi.json")).body;
    const name = doc.components.schemas.CreateWorkspaceRequest.properties.name;
    expect(name).not.toHaveProperty("maxLength");
    const pattern = new RegExp(name.pattern);
    const unicode = new RegExp(name.pattern, "u");
    for (const re of [pattern, unicode]) {
      expect(re.test("Acme"), re.flags).toBe(true);
      expect(re.test("  Acme  ")).toBe(true);
      expect(re.test("😀".repeat(200))).toBe(true);
      expect(re.test("😀".repeat(201))).toBe(false);
      expect(re.test(` ${"a".repeat(200)} `)).toBe(true);
      expect(re.test("   ")).toBe(false);
      expect(re.test("\u00A0\u3000")).toBe(false);
      expect(re.test("a\u0000b")).toBe(false);
      expect(re.test("a\ud800")).toBe(false);
    }
  });
});
