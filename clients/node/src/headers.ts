// Reading HTTP headers: the RateLimit fields of the agent's checks and of
// the replies a pacer observes.

export function headerString(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(", ") : v;
}

/** Headers as `fetch` gives them (`Headers`), or as node:http does (a plain object). */
export type HeaderSource = { get(name: string): string | null } | Record<string, string | string[] | undefined> | undefined;

function getHeader(h: HeaderSource, name: string): string | undefined {
  if (!h) return undefined;
  if (typeof (h as { get?: unknown }).get === "function") return (h as { get(n: string): string | null }).get(name) ?? undefined;
  const rec = h as Record<string, string | string[] | undefined>;
  for (const k of Object.keys(rec)) {
    if (k.toLowerCase() === name) {
      const v = rec[k];
      return Array.isArray(v) ? v[0] : v;
    }
  }
  return undefined;
}

/** The remaining count of an API's reply headers, or undefined; malformed values are skipped. */
export function remainingOf(h: HeaderSource): number | undefined {
  const rl = getHeader(h, "ratelimit");
  if (rl) {
    const m = /(?:^|;)\s*r=(\d+)/.exec(rl);
    if (m) return Number(m[1]);
  }
  for (const name of ["ratelimit-remaining", "x-ratelimit-remaining"]) {
    const v = getHeader(h, name)?.trim();
    if (v && /^\d+$/.test(v)) return Number(v);
  }
  return undefined;
}
