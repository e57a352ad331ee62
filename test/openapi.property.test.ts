import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { accepts, everyStringNearMiss, mutated, resolve, valueArbitrary, type Document, type Schema } from "./openapi/arbitraries";
import { admin, call, type ApiResponse, tenant } from "./helpers";

// Deterministic and bounded: the same draws on every run, a few hundred requests in all.
const SEED = 20_261_123;
const RUNS = 60;

type Operation = { parameters?: { name: string; in: string; schema: Schema }[]; requestBody?: { content: Record<string, { schema: Schema }> } };

let doc: Document & { paths: Record<string, Record<string, Operation>> };
beforeAll(async () => {
  doc = (await call("GET", "/openapi.json")).body;
});

/** A failing input can be megabytes long: enough of it to see what it was. */
const abridged = (text: string) => (text.length > 600 ? `${text.slice(0, 600)}… (${text.length} characters)` : text);

const operation = (path: string, method: string) => {
  const op = doc.paths[path]?.[method];
  if (!op) throw new Error(`/openapi.json does not describe ${method.toUpperCase()} ${path}`);
  return op;
};

/** What is wrong when the service's answer to `input` does not match the document's verdict; undefined when it does. */
const disagreementOf = <T>(
  input: T,
  documentAccepts: boolean,
  res: ApiResponse,
  rejectionCodes: string[],
  refusedByDeployment: (input: T, res: ApiResponse) => boolean,
): string | undefined => {
  if (documentAccepts && refusedByDeployment(input, res)) return undefined;
  const serviceRejects = res.status === 400 && rejectionCodes.includes(res.body?.error?.code);
  if (documentAccepts !== serviceRejects) return undefined;
  return `the document ${documentAccepts ? "accepts" : "rejects"} ${abridged(JSON.stringify(input))}; the service answered ${res.status} ${res.text}`;
};

/**
 * Draws inputs from the document's schema, half of them changed by one near miss, and holds the
 * service to the document: what the schema accepts is never a 400 validation_failed (the request may
 * still fail for other reasons: a missing resource, a conflict), and what it rejects always is.
 */
const agree = async <T>(
  schema: Schema,
  arbitrary: fc.Arbitrary<T>,
  decode: (input: T) => unknown,
  send: (input: T) => Promise<ApiResponse>,
  rejectionCodes: string[] = ["validation_failed"],
  refusedByDeployment: (input: T, res: ApiResponse) => boolean = () => false,
) => {
  const valid = accepts(schema);
  const seen = { accepted: 0, rejected: 0 };
  await fc.assert(
    fc.asyncProperty(arbitrary, async (input) => {
      const documentAccepts = valid(decode(input));
      seen[documentAccepts ? "accepted" : "rejected"]++;
      const disagreement = disagreementOf(input, documentAccepts, await send(input), rejectionCodes, refusedByDeployment);
      if (disagreement) throw new Error(disagreement);
    }),
    { seed: SEED, numRuns: RUNS, endOnFailure: true },
  );
  // Both sides of each rule were exercised.
  expect(seen.accepted, JSON.stringify(seen)).toBeGreaterThanOrEqual(RUNS / 6);
  expect(seen.rejected, JSON.stringify(seen)).toBeGreaterThanOrEqual(RUNS / 6);
};

const bodyCheck = async (
  path: string,
  method: string,
  send: (body: unknown) => Promise<ApiResponse>,
  rejectionCodes?: string[],
  refusedByDeployment?: (body: unknown, res: ApiResponse) => boolean,
) => {
  const schema = resolve(doc, operation(path, method).requestBody?.content["application/json"]?.schema as Schema);
  const drawn = valueArbitrary(schema);
  await agree(schema, fc.oneof(drawn, drawn.chain(mutated)), (body) => body, send, rejectionCodes, refusedByDeployment);
  // Then each string near miss in each string field of the fullest accepted body drawn.
  const valid = accepts(schema);
  const fullest = fc
    .sample(drawn, { seed: SEED, numRuns: 40 })
    .filter((body) => valid(body))
    .sort((a, b) => JSON.stringify(b).length - JSON.stringify(a).length)[0];
  if (fullest === undefined) throw new Error(`no accepted body drawn for ${method.toUpperCase()} ${path}`);
  for (const body of everyStringNearMiss(fullest)) {
    expect(disagreementOf(body, valid(body), await send(body), rejectionCodes ?? ["validation_failed"], refusedByDeployment ?? (() => false))).toBeUndefined();
  }
};

/**
 * The test worker has no RESEND_API_KEY: a body naming `resend`, which the document lists, is refused
 * by this deployment's configuration (400 unknown_integration, "not configured"), not by the document.
 */
const resendUnconfigured = (body: unknown, res: ApiResponse) =>
  (body as { integration_slug?: unknown } | null)?.integration_slug === "resend" &&
  res.body?.error?.code === "unknown_integration" &&
  /not configured/.test(res.body.error.message);

/**
 * A test send's "no address twice, case-insensitively", stated in the description only (uniqueItems
 * compares exactly): a body the document accepts holding one address twice is refused for that alone.
 */
const sameAddressTwice = (body: unknown, res: ApiResponse) => {
  const emails = (body as { emails?: unknown } | null)?.emails;
  if (!Array.isArray(emails) || res.body?.error?.code !== "validation_failed") return false;
  const keys = emails.map((e) => String(e).trim().replace(/[A-Z]/g, (c) => c.toLowerCase()));
  return new Set(keys).size < keys.length && /is the same address as emails\[\d+\]/.test(res.body.error.message);
};

describe("request bodies: the service accepts exactly what /openapi.json accepts", () => {
  it("POST /admin/workspaces", async () => {
    await bodyCheck("/admin/workspaces", "post", (body) => admin("POST", "/admin/workspaces", body));
  });

  it("POST /admin/credentials", async () => {
    await bodyCheck("/admin/credentials", "post", (body) => admin("POST", "/admin/credentials", body));
  });

  it("POST /workspaces/{workspace_id}/subscribers", async () => {
    const t = await tenant();
    await bodyCheck("/workspaces/{workspace_id}/subscribers", "post", (body) => t.call("POST", `${t.ws}/subscribers`, { body }));
  });

  it("PATCH /workspaces/{workspace_id}/subscribers/{subscriber_id}", async () => {
    const t = await tenant();
    const sub = await t.call("POST", `${t.ws}/subscribers`, { body: { email: "patch-me@example.com" } });
    const url = `${t.ws}/subscribers/${sub.body.data.id}`;
    // Each body from no tags: the one rule a schema cannot state, at most 50 tags once add_tags has
    // added its own, depends on the tags the subscriber already has.
    await bodyCheck("/workspaces/{workspace_id}/subscribers/{subscriber_id}", "patch", async (body) => {
      await t.call("PATCH", url, { body: { tags: [] } });
      return t.call("PATCH", url, { body });
    });
  });

  it("POST /workspaces/{workspace_id}/newsletters", async () => {
    const t = await tenant();
    await bodyCheck("/workspaces/{workspace_id}/newsletters", "post", (body) => t.call("POST", `${t.ws}/newsletters`, { body }));
  });

  it("POST /workspaces/{workspace_id}/segments", async () => {
    const t = await tenant();
    await bodyCheck("/workspaces/{workspace_id}/segments", "post", (body) => t.call("POST", `${t.ws}/segments`, { body }));
  });

  it("POST /workspaces/{workspace_id}/campaigns", async () => {
    const t = await tenant();
    await bodyCheck("/workspaces/{workspace_id}/campaigns", "post", (body) => t.call("POST", `${t.ws}/campaigns`, { body }));
  });

  it("PATCH /workspaces/{workspace_id}/campaigns/{campaign_id}", async () => {
    const t = await tenant();
    const nl = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "news@example.com" } });
    const campaign = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", newsletter_id: nl.body.data.id } });
    const url = `${t.ws}/campaigns/${campaign.body.data.id}`;
    await bodyCheck("/workspaces/{workspace_id}/campaigns/{campaign_id}", "patch", (body) => t.call("PATCH", url, { body }));
  });

  it("PATCH /workspaces/{workspace_id}/newsletters/{newsletter_id}", async () => {
    const t = await tenant();
    const nl = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "news@example.com" } });
    const url = `${t.ws}/newsletters/${nl.body.data.id}`;
    await bodyCheck("/workspaces/{workspace_id}/newsletters/{newsletter_id}", "patch", (body) => t.call("PATCH", url, { body }));
  });

  it("POST /workspaces/{workspace_id}/campaigns/{campaign_id}/preview and /test", async () => {
    const t = await tenant();
    const nl = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "news@example.com" } });
    const campaign = await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", newsletter_id: nl.body.data.id } });
    const url = `${t.ws}/campaigns/${campaign.body.data.id}`;
    await bodyCheck("/workspaces/{workspace_id}/campaigns/{campaign_id}/preview", "post", (body) => t.call("POST", `${url}/preview`, { body }));
    // A well-formed integration name outside the enum is 400 unknown_integration, as on send.
    await bodyCheck(
      "/workspaces/{workspace_id}/campaigns/{campaign_id}/test",
      "post",
      (body) => t.call("POST", `${url}/test`, { body }),
      ["validation_failed", "unknown_integration"],
      (body, res) => resendUnconfigured(body, res) || sameAddressTwice(body, res),
    );
  });

  it("POST /workspaces/{workspace_id}/webhook_endpoints", async () => {
    const t = await tenant();
    // Past 20 endpoints a valid body is a 409, which is still not a validation error.
    await bodyCheck("/workspaces/{workspace_id}/webhook_endpoints", "post", (body) => t.call("POST", `${t.ws}/webhook_endpoints`, { body }));
  });

  it("PATCH /workspaces/{workspace_id}/webhook_endpoints/{endpoint_id}", async () => {
    const t = await tenant();
    const created = await t.call("POST", `${t.ws}/webhook_endpoints`, { body: { url: "https://hooks.example.com/x", events: ["*"] } });
    const url = `${t.ws}/webhook_endpoints/${created.body.data.id}`;
    await bodyCheck("/workspaces/{workspace_id}/webhook_endpoints/{endpoint_id}", "patch", (body) => t.call("PATCH", url, { body }));
  });

  it("POST /workspaces/{workspace_id}/campaigns/{campaign_id}/send", async () => {
    const t = await tenant();
    const nl = await t.call("POST", `${t.ws}/newsletters`, { body: { name: "N", from_email: "news@example.com" } });
    // A campaign per draw that needs one, so a valid send meets a draft (later sends would be 409s, also fine).
    const draft = async () =>
      (await t.call("POST", `${t.ws}/campaigns`, { body: { subject: "S", newsletter_id: nl.body.data.id } })).body.data.id as string;
    // The document lists the integrations as an enum; a name outside it is answered 400
    // unknown_integration (the contract's code for it), which is the document's rejection too.
    await bodyCheck(
      "/workspaces/{workspace_id}/campaigns/{campaign_id}/send",
      "post",
      async (body) => t.call("POST", `${t.ws}/campaigns/${await draft()}/send`, { body }),
      ["validation_failed", "unknown_integration"],
      resendUnconfigured,
    );
  });
});

// ---- Query parameters ------------------------------------------------------------------------------

type Query = Record<string, string>;

/** The query parameters as one object schema: no others are allowed. */
const querySchema = (op: Operation): Schema => ({
  type: "object",
  properties: Object.fromEntries((op.parameters ?? []).filter((p) => p.in === "query").map((p) => [p.name, resolve(doc, p.schema)])),
  additionalProperties: false,
});

/** Query text as the document reads it: an integer parameter is its decimal digits. */
const decodeQuery = (schema: Schema) => (query: Query) =>
  Object.fromEntries(
    Object.entries(query).map(([name, text]) => {
      const type = schema.properties?.[name]?.type;
      return [name, type === "integer" && /^[0-9]+$/.test(text) ? Number(text) : text];
    }),
  );

const queryNearMisses = ["", " ", "\t", "\u3000", "a\u0000", "\u007F", "0", "101", "-1", "+5", "1.5", "1e1", " 5", "5 ", "0x10", "abc", "x".repeat(600)];

const queryArbitrary = (schema: Schema): fc.Arbitrary<Query> => {
  const drawn = valueArbitrary({ ...schema, required: [] }).chain((value) =>
    // Integers as digits, sometimes with leading zeros.
    fc.constantFrom("", "0", "00").map((zeros) =>
      Object.fromEntries(Object.entries(value as object).map(([k, v]) => [k, typeof v === "number" ? `${zeros}${v}` : String(v)])),
    ),
  );
  const names = Object.keys(schema.properties ?? {});
  const missed = fc
    .tuple(drawn, fc.constantFrom(...names, "unexpected"), fc.constantFrom(...queryNearMisses))
    .map(([query, name, bad]) => ({ ...query, [name]: bad }));
  return fc.oneof(drawn, missed);
};

const queryString = (query: Query) =>
  Object.entries(query)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join("&");

const queryCheck = async (path: string, send: (query: string) => Promise<ApiResponse>) => {
  const schema = querySchema(operation(path, "get"));
  await agree(schema, queryArbitrary(schema), decodeQuery(schema), (query) => send(queryString(query)));
};

describe("list query parameters: the service accepts exactly what /openapi.json accepts", () => {
  it("GET /workspaces", async () => {
    const t = await tenant();
    await queryCheck("/workspaces", (q) => t.call("GET", `/v1/workspaces?${q}`));
  });

  it("GET /workspaces/{workspace_id}/subscribers", async () => {
    const t = await tenant();
    await queryCheck("/workspaces/{workspace_id}/subscribers", (q) => t.call("GET", `${t.ws}/subscribers?${q}`));
  });

  it("GET /workspaces/{workspace_id}/campaigns", async () => {
    const t = await tenant();
    await queryCheck("/workspaces/{workspace_id}/campaigns", (q) => t.call("GET", `${t.ws}/campaigns?${q}`));
  });

  it("GET /workspaces/{workspace_id}/events", async () => {
    const t = await tenant();
    await queryCheck("/workspaces/{workspace_id}/events", (q) => t.call("GET", `${t.ws}/events?${q}`));
  });

  it("GET /workspaces/{workspace_id}/webhook_endpoints", async () => {
    const t = await tenant();
    await queryCheck("/workspaces/{workspace_id}/webhook_endpoints", (q) => t.call("GET", `${t.ws}/webhook_endpoints?${q}`));
  });
});
