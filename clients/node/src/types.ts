// The options of the client and of its calls, and what the calls give back.
import type { ObolError } from "./errors";
import type { Limit } from "./limit";

/** Where warnings go: `console` by default. */
export interface Logger {
  warn(message: string): void;
}

export interface ClientOptions {
  /** The agent's Unix socket; exclusive with `url`. Default: see {@link defaultSocket}. */
  socket?: string;
  /** The agent's HTTP address, `http://127.0.0.1:7070` (a path prefixes every endpoint). */
  url?: string;
  /** One call, connecting included; past it, the call fails open. Default 20 ms; 1 to 60000. */
  timeoutMs?: number;
  /** After a timeout, decisions fail open at once, without asking, for this long. Default 100 ms; 0: never. */
  timeoutPauseMs?: number;
  /** Rejections become grants marked `killed`. Default: `OBOL_KILL_SWITCH` (1/true/0/false), else false. */
  killSwitch?: boolean;
  /** Default wait for `request` and `reserve`: a rejection is retried until granted or this is spent. Default 0. */
  maxWaitMs?: number;
  /** The first backoff step of `maxWaitMs` retries. Default 10 ms. */
  retryBaseMs?: number;
  /** The session's lease, renewed every third of it. Default 30000; 3 to 86400000. */
  sessionTtlMs?: number;
  /** Connections to the agent. Default 256. */
  maxSockets?: number;
  /** Idle connections are closed after this long. Default 10000. */
  idleMs?: number;
  /** Where the once-a-minute warnings go. Default `console`. */
  logger?: Logger;
  /** At most one warning per condition per interval. Default 60000. */
  logIntervalMs?: number;
  /** The environment read for OBOL_SOCKET, OBOL_KILL_SWITCH, XDG_RUNTIME_DIR. Default `process.env`. */
  env?: Record<string, string | undefined>;
}

/** The raw reply of a decision, with the agent's field names. */
export type RawReply = Record<string, unknown>;

/** A rate decision (`request`, `check`, a `batch` item). */
export interface Decision {
  /** Copies granted: 0 is a rejection. */
  granted: number;
  remaining: number;
  /** How long until a retry can succeed; -1: no wait will. 0 on a grant. */
  retryAfterMs: number;
  resetAfterMs: number;
  /** The agent could not answer: this is a grant of `minCopies`. */
  degraded: boolean;
  /** The kill switch turned a rejection into this grant. */
  killed: boolean;
  /** The resource is in shadow mode (the agent grants, and reports what it would have done). */
  shadow: boolean;
  /** Requests sent again while `maxWaitMs` waited. */
  retries: number;
  /** Every field of the agent's reply (empty when degraded). */
  reply: RawReply;
  /** `check` only: the IETF RateLimit-Policy and RateLimit fields, as the agent gave them. */
  rateLimitPolicy?: string;
  rateLimit?: string;
  /**
   * The settle ticket of a grant asked with `settleLater`, for `settle`.
   * Absent for a rejection, a degraded or killed grant, and without `settleLater`.
   */
  ticket?: string;
}

export interface RequestOptions {
  /** Copies asked (default 1; 0 is a peek). */
  copies?: number;
  /** Least copies that will do (default `copies`: all or nothing). */
  minCopies?: number;
  /** Retry a rejection until granted or this is spent (default: the client's `maxWaitMs`). */
  maxWaitMs?: number;
  /**
   * `request` only: ask for a settle ticket with the grant (`Decision.ticket`).
   * The copies asked are an estimate; `settle` charges the real cost once it is known.
   */
  settleLater?: boolean;
  /**
   * `request` only (`reserve` refuses it): the limit of a resource the
   * config does not define, in a namespace with `request_limits: true`.
   */
  limit?: Limit;
  signal?: AbortSignal;
}

/** What `settle` did. */
export interface Settlement {
  /** The real cost less the estimate: negative, given back; positive, charged past the limit. */
  charged: number;
  /** What a request of the key could get now. */
  remaining: number;
  /** The agent could not answer: nothing was charged. */
  degraded: boolean;
}

export interface CallOptions {
  signal?: AbortSignal;
}

/** The options of `refund` and `reset`. */
export interface LimitCallOptions extends CallOptions {
  /** The limit of a resource the config does not define, as its requests give it. */
  limit?: Limit;
}

/** One item of `batch`. */
export interface Need {
  resource: string;
  domain: string;
  copies?: number;
  minCopies?: number;
  /** The limit of a resource the config does not define. */
  limit?: Limit;
}

/** One result of `batch`: a decision or the error of that item. */
export type BatchResult = { decision: Decision; error?: undefined } | { decision?: undefined; error: ObolError };

export interface Stats {
  calls: number;
  degraded: number;
  killed: number;
  retries: number;
  errors: number;
  sessions: number;
  pendingReleases: number;
}

export interface Admission {
  admitted: boolean;
  /** Give it to `complete` (absent when not admitted, or degraded). */
  ticket?: string;
  position?: number;
  window: number;
  degraded: boolean;
}

/** A use of copies held by the agent until released (or its session ends). */
export interface HoldInfo {
  id: string;
  resource: string;
  domain: string;
  granted: number;
  degraded: boolean;
  killed: boolean;
  reply: RawReply;
}
