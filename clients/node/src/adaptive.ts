// The calls of adaptive resources (admit, complete) and of pacers (pace,
// observe).
import type { Client } from "./client";
import { badRequest } from "./errors";
import { type HeaderSource, remainingOf } from "./headers";
import type { Admission, CallOptions } from "./types";
import { checkInt, checkName, num, sleep } from "./util";

/** {@link Client.admit}. */
export async function admit(c: Client, resource: string, opts: CallOptions = {}): Promise<Admission> {
  checkName("resource", resource);
  try {
    const v = await c.call("POST", "/v1/admit", { resource }, opts.signal);
    return {
      admitted: v.admitted === true,
      ticket: typeof v.ticket === "string" ? v.ticket : undefined,
      position: typeof v.position === "number" ? v.position : undefined,
      window: num(v.window),
      degraded: false,
    };
  } catch (e) {
    c.failed(e);
    c.degrade(e);
    return { admitted: true, window: 0, degraded: true };
  }
}

/** {@link Client.complete}. */
export async function complete(c: Client, ticket: string | undefined | Admission, outcome: "success" | "backoff" = "success", opts: CallOptions = {}): Promise<number | undefined> {
  const t = typeof ticket === "object" && ticket !== null ? ticket.ticket : ticket;
  if (t === undefined) return undefined;
  checkName("ticket", t);
  if (outcome !== "success" && outcome !== "backoff") throw badRequest(`outcome: must be "success" or "backoff", got ${JSON.stringify(outcome)}`);
  try {
    const v = await c.call("POST", "/v1/complete", { ticket: t, outcome }, opts.signal);
    return num(v.window);
  } catch (e) {
    c.failed(e);
    return undefined;
  }
}

/** {@link Client.admitted}. */
export async function admitted<T>(c: Client, resource: string, fn: () => Promise<T> | T, opts: CallOptions = {}): Promise<{ admitted: true; value: T; degraded: boolean } | { admitted: false; window: number }> {
  const a = await c.admit(resource, opts);
  if (!a.admitted) return { admitted: false, window: a.window };
  let value: T;
  try {
    value = await fn();
  } catch (e) {
    await c.complete(a, "backoff").catch(() => undefined);
    throw e;
  }
  await c.complete(a, "success", opts);
  return { admitted: true, value, degraded: a.degraded };
}

/** {@link Client.pace}. */
export async function pace(c: Client, resource: string, opts: CallOptions = {}): Promise<number> {
  checkName("resource", resource);
  try {
    const v = await c.call("POST", "/v1/pace", { resource }, opts.signal);
    return Math.max(0, num(v.wait_ms));
  } catch (e) {
    c.failed(e);
    c.degrade(e);
    return 0;
  }
}

/** {@link Client.paceWait}. */
export async function paceWait(c: Client, resource: string, opts: CallOptions = {}): Promise<void> {
  const ms = await c.pace(resource, opts);
  if (ms > 0) await sleep(ms, opts.signal);
}

/** {@link Client.observe}. */
export async function observe(c: Client, resource: string, status: number, headers?: HeaderSource | number, opts: CallOptions = {}): Promise<void> {
  checkName("resource", resource);
  checkInt("status", status, 100, 599);
  const body: Record<string, unknown> = { resource, status };
  const rem = typeof headers === "number" ? checkInt("remaining", headers, 0, Number.MAX_SAFE_INTEGER) : remainingOf(headers);
  if (rem !== undefined) body.remaining = rem;
  try {
    await c.call("POST", "/v1/observe", body, opts.signal);
  } catch (e) {
    c.failed(e);
  }
}
