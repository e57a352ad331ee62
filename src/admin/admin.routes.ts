import { createRoute } from "@hono/zod-openapi";
import { bodyErrorResponses, errorResponse, operatorErrorResponses, operatorWriteErrorResponses, replayedHeader, requestIdHeader } from "../errors/openapi";
import { IdempotencyHeaders, operatorIdempotency } from "../middleware/idempotency";
import { jsonBody } from "../middleware/request-context";
import { NoQuery, operationIdOf, routeName } from "../lib/route";
import { dataResponse, noBody, pageEnvelope } from "../lib/schemas";
import { WorkspaceSchema } from "../workspaces/workspaces.schemas";
import { WorkspaceParams } from "../lib/schemas";
import {
  CreateCredentialBody,
  CreateWorkspaceBody,
  CredentialParams,
  CredentialSchema,
  CredentialWithTokenSchema,
  ListCredentialsQuery,
  ListWorkspacesQuery,
} from "./admin.schemas";

const security = [{ adminToken: [] }];
/**
 * The route's name for the access log, then the body gate (after operatorAuth): a body refused
 * (400, 413, 415) is logged under the route it was sent to.
 */
const named = (method: string, path: string) => [routeName(method, path), jsonBody] as const;
const description = "Operator API: `Authorization: Bearer <ADMIN_TOKEN>`. Answers 404 when ADMIN_TOKEN is not configured.";

export const createWorkspaceRoute = createRoute({
  method: "post",
  path: "/admin/workspaces",
  middleware: [...named("post", "/admin/workspaces"), operatorIdempotency] as const,
  tags: ["Operator"],
  summary: "Create a workspace",
  operationId: operationIdOf("Create a workspace"),
  description,
  security,
  request: { query: NoQuery, headers: IdempotencyHeaders, body: { required: true, content: { "application/json": { schema: CreateWorkspaceBody } } } },
  responses: {
    ...operatorWriteErrorResponses,
    201: { ...dataResponse("The workspace", WorkspaceSchema), headers: { ...requestIdHeader, ...replayedHeader } },
  },
});

export const createCredentialRoute = createRoute({
  method: "post",
  path: "/admin/credentials",
  middleware: [...named("post", "/admin/credentials"), operatorIdempotency] as const,
  tags: ["Operator"],
  summary: "Create a credential",
  operationId: operationIdOf("Create a credential"),
  description: `${description} The token is in this response only; store it.`,
  security,
  request: { query: NoQuery, headers: IdempotencyHeaders, body: { required: true, content: { "application/json": { schema: CreateCredentialBody } } } },
  responses: {
    ...operatorWriteErrorResponses,
    400: errorResponse(["validation_failed", "invalid_json", "resource_missing"]),
    201: { ...dataResponse("The credential and its token", CredentialWithTokenSchema), headers: { ...requestIdHeader, ...replayedHeader } },
  },
});

export const revokeCredentialRoute = createRoute({
  method: "delete",
  path: "/admin/credentials/{credential_id}",
  middleware: [...named("delete", "/admin/credentials/{credential_id}")] as const,
  tags: ["Operator"],
  summary: "Revoke a credential",
  operationId: operationIdOf("Revoke a credential"),
  description: `${description} Revoked tokens answer 401 invalid_credential (other Cloudflare locations may take up to 60 s to notice).`,
  security,
  request: { params: CredentialParams, query: NoQuery, body: noBody },
  responses: {
    ...operatorErrorResponses,
    ...bodyErrorResponses,
    400: errorResponse(["validation_failed", "invalid_json"]),
    200: { ...dataResponse("The revoked credential", CredentialSchema), headers: requestIdHeader },
  },
});

export const listCredentialsRoute = createRoute({
  method: "get",
  path: "/admin/credentials",
  middleware: [...named("get", "/admin/credentials")] as const,
  tags: ["Operator"],
  summary: "List credentials",
  operationId: operationIdOf("List credentials"),
  description: `${description} Newest first, revoked ones included (with \`revoked_at\`); never a token. With \`workspace_id\`, those that may access that workspace: the one to revoke when a token leaks.`,
  security,
  request: { query: ListCredentialsQuery },
  responses: {
    ...operatorErrorResponses,
    400: errorResponse(["validation_failed", "invalid_cursor"]),
    200: {
      description: "A page of credentials",
      headers: requestIdHeader,
      content: { "application/json": { schema: pageEnvelope(CredentialSchema) } },
    },
  },
});

export const getCredentialRoute = createRoute({
  method: "get",
  path: "/admin/credentials/{credential_id}",
  middleware: [...named("get", "/admin/credentials/{credential_id}")] as const,
  tags: ["Operator"],
  summary: "Retrieve a credential",
  operationId: operationIdOf("Retrieve a credential"),
  description: `${description} Never the token.`,
  security,
  request: { params: CredentialParams, query: NoQuery },
  responses: {
    ...operatorErrorResponses,
    200: { ...dataResponse("The credential", CredentialSchema), headers: requestIdHeader },
  },
});

export const listWorkspacesRoute = createRoute({
  method: "get",
  path: "/admin/workspaces",
  middleware: [...named("get", "/admin/workspaces")] as const,
  tags: ["Operator"],
  summary: "List every workspace",
  operationId: operationIdOf("List every workspace"),
  description: `${description} Every workspace of the deployment, newest first.`,
  security,
  request: { query: ListWorkspacesQuery },
  responses: {
    ...operatorErrorResponses,
    400: errorResponse(["validation_failed", "invalid_cursor"]),
    200: {
      description: "A page of workspaces",
      headers: requestIdHeader,
      content: { "application/json": { schema: pageEnvelope(WorkspaceSchema) } },
    },
  },
});

export const getWorkspaceRoute = createRoute({
  method: "get",
  path: "/admin/workspaces/{workspace_id}",
  middleware: [...named("get", "/admin/workspaces/{workspace_id}")] as const,
  tags: ["Operator"],
  summary: "Retrieve any workspace",
  operationId: operationIdOf("Retrieve any workspace"),
  description,
  security,
  request: { params: WorkspaceParams, query: NoQuery },
  responses: {
    ...operatorErrorResponses,
    200: { ...dataResponse("The workspace", WorkspaceSchema), headers: requestIdHeader },
  },
});
