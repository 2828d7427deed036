// The rate decisions: request and check, and the Decision they build.
import type { Client } from "./client";
import { badRequest } from "./errors";
import { headerString } from "./headers";
import { limitField } from "./limit";
import type { Reply } from "./transport";
import type { Decision, RawReply, RequestOptions } from "./types";
import { checkInt, checkName, counts, num } from "./util";

/** The Decision of an agent's reply; a rejection under the kill switch becomes a killed grant. */
export function decision(c: Client, reply: RawReply, copies: number): Decision {
  const d: Decision = {
    granted: num(reply.granted),
    remaining: num(reply.remaining),
    retryAfterMs: num(reply.retry_after_ms),
    resetAfterMs: num(reply.reset_after_ms),
    degraded: false,
    killed: false,
    shadow: reply.shadow === true,
    retries: 0,
    reply,
  };
  if (typeof reply.ticket === "string" && reply.ticket !== "" && d.granted > 0) d.ticket = reply.ticket;
  if (d.granted === 0 && copies > 0 && c.killSwitch) {
    d.granted = copies;
    d.killed = true;
    d.retryAfterMs = 0;
    c.killed();
  }
  return d;
}

/** The grant of `minCopies` given when the agent could not answer. */
export function degradedDecision(minCopies: number): Decision {
  return { granted: minCopies, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, degraded: true, killed: false, shadow: false, retries: 0, reply: {} };
}

/** {@link Client.request}. */
export async function request(c: Client, resource: string, domain: string, opts: RequestOptions = {}): Promise<Decision> {
  checkName("resource", resource);
  checkName("domain", domain);
  const [copies, min] = counts(opts);
  const maxWait = opts.maxWaitMs === undefined ? c.defaultMaxWaitMs : checkInt("maxWaitMs", opts.maxWaitMs, 0, 86400000);
  if (opts.settleLater !== undefined && typeof opts.settleLater !== "boolean") {
    throw badRequest(`settleLater: must be a boolean, got ${JSON.stringify(opts.settleLater)}`);
  }
  const limit = limitField("limit", opts.limit);
  const body: Record<string, unknown> = { resource, domain, copies, min_copies: min };
  if (opts.settleLater) body.settle = true;
  if (limit) body.limit = limit;
  return c.retrying(maxWait, opts.signal, async () => {
    try {
      return decision(c, await c.call("POST", "/v1/request", body, opts.signal), copies);
    } catch (e) {
      c.failed(e);
      c.degrade(e);
      return degradedDecision(min);
    }
  });
}

/** {@link Client.check}. */
export async function check(c: Client, resource: string, domain: string, opts: { copies?: number; signal?: AbortSignal } = {}): Promise<Decision> {
  checkName("resource", resource);
  checkName("domain", domain);
  const [copies] = counts({ copies: opts.copies });
  const q = new URLSearchParams({ resource, domain });
  if (opts.copies !== undefined) q.set("copies", String(copies));
  try {
    const r: Reply = await c.call("GET", "/v1/check?" + q.toString(), undefined, opts.signal, true);
    const granted = r.status !== 429;
    const policy = headerString(r.headers["ratelimit-policy"]);
    const rl = headerString(r.headers["ratelimit"]);
    const ra = headerString(r.headers["retry-after"]);
    const rem = rl ? /;\s*r=(\d+)/.exec(rl) : null;
    const d = decision(c, { granted: granted ? copies : 0 }, copies);
    d.remaining = rem ? Number(rem[1]) : 0;
    if (!granted && !d.killed) d.retryAfterMs = ra !== undefined && /^\d+$/.test(ra) ? Number(ra) * 1000 : -1;
    d.rateLimitPolicy = policy;
    d.rateLimit = rl;
    return d;
  } catch (e) {
    c.failed(e);
    c.degrade(e);
    return degradedDecision(copies);
  }
}
