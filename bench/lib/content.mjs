// Campaign content: what rendering costs. (1) µs per message for the 20 KB, five-variable template
// (bench/worker/bench.content.ts), timed by the client as POST /bench/render?n=N minus n=0, the median
// of rounds; (2) a 100,000-recipient sandbox send with that template beside the same send with no
// content, in the same run, as a ratio (target: at most 1.5).
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

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
  const created = async (path, body) => {
    const res = await api("POST", `${ws}${path}`, { token, body });
    if (res.status !== 201 && res.status !== 202) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body.data;
  };
  const newsletter = await created("/newsletters", { name: "Bench Weekly", from_email: "bench@bench.example", address: "1 Bench Street" });
  const sendSeconds = async (content) => {
    const campaign = await created("/campaigns", { newsletter_id: newsletter.id, ...content });
    const operation = await created(`/campaigns/${campaign.id}/send`, { integration_slug: "sandbox" });
    const started = performance.now();
    let current = operation;
    while (current.status === "queued" || current.status === "running") {
      if (performance.now() - started > timeoutSeconds * 1000) throw new Error(`send still ${current.status} after ${timeoutSeconds} s`);
      await sleep(100);
      current = (await api("GET", `${ws}/operations/${operation.id}`, { token })).body.data;
    }
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
