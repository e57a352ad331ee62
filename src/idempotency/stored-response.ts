import { type CompositeKind, renderComposite, type ResourceKind, renderResource, rowFromSnapshot } from "./resources";
import type { Sealer } from "./sealed";

/**
 * What an Idempotency-Key record replays. `rendered`: the exact status, headers and body of an answer
 * (an error, or a body computed before the write). `snapshot`: the row a write created or changed,
 * captured in the write's own batch and rendered on replay exactly as the live answer was;
 * `composite`: the same for an answer about many rows (resources.ts).
 */
export type StoredResponse =
  | { status: number; headers?: Record<string, string>; body: string }
  | { status: number; resource: ResourceKind; row: Record<string, unknown> }
  | { status: number; composite: CompositeKind; elements: unknown[] };

/** A stored answer of a sealed scope (sealed.ts): a StoredResponse's JSON, encrypted. */
export type SealedResponse = { sealed: string };

/** What a record or its KV copy holds, sealed under the request's sealer when it has one. */
export const storable = async (stored: StoredResponse, sealer: Sealer | undefined): Promise<StoredResponse | SealedResponse> =>
  sealer ? { sealed: await sealer.seal(JSON.stringify(stored)) } : stored;

/** The answer a record holds, opened with the request's sealer when it was sealed. */
export const opened = async (stored: StoredResponse | SealedResponse, sealer: Sealer | undefined): Promise<StoredResponse> => {
  if (!("sealed" in stored)) return stored;
  if (!sealer) throw new Error("a sealed idempotency record met a request without its sealer");
  return JSON.parse(await sealer.open(stored.sealed)) as StoredResponse;
};

const JSON_HEADERS = { "content-type": "application/json" };

export const replayResponse = (stored: StoredResponse): Response => {
  const [body, headers] =
    "body" in stored
      ? [stored.body, stored.headers ?? JSON_HEADERS]
      : "composite" in stored
        ? [renderComposite(stored.composite, stored.elements), JSON_HEADERS]
        : [renderResource(stored.resource, rowFromSnapshot(stored.resource, stored.row)), JSON_HEADERS];
  return new Response(body, { status: stored.status, headers: { ...headers, "Idempotent-Replayed": "true" } });
};

// Set per request by the layers around the handler; a replay gets its own.
const NOT_STORED_HEADERS = new Set(["request-id", "content-length", "date", "set-cookie", "server-timing"]);

/** A finished response, as kept for replay. */
export const renderedOf = async (res: Response): Promise<StoredResponse & { body: string }> => {
  const headers: Record<string, string> = {};
  for (const [name, value] of res.headers) if (!NOT_STORED_HEADERS.has(name)) headers[name] = value;
  return { status: res.status, headers, body: await res.clone().text() };
};
