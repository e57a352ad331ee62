import worker from "../../src/index";
import { baselines } from "./baselines";

/**
 * The worker `npm run bench` serves: the deployed worker (src/index.ts) unchanged, plus the baseline
 * routes under `/bench/`. Only the harness builds it (with a config derived from wrangler.toml, see
 * bench/lib/wrangler.mjs), so the deployed bundle contains none of the baselines.
 */
export default {
  ...worker,
  fetch: (request, env, ctx) => {
    const { pathname } = new URL(request.url);
    return pathname.startsWith("/bench/") ? baselines.fetch(request, env, ctx) : worker.fetch(request, env, ctx);
  },
} satisfies ExportedHandler<Env>;
