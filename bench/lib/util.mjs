// Small helpers every section uses.

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** `post(path, body)` under `ws` with `token`: the created resource's data, or an error naming the answer. */
export const poster = (api, ws, token) => async (path, body) => {
  const res = await api("POST", `${ws}${path}`, { token, body });
  if (res.status !== 201 && res.status !== 202) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.data;
};

/**
 * Polls an operation every `everyMs` until it is no longer queued or running, or `timeoutSeconds`
 * have passed since `started` (performance.now()); returns it as last seen.
 */
export const waitForOperation = async ({ api, ws, token, operation, started, timeoutSeconds, everyMs = 100 }) => {
  let current = operation;
  while (current.status === "queued" || current.status === "running") {
    if (performance.now() - started > timeoutSeconds * 1000) break;
    await sleep(everyMs);
    current = (await api("GET", `${ws}/operations/${operation.id}`, { token })).body.data;
  }
  return current;
};
