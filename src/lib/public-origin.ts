import { ApiError } from "../errors/api-error";

/**
 * The origin of every link the service puts in mail (PUBLIC_BASE_URL; the contract's default, a local
 * one), as `scheme://host[:port]`; or, for a value that is not an http(s) origin, what is wrong with
 * it. A path would be lost (the service answers its links at the origin's root), and a query or a
 * fragment would swallow the link's own path.
 */
export const publicOrigin = (env: Pick<Env, "PUBLIC_BASE_URL">): { origin: string } | { problem: string } => {
  const value = env.PUBLIC_BASE_URL || "http://localhost:8787";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { problem: `PUBLIC_BASE_URL (${value}) is not a URL: set it to the origin the service is reached at, such as https://news.example.com` };
  }
  const extra =
    url.protocol !== "https:" && url.protocol !== "http:"
      ? "is not an http(s) URL"
      : url.username || url.password
        ? "carries user info"
        : url.pathname !== "/" || url.search || url.hash || value.endsWith("?") || value.endsWith("#")
          ? "has a path, query or fragment (the service answers its links, /u/…, at the origin's root)"
          : undefined;
  if (extra) return { problem: `PUBLIC_BASE_URL (${value}) ${extra}: set it to the origin alone, such as ${url.protocol === "http:" ? "http" : "https"}://${url.host || "news.example.com"}` };
  return { origin: url.origin };
};

/** The origin of every link the service puts in mail; a PUBLIC_BASE_URL that is not one is a 503 `configuration_error`. */
export const publicBaseUrl = (env: Pick<Env, "PUBLIC_BASE_URL">): string => {
  const found = publicOrigin(env);
  if ("problem" in found) throw new ApiError("configuration_error", `${found.problem}; until then no message can carry a working unsubscribe link`);
  return found.origin;
};
