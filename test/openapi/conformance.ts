import { Validator } from "@cfworker/json-schema";
import { exports } from "cloudflare:workers";
import { resolve, type Document, type Schema } from "./arbitraries";

type Response = { description: string; headers?: Record<string, { required?: boolean }>; content?: Record<string, { schema: Schema }> };
type Operation = { operationId: string; responses: Record<string, Response> };
type Paths = Record<string, Record<string, Operation>>;

let documented: Promise<{ doc: Document & { paths: Paths }; routes: { pattern: RegExp; params: number; path: string }[] }> | undefined;

/** The service's own /openapi.json, read once per test file, its paths as patterns (fewest parameters first). */
const load = () =>
  (documented ??= (async () => {
    const res = await exports.default.fetch(new Request("https://api.example.test/openapi.json"));
    const doc = (await res.json()) as Document & { paths: Paths };
    const routes = Object.keys(doc.paths)
      .map((path) => ({
        path,
        params: (path.match(/\{/g) ?? []).length,
        pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, "[^/]+")}$`),
      }))
      .sort((a, b) => a.params - b.params);
    return { doc, routes };
  })());

const validators = new Map<string, Validator>();

/**
 * Holds an answer of a documented operation to the document, as a client generated from it would:
 * its status is one the operation lists, the headers it marks required are there, and a JSON body
 * validates against that status's schema.
 * Returns what is wrong, or nothing. Routes the document leaves out (the hosted pages, Resend's
 * feedback, paths no route has) are not its business.
 */
export const departureFromDocument = async (method: string, url: string, status: number, headers: Headers, text: string) => {
  const { doc, routes } = await load();
  // The document's paths are relative to its server, `/v1`; the service answers them without it too.
  const path = new URL(url, "https://api.example.test").pathname.replace(/^\/v1(?=\/|$)/, "") || "/";
  // As OpenAPI matches: the path with the fewest parameters serves it (`/subscribers/batch` before
  // `/subscribers/{subscriber_id}`), whether or not it has this method.
  const route = routes.find((r) => r.pattern.test(path));
  const operation = route && doc.paths[route.path]?.[method.toLowerCase()];
  if (!operation) return undefined;
  const response = operation.responses[String(status)];
  if (!response) return `${operation.operationId} answered ${status}, which /openapi.json does not list (${Object.keys(operation.responses).join(", ")})`;
  const missing = Object.entries(response.headers ?? {}).find(([name, header]) => header.required && !headers.has(name));
  if (missing) return `${operation.operationId} ${status}: no ${missing[0]} header, which /openapi.json marks required`;
  const contentType = headers.get("content-type");
  const media = response.content && Object.keys(response.content)[0];
  if (!media || method === "HEAD") return undefined;
  if (!contentType?.startsWith(media)) return `${operation.operationId} ${status}: Content-Type ${contentType}, documented ${media}`;
  if (!media.includes("json")) return undefined;
  const key = `${operation.operationId} ${status}`;
  let validator = validators.get(key);
  if (!validator) {
    validator = new Validator(resolve(doc, response.content![media]!.schema) as object, "2020-12", false);
    validators.set(key, validator);
  }
  const result = validator.validate(JSON.parse(text));
  if (result.valid) return undefined;
  const errors = result.errors
    .filter((e) => !/^(properties|items|anyOf|oneOf|allOf|\$ref)$/.test(e.keyword) || result.errors.length === 1)
    .slice(0, 4)
    .map((e) => `${e.instanceLocation}: ${e.error}`);
  return `${key}: the body departs from the documented schema: ${errors.join("; ")}\n${text.slice(0, 400)}`;
};
