// Live sends through the resend integration against the local mock (bench/lib/mock-resend.mjs), at
// the mock's rate limit, with injected 500s and timeouts: time from the send's 202 to its operation's
// end beside the limit's floor (one request per 100 recipients at `rps`), the copies each recipient
// got as counted by the mock, and the 429s it answered.
import { poster, waitForOperation } from "./util.mjs";


export const measureResend = async ({ api, token, workspaces, audiences, mock, rps, log, timeoutSeconds }) => {
  const results = [];
  for (const audience of audiences) {
    const ws = `/v1/workspaces/${workspaces[audience]}`;
    const created = poster(api, ws, token);
    const newsletter = await created("/newsletters", { name: "Bench", from_email: "bench@bench.example" });
    const campaign = await created("/campaigns", { subject: `Resend ${audience}`, newsletter_id: newsletter.id, html: "<p>Hello {{ subscriber.name }}</p>" });
    mock.reset();
    log(`live send to ${audience.toLocaleString("en")} recipients through Resend (mock at ${rps} req/s)…`);
    const started = performance.now();
    const startedAt = Date.now();
    const operation = await created(`/campaigns/${campaign.id}/send`, { integration_slug: "resend" });
    const current = await waitForOperation({ api, ws, token, operation, started, timeoutSeconds, everyMs: 200 });
    const seconds = (performance.now() - started) / 1000;
    const floorSeconds = Math.ceil(audience / 100) / rps;
    const copies = mock.copies();
    const timeline = mock.timeline();
    const slotMs = 1000 / rps;
    // Where the time goes: before the first request, the requests' own slots, idle time between
    // requests beyond one slot, and after the last request until the operation was seen ending.
    let idleMs = 0;
    const longGaps = [];
    for (let i = 1; i < timeline.length; i++) {
      const gap = timeline[i].at - timeline[i - 1].at;
      if (gap > slotMs) idleMs += gap - slotMs;
      if (gap > slotMs * 2) longGaps.push({ after: i, ms: gap, previous: timeline[i - 1].answer });
    }
    const breakdown = {
      firstRequestMs: mock.firstAt() === undefined ? null : mock.firstAt() - startedAt,
      slotsMs: timeline.length * slotMs,
      idleMs: Math.round(idleMs),
      afterLastMs: timeline.length > 0 && mock.firstAt() !== undefined ? Math.round(startedAt + seconds * 1000 - (mock.firstAt() + timeline.at(-1).at)) : null,
      longGaps,
    };
    const row = {
      audience,
      status: current.status,
      progress: current.progress,
      seconds,
      floorSeconds,
      ratio: seconds / floorSeconds,
      mock: { ...mock.stats },
      recipientsOnce: copies.once,
      recipientsDuplicated: copies.duplicated.length,
      breakdown,
      timeline,
    };
    results.push(row);
    log(
      `  ${current.status} in ${seconds.toFixed(1)} s (floor ${floorSeconds} s, ${row.ratio.toFixed(2)}x); ` +
        `${copies.once} recipients once, ${copies.duplicated.length} twice or more; mock: ${JSON.stringify(mock.stats)}`,
    );
    log(
      `  first request after ${breakdown.firstRequestMs} ms; ${timeline.length} slots ${breakdown.slotsMs} ms; idle between requests ` +
        `${breakdown.idleMs} ms; operation seen ended ${breakdown.afterLastMs} ms after the last request; long gaps: ${JSON.stringify(longGaps)}`,
    );
  }
  return results;
};
