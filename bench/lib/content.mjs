// Campaign content: what rendering costs. (1) µs per message for the 20 KB, five-variable template
// (bench/worker/bench.content.ts), timed by the client as POST /bench/render?n=N minus n=0, the median
// of rounds; (2) a 100,000-recipient sandbox send with that template beside the same send with no
// content, in the same run, as a ratio (target: at most 1.5).
import { median, poster, waitForOperation } from "./util.mjs";

const timed = async (fn) => {
  const started = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - started };
};

export const measureContent = async ({ api, token, workspaceId, audience, rounds, renderMessages, timeoutSeconds, log }) => {
  const template = (await api("GET", "/bench/content-template")).body;
  // 1. Render cost per message.
  const perMessage = [];
  for (let round = 0; round < rounds; round++) {
    const empty = await timed(() => api("POST", "/bench/render?n=0"));
    const full = await timed(() => api("POST", `/bench/render?n=${renderMessages}`));
    if (full.value.status !== 200) throw new Error(`render: ${full.value.status} ${JSON.stringify(full.value.body)}`);
    perMessage.push(((full.ms - empty.ms) * 1000) / renderMessages);
  }
  const renderMicroseconds = median(perMessage);
  log(`render: ${renderMicroseconds.toFixed(1)} µs/message (median of ${rounds}, ${renderMessages} messages each)`);

  // 2. The same audience sent with and without content, alternating, `rounds` times each.
  const ws = `/v1/workspaces/${workspaceId}`;
  const created = poster(api, ws, token);
  const newsletter = await created("/newsletters", { name: "Bench Weekly", from_email: "bench@bench.example", address: "1 Bench Street" });
  const sendSeconds = async (content) => {
    const campaign = await created("/campaigns", { newsletter_id: newsletter.id, ...content });
    const operation = await created(`/campaigns/${campaign.id}/send`, { integration_slug: "sandbox" });
    const started = performance.now();
    const current = await waitForOperation({ api, ws, token, operation, started, timeoutSeconds });
    if (current.status === "queued" || current.status === "running") throw new Error(`send still ${current.status} after ${timeoutSeconds} s`);
    if (current.status !== "succeeded" || current.progress.delivered !== audience) throw new Error(`send ended ${JSON.stringify(current)}`);
    return (Date.parse(current.completed_at) - Date.parse(current.created_at)) / 1000;
  };
  const plain = [];
  const rich = [];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 ? ["rich", "plain"] : ["plain", "rich"];
    for (const kind of order) {
      const seconds = kind === "plain" ? await sendSeconds({ subject: `Plain #${round}` }) : await sendSeconds(template);
      (kind === "plain" ? plain : rich).push(seconds);
      log(`  ${audience.toLocaleString("en")} recipients, ${kind === "plain" ? "no content" : "20 KB template"}: ${seconds.toFixed(2)} s`);
    }
  }
  const ratio = median(rich) / median(plain);
  log(`send with content / without: ${ratio.toFixed(2)}× (target ≤ 1.5×)`);
  return {
    renderMicrosecondsPerMessage: renderMicroseconds,
    renderRounds: perMessage,
    audience,
    secondsWithoutContent: plain,
    secondsWithContent: rich,
    ratio,
    target: 1.5,
  };
};
