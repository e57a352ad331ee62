import type { Db } from "../db/client";
import type { CursorCodec } from "./cursor";

export const scopes = [
  "workspaces:read",
  "subscribers:read",
  "subscribers:write",
  "campaigns:read",
  "campaigns:write",
  "campaigns:send",
] as const;

export type Scope = (typeof scopes)[number];

export type CredentialMode = "test" | "live";

/** The caller, as resolved from the bearer token by the auth middleware. */
export type Principal = {
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
    cursors: CursorCodec;
    principal: Principal;
    /** Route template that matched (for logs), set once routing is known. */
    route?: string;
  };
};
