import worker from "../../src/index";
import { baselines } from "./baselines";
import { benchEnv } from "./latency";

/**
 * The worker `npm run bench` serves: the deployed worker (src/index.ts) unchanged, plus the baseline
 * routes under `/bench/`. Only the harness builds it (with a config derived from wrangler.toml, see
 * bench/lib/wrangler.mjs), so the deployed bundle contains none of the baselines.
 */
export default {
  ...worker,
  fetch: (request, env, ctx) => {
    const { pathname } = new URL(request.url);
    // The baselines get the same (slowed) D1 as the API, so every ratio compares like with like.
    return pathname.startsWith("/bench/") ? baselines.fetch(request, benchEnv(env), ctx) : worker.fetch(request, benchEnv(env), ctx);
  },
  queue: (batch, env) => worker.queue(batch, benchEnv(env)),
  scheduled: (controller, env) => worker.scheduled(controller, benchEnv(env)),
} satisfies ExportedHandler<Env>;

// The Durable Object classes the deployed worker declares (wrangler.toml), served from this entry too.
export { ResendPacer } from "../../src/index";
