// Send fan-out through the real local queue: one campaign per audience size, timed from the send's
// 202 to its operation's completion, beside the storage floor (POST /bench/raw/fanout).
import { readFileSync } from "node:fs";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Messages handed to the send queue's consumer, from wrangler dev's one log line per delivered batch. */
const queueMessages = (logFile, fromByte) => {
  const text = readFileSync(logFile, "utf8").slice(fromByte);
  let messages = 0;
  let batches = 0;
  for (const match of text.matchAll(/QUEUE newsletter-send (\d+)\/(\d+)/g)) {
    messages += Number(match[2]);
    batches++;
  }
  return { messages, batches };
};

const logSize = (logFile) => readFileSync(logFile).length;

export const measureFanout = async ({ api, tokens, fanoutWorkspaces, audiences, log, logFile, timeoutSeconds }) => {
  const campaigns = [];
  const token = tokens[0];
  for (const audience of audiences) {
    const workspaceId = fanoutWorkspaces[audience];
    const ws = `/v1/workspaces/${workspaceId}`;
    const created = async (path, body) => {
      const res = await api("POST", `${ws}${path}`, { token, body });
      if (res.status !== 201 && res.status !== 202) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
      return res.body.data;
    };
    const newsletter = await created("/newsletters", { name: "Bench", from_email: "bench@bench.example" });
    const campaign = await created("/campaigns", { subject: `Fan-out ${audience}`, newsletter_id: newsletter.id });

    log(`fan-out to ${audience.toLocaleString("en")} recipients through the queue…`);
    const logFrom = logSize(logFile);
    const started = performance.now();
    const operation = await created(`/campaigns/${campaign.id}/send`, { integration_slug: "sandbox" });
    let current = operation;
    while (current.status === "queued" || current.status === "running") {
      if (performance.now() - started > timeoutSeconds * 1000) break;
      await sleep(200);
      current = (await api("GET", `${ws}/operations/${operation.id}`, { token })).body.data;
    }
    const wallSeconds = (performance.now() - started) / 1000;
    if (current.status !== "succeeded") {
      campaigns.push({ audience, status: current.status, progress: current.progress, wallSeconds, timedOut: wallSeconds >= timeoutSeconds });
      log(`  ${current.status} after ${wallSeconds.toFixed(1)} s: ${JSON.stringify(current.progress)}`);
      break;
    }
    // The server's own timestamps: from the send's acceptance to the last delivery recorded.
    const seconds = (Date.parse(current.completed_at) - Date.parse(current.created_at)) / 1000;
    // Messages of this send only: a queue batch may be logged a moment after the operation completes.
    await sleep(1500);
    const queue = queueMessages(logFile, logFrom);

    // The floor: the same rows inserted straight into D1 for a second draft campaign.
    const floorCampaign = await created("/campaigns", { subject: `Floor ${audience}`, newsletter_id: newsletter.id });
    const floorStarted = performance.now();
    const floor = await api("POST", "/bench/raw/fanout", { body: { workspace_id: workspaceId, campaign_id: floorCampaign.id } });
    const floorSeconds = (performance.now() - floorStarted) / 1000;
    if (floor.status !== 200 || floor.body.recipients !== audience) throw new Error(`fan-out floor: ${floor.status} ${JSON.stringify(floor.body)}`);

    const row = {
      audience,
      status: current.status,
      progress: current.progress,
      seconds,
      wallSeconds,
      recipientsPerSecond: current.progress.delivered / seconds,
      queueMessages: queue.messages,
      queueBatches: queue.batches,
      queueMessagesPer1000: (queue.messages / audience) * 1000,
      floor: {
        seconds: floorSeconds,
        recipientsPerSecond: floor.body.recipients / floorSeconds,
        statementsPer1000: (floor.body.statements / audience) * 1000,
      },
    };
    campaigns.push(row);
    log(
      `  ${row.recipientsPerSecond.toFixed(0)} recipients/s (${seconds.toFixed(1)} s, ${queue.messages} queue messages); floor ${row.floor.recipientsPerSecond.toFixed(0)} recipients/s`,
    );
  }
  const time = (audience) => campaigns.find((c) => c.audience === audience && c.status === "succeeded")?.seconds;
  const t10k = time(10_000);
  const t100k = time(100_000);
  return {
    status: "measured",
    campaigns,
    growth100kVs10k: t10k && t100k ? t100k / t10k : undefined,
  };
};
