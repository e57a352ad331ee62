import type { Db } from "../db/client";
import type { IdempotentRequest } from "../idempotency/idempotency";
import type { CursorCodec } from "./cursor";
import type { Signer } from "./signing";

export const scopes = [
  "workspaces:read",
  "subscribers:read",
  "subscribers:write",
  "campaigns:read",
  "campaigns:write",
  "campaigns:send",
  "webhooks:read",
  "webhooks:write",
] as const;

export type Scope = (typeof scopes)[number];

export type CredentialMode = "test" | "live";

/** The caller, as resolved from the bearer token by the auth middleware. */
type Principal = {
  credentialId: string;
  mode: CredentialMode;
  scopes: readonly Scope[];
  workspaceIds: readonly string[];
};

export type AppEnv = {
  Bindings: Env;
  Variables: {
    requestId: string;
    db: Db;
    /** The idempotency-response KV namespace, its calls counted like D1's. */
    kv: KVNamespace;
    signer: Signer;
    cursors: CursorCodec;
    /** Set when the request carries a valid Idempotency-Key: `commit` records it with the write. */
    idempotency?: IdempotentRequest;
    /** A client-side problem worth a warning-level log line (e.g. a body cut off mid-way). */
    warning?: string;
    principal: Principal;
    /** Route template that matched (for logs), set once routing is known. */
    route?: string;
  };
};
