/**
 * Limits set by the request: the `limit` option of `request`, of a `batch`
 * item, of `refund` and of `reset`, for a resource the config does not
 * define, in a namespace that allows it (`request_limits: true`). The
 * client checks the obvious mistakes (the kind, the types, burst and count
 * not positive integers, a period that is no duration) and renders the
 * option as the agent's `limit` field; the agent does the real validation
 * and answers `bad_limit` for what it refuses.
 */
import { badRequest } from "./errors";

/** A gcra limit: a bucket of `burst` tokens, refilled with `count` tokens every `period`. */
export interface GcraLimit {
  kind: "gcra";
  /** The bucket's size: the most one request may ask for (an integer ≥ 1). */
  burst: number;
  /** Tokens refilled per `period` (an integer ≥ 1). */
  count: number;
  /** A duration string ("1s", "250ms", "1h30m"), or milliseconds (sent as "1500ms"). */
  period: string | number;
}

/** A tiers limit in the compact syntax: groups of limit,window,active,cooldown (seconds). */
export interface TiersLimit {
  kind: "tiers";
  tiers: string;
}

/** A limit set by the request. */
export type Limit = GcraLimit | TiersLimit;

const FIELDS: Record<string, string[]> = {
  gcra: ["kind", "burst", "count", "period"],
  tiers: ["kind", "tiers"],
};

/** A value as a message shows it: JSON, but Infinity and NaN as such, and undefined. */
function show(v: unknown): string {
  return typeof v === "number" ? String(v) : JSON.stringify(v) ?? String(v);
}

function positiveInt(name: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
    throw badRequest(`${name}: must be an integer ≥ 1, got ${show(v)}`);
  }
  return v;
}

/** Milliseconds as a Go duration string: "1500ms"; a fraction of a millisecond in nanoseconds. */
function duration(name: string, v: unknown): string {
  if (typeof v === "string") {
    if (v === "") throw badRequest(`${name}: must be a duration ("1s", "250ms") or milliseconds, got ""`);
    return v;
  }
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
    throw badRequest(`${name}: must be a duration ("1s", "250ms") or a positive, finite number of milliseconds, got ${show(v)}`);
  }
  if (Number.isInteger(v)) return `${BigInt(v)}ms`;
  const ns = Math.round(v * 1e6);
  if (ns < 1) throw badRequest(`${name}: must be at least 1 ns, got ${v}`);
  return `${BigInt(ns)}ns`;
}

/**
 * The agent's `limit` field for the option `name` ("limit",
 * "batch[3].limit"), or undefined when it is not given. A mistake the
 * client can see throws `bad_request` naming the option's field.
 * @internal
 */
export function limitField(name: string, v: unknown): Record<string, unknown> | undefined {
  if (v === undefined) return undefined;
  const form = `{kind: "gcra", burst, count, period} or {kind: "tiers", tiers}`;
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    throw badRequest(`${name}: must be ${form}, got ${show(v)}`);
  }
  const o = v as Record<string, unknown>;
  const fields = typeof o.kind === "string" ? FIELDS[o.kind] : undefined;
  if (fields === undefined) {
    throw badRequest(`${name}.kind: must be "gcra" or "tiers", got ${show(o.kind)}`);
  }
  for (const k of Object.keys(o)) {
    if (!fields.includes(k) && o[k] !== undefined) throw badRequest(`${name}.${k}: not a field of a ${o.kind} limit (${form})`);
  }
  if (o.kind === "gcra") {
    return {
      kind: "gcra",
      burst: positiveInt(`${name}.burst`, o.burst),
      count: positiveInt(`${name}.count`, o.count),
      period: duration(`${name}.period`, o.period),
    };
  }
  if (typeof o.tiers !== "string") {
    throw badRequest(`${name}.tiers: must be a string of the compact tier syntax ("5,1,1,0"), got ${show(o.tiers)}`);
  }
  return { kind: "tiers", tiers: o.tiers };
}
