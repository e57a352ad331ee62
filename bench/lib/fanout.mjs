// Send fan-out through the real local queue: per audience size, rounds of one campaign send (timed
// from the send's 202 to its operation's completion) followed by the storage floor for the same
// audience (POST /bench/raw/fanout); each figure is the median round.
import { readFileSync } from "node:fs";
import { median, poster, sleep, waitForOperation } from "./util.mjs";



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

export const measureFanout = async ({ api, tokens, fanoutWorkspaces, audiences, rounds, log, logFile, timeoutSeconds }) => {
  const campaigns = [];
  const token = tokens[0];
  for (const audience of audiences) {
    const workspaceId = fanoutWorkspaces[audience];
    const ws = `/v1/workspaces/${workspaceId}`;
    const created = poster(api, ws, token);
    const newsletter = await created("/newsletters", { name: "Bench", from_email: "bench@bench.example" });
    const roundsHere = rounds;
    const sends = [];
    const floors = [];
    let failed;

    for (let round = 0; round < roundsHere && !failed; round++) {
      const campaign = await created("/campaigns", { subject: `Fan-out ${audience} #${round}`, newsletter_id: newsletter.id });
      log(`fan-out to ${audience.toLocaleString("en")} recipients through the queue (round ${round + 1} of ${roundsHere})…`);
      const logFrom = logSize(logFile);
      const started = performance.now();
      const operation = await created(`/campaigns/${campaign.id}/send`, { integration_slug: "sandbox" });
      const current = await waitForOperation({ api, ws, token, operation, started, timeoutSeconds });
      const wallSeconds = (performance.now() - started) / 1000;
      if (current.status !== "succeeded" || current.progress.delivered !== audience) {
        failed = { audience, status: current.status, progress: current.progress, wallSeconds, timedOut: wallSeconds >= timeoutSeconds };
        log(`  ${current.status} after ${wallSeconds.toFixed(1)} s: ${JSON.stringify(current.progress)}`);
        break;
      }
      // The server's own timestamps: from the send's acceptance to the last delivery recorded.
      const seconds = (Date.parse(current.completed_at) - Date.parse(current.created_at)) / 1000;
      // Messages of this send only: a queue batch may be logged a moment after the operation completes.
      await sleep(1500);
      sends.push({ seconds, wallSeconds, progress: current.progress, queue: queueMessages(logFile, logFrom) });

      // The floor: the same rows inserted straight into D1 for a second draft campaign.
      const floorCampaign = await created("/campaigns", { subject: `Floor ${audience} #${round}`, newsletter_id: newsletter.id });
      const floorStarted = performance.now();
      const floor = await api("POST", "/bench/raw/fanout", { body: { workspace_id: workspaceId, campaign_id: floorCampaign.id } });
      const floorSeconds = (performance.now() - floorStarted) / 1000;
      if (floor.status !== 200 || floor.body.recipients !== audience) throw new Error(`fan-out floor: ${floor.status} ${JSON.stringify(floor.body)}`);
      floors.push({ seconds: floorSeconds, statements: floor.body.statements });
      log(`  ${(audience / seconds).toFixed(0)} recipients/s (${seconds.toFixed(2)} s); floor ${(audience / floorSeconds).toFixed(0)} recipients/s`);
    }
    if (failed) {
      campaigns.push(failed);
      break;
    }

    const seconds = median(sends.map((s) => s.seconds));
    const floorSeconds = median(floors.map((f) => f.seconds));
    const queue = sends[0].queue;
    const row = {
      audience,
      status: "succeeded",
      rounds: roundsHere,
      progress: sends[0].progress,
      seconds,
      secondsPerRound: sends.map((s) => s.seconds),
      recipientsPerSecond: audience / seconds,
      queueMessages: queue.messages,
      queueBatches: queue.batches,
      queueMessagesPer1000: (queue.messages / audience) * 1000,
      floor: {
        seconds: floorSeconds,
        secondsPerRound: floors.map((f) => f.seconds),
        recipientsPerSecond: audience / floorSeconds,
        statementsPer1000: (floors[0].statements / audience) * 1000,
      },
    };
    campaigns.push(row);
    if (roundsHere > 1) {
      log(`  median of ${roundsHere}: ${row.recipientsPerSecond.toFixed(0)} recipients/s; floor ${row.floor.recipientsPerSecond.toFixed(0)} recipients/s`);
    }
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
