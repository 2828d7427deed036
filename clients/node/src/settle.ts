// The calls on counts already made: refund, settle and reset; and
// simulate, which makes none.
import type { Client } from "./client";
import { AgentUnavailableError, ClosedError, badRequest } from "./errors";
import { limitField } from "./limit";
import type { CallOptions, Decision, LimitCallOptions, RawReply, Settlement } from "./types";
import { MAX_COPIES, checkInt, checkName, num } from "./util";

/** {@link Client.refund}. */
export async function refund(c: Client, resource: string, domain: string, copies: number, opts: LimitCallOptions = {}): Promise<number> {
  checkName("resource", resource);
  checkName("domain", domain);
  checkInt("copies", copies, 1, MAX_COPIES);
  const limit = limitField("limit", opts.limit);
  const body: Record<string, unknown> = { resource, domain, copies };
  if (limit) body.limit = limit;
  try {
    const v = await c.call("POST", "/v1/refund", body, opts.signal);
    return num(v.remaining);
  } catch (e) {
    c.failed(e);
    c.degrade(e);
    return -1;
  }
}

/** {@link Client.settle}. */
export async function settle(c: Client, ticket: string | undefined | Decision, copies: number, opts: CallOptions = {}): Promise<Settlement> {
  if (c.closed) throw new ClosedError();
  const t = typeof ticket === "object" && ticket !== null ? ticket.ticket : ticket;
  if (t === undefined || t === null || t === "") return { charged: 0, remaining: 0, degraded: false };
  checkName("ticket", t);
  checkInt("copies", copies, 0, MAX_COPIES);
  try {
    const v = await c.call("POST", "/v1/settle", { ticket: t, copies }, opts.signal);
    if (!Number.isInteger(v.charged) || !Number.isInteger(v.remaining)) {
      throw new AgentUnavailableError(`unreadable settle reply: charged ${JSON.stringify(v.charged)}, remaining ${JSON.stringify(v.remaining)}`);
    }
    return { charged: v.charged, remaining: v.remaining, degraded: false };
  } catch (e) {
    c.failed(e);
    c.degrade(e);
    return { charged: 0, remaining: 0, degraded: true };
  }
}

/** {@link Client.reset}. */
export async function reset(c: Client, resource: string, domain: string, opts: LimitCallOptions = {}): Promise<void> {
  checkName("resource", resource);
  checkName("domain", domain);
  const limit = limitField("limit", opts.limit);
  const body: Record<string, unknown> = { resource, domain };
  if (limit) body.limit = limit;
  try {
    const v = await c.call("POST", "/v1/reset", body, opts.signal);
    if (v.reset !== true) throw new AgentUnavailableError(`unreadable reset reply: ${JSON.stringify(v).slice(0, 200)}`);
  } catch (e) {
    c.failed(e);
    const u = e as AgentUnavailableError;
    throw new AgentUnavailableError(`obol: reset of ${JSON.stringify(resource)} for ${JSON.stringify(domain)} not made: ${u.message}`, u.timeout);
  }
}

/** {@link Client.simulate}. */
export async function simulate(c: Client, resource: object, requests: object[], opts: CallOptions = {}): Promise<{ config: RawReply; decisions: RawReply[] }> {
  if (resource === null || typeof resource !== "object") throw badRequest("resource: must be a resource's config object");
  if (!Array.isArray(requests)) throw badRequest("requests: must be an array");
  return c.call("POST", "/v1/simulate", { resource, requests }, opts.signal);
}
