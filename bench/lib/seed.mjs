// Builds the benchmark workspace as one SQL file: a workspace, a pool of credentials and N subscribers,
// in multi-row INSERTs (the subscriber_tags rows come from the migration's triggers, as in production).
import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { monotonicFactory } from "ulidx";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const SCOPES = ["workspaces:read", "subscribers:read", "subscribers:write", "campaigns:read", "campaigns:write", "campaigns:send", "webhooks:read", "webhooks:write"];
// D1 caps one statement at 100 KB of SQL; a row here is about 200 bytes.
const ROWS_PER_INSERT = 300;

const token = () => `svc_test_${Array.from(randomBytes(40), (b) => BASE62[b % 62]).join("")}`;
const quote = (value) => (value === null ? "null" : typeof value === "number" ? String(value) : `'${String(value).replaceAll("'", "''")}'`);

/** Subscriber i's status and tags: 85% active; "weekly" on half, "beta" on a tenth, "vip" on 1%. */
export const subscriberShape = (i) => {
  const status = [undefined, "unsubscribed", "bounced", "pending"][i % 20] ?? "active";
  const tags = [];
  if (i % 2 === 0) tags.push("weekly");
  if (i % 10 === 0) tags.push("beta");
  if (i % 100 === 0) tags.push("vip");
  return { status, tags };
};

/**
 * Writes the seed SQL to `file` and returns what the harness needs: the workspace id, the tokens with
 * their credential ids, and the subscriber ids. Subscriber ids are ULIDs one millisecond apart, oldest first.
 */
export const writeSeed = (file, { subscribers, credentials, fanoutAudiences = [], resendAudiences = [] }) => {
  const ulid = monotonicFactory();
  const now = Date.now();
  const workspaceId = `ws_${ulid(now - subscribers - 1000)}`;
  const lines = [`insert into workspaces (id, name, created_at) values (${quote(workspaceId)}, 'Benchmark workspace', ${now});`];
  const tokens = [];
  const credentialIds = [];
  for (let i = 0; i < credentials; i++) {
    const secret = token();
    const id = `cred_${ulid(now - 500)}`;
    tokens.push(secret);
    credentialIds.push(id);
    const hash = createHash("sha256").update(secret).digest("hex");
    lines.push(
      `insert into credentials (id, name, mode, token_hash, scopes, created_at, revoked_at) values (${quote(id)}, 'bench ${i}', 'test', ${quote(hash)}, ${quote(JSON.stringify(SCOPES))}, ${now}, null);`,
      `insert into credential_workspaces (credential_id, workspace_id) values (${quote(id)}, ${quote(workspaceId)});`,
    );
  }
  const ids = [];
  let values = [];
  const flush = () => {
    if (values.length === 0) return;
    lines.push(
      `insert into subscribers (id, workspace_id, email, email_key, name, status, tags, location, source, created_at, updated_at) values\n${values.join(",\n")};`,
    );
    values = [];
  };
  const addSubscribers = (workspace, count, shape, out) => {
    for (let i = 0; i < count; i++) {
      const at = now - count + i;
      const id = `sub_${ulid(at)}`;
      out?.push(id);
      const { status, tags } = shape(i);
      const email = `user${i}@bench.example`;
      values.push(
        `(${quote(id)}, ${quote(workspace)}, ${quote(email)}, ${quote(email)}, ${quote(`User ${i}`)}, ${quote(status)}, ${quote(JSON.stringify(tags))}, null, 'bench', ${at}, ${at})`,
      );
      if (values.length === ROWS_PER_INSERT) flush();
    }
    flush();
  };
  addSubscribers(workspaceId, subscribers, subscriberShape, ids);

  // One workspace per fan-out audience, every subscriber active: a campaign without a segment there
  // reaches exactly that many recipients. The first credential may access them.
  const fanoutWorkspaces = {};
  for (const audience of fanoutAudiences) {
    const id = `ws_${ulid(now - 400)}`;
    fanoutWorkspaces[audience] = id;
    lines.push(
      `insert into workspaces (id, name, created_at) values (${quote(id)}, 'Fan-out ${audience}', ${now});`,
      `insert into credential_workspaces (credential_id, workspace_id) values (${quote(credentialIds[0])}, ${quote(id)});`,
    );
    addSubscribers(id, audience, () => ({ status: "active", tags: [] }));
  }

  // Live sends through Resend (the mock): a live credential and one workspace per audience.
  const resendWorkspaces = {};
  let liveToken;
  if (resendAudiences.length > 0) {
    liveToken = token().replace("svc_test_", "svc_live_");
    const credentialId = `cred_${ulid(now - 450)}`;
    lines.push(
      `insert into credentials (id, name, mode, token_hash, scopes, created_at, revoked_at) values (${quote(credentialId)}, 'bench live', 'live', ${quote(createHash("sha256").update(liveToken).digest("hex"))}, ${quote(JSON.stringify(SCOPES))}, ${now}, null);`,
    );
    for (const audience of resendAudiences) {
      const id = `ws_${ulid(now - 300)}`;
      resendWorkspaces[audience] = id;
      lines.push(
        `insert into workspaces (id, name, created_at) values (${quote(id)}, 'Resend ${audience}', ${now});`,
        `insert into credential_workspaces (credential_id, workspace_id) values (${quote(credentialId)}, ${quote(id)});`,
      );
      addSubscribers(id, audience, () => ({ status: "active", tags: [] }));
    }
  }
  writeFileSync(file, `${lines.join("\n")}\n`);
  return { workspaceId, tokens, credentialIds, subscriberIds: ids, fanoutWorkspaces, resendWorkspaces, liveToken };
};
