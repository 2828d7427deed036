import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { AgentUnavailableError, ClosedError, Codes, ObolError, badRequest, errorFor } from "./errors";
import { Limit, limitField } from "./limit";
import { Reply, Transport, abortReason, now } from "./transport";

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

const DEFAULTS = {
  timeoutMs: 20,
  timeoutPauseMs: 100,
  retryBaseMs: 10,
  sessionTtlMs: 30000,
  maxSockets: 256,
  idleMs: 10000,
  logIntervalMs: 60000,
};

/**
 * The agent's default socket, the rule the agent itself follows:
 * `$OBOL_SOCKET`, else `$XDG_RUNTIME_DIR/obol.sock`, else
 * `/run/obol/obol.sock` when `/run/obol` exists, else `/tmp/obol-UID/obol.sock`.
 */
export function defaultSocket(env: Record<string, string | undefined> = process.env): string {
  if (env.OBOL_SOCKET) return env.OBOL_SOCKET;
  if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, "obol.sock");
  try {
    if (fs.statSync("/run/obol").isDirectory()) return "/run/obol/obol.sock";
  } catch {
    // not there
  }
  const uid = typeof process.getuid === "function" ? process.getuid() : os.userInfo().uid;
  return `/tmp/obol-${uid}/obol.sock`;
}

function parseBoolEnv(name: string, v: string): boolean {
  switch (v.toLowerCase()) {
    case "1":
    case "t":
    case "true":
      return true;
    case "0":
    case "f":
    case "false":
      return false;
  }
  throw badRequest(`${name}: must be 1, true, 0 or false, got ${JSON.stringify(v)}`);
}

function checkInt(name: string, v: unknown, min: number, max: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw badRequest(`${name}: must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return v;
}

function checkName(name: string, v: unknown): string {
  if (typeof v !== "string" || v === "") {
    throw badRequest(`${name}: must be a non-empty string, got ${JSON.stringify(v)}`);
  }
  return v;
}

const MAX_COPIES = 1_000_000_000;

function counts(o: { copies?: number; minCopies?: number }): [number, number] {
  const copies = o.copies === undefined ? 1 : checkInt("copies", o.copies, 0, MAX_COPIES);
  const min = o.minCopies === undefined ? copies : checkInt("minCopies", o.minCopies, 0, MAX_COPIES);
  if (min > copies) throw badRequest(`minCopies: must be at most copies (${copies}), got ${min}`);
  return [copies, min];
}

function num(v: unknown, d = 0): number {
  return typeof v === "number" && Number.isFinite(v) ? v : d;
}

/** A rate-limited log line: at most one per interval, with the count since the last. */
class LogGate {
  private last = -Infinity;
  private n = 0;
  allow(now: number, interval: number): number {
    this.n++;
    if (now - this.last < interval) return 0;
    this.last = now;
    const n = this.n;
    this.n = 0;
    return n;
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(abortReason(signal!));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * The agent's client. It does not connect until the first call; it is
 * safe to share across a process (every call is independent).
 */
export class Client {
  /** @internal */ readonly t: Transport;
  /** @internal */ readonly timeoutMs: number;
  /** @internal */ readonly sessionTtlMs: number;
  private readonly timeoutPauseMs: number;
  /** @internal */ readonly defaultMaxWaitMs: number;
  private readonly retryBaseMs: number;
  private readonly logger: Logger;
  private readonly logIntervalMs: number;
  private kill: boolean;
  private pausedUntil = 0;
  /** @internal */ closed = false;
  private readonly gates = { degraded: new LogGate(), killed: new LogGate(), middleware: new LogGate() };
  /** @internal */ readonly counters: Stats = { calls: 0, degraded: 0, killed: 0, retries: 0, errors: 0, sessions: 0, pendingReleases: 0 };
  private defaultSession?: Session;
  /** @internal */ readonly sessions = new Set<Session>();
  /** The socket the client talks to (undefined with `url`). */
  readonly socket?: string;

  constructor(opts: ClientOptions = {}) {
    if (opts === null || typeof opts !== "object") throw badRequest(`options: must be an object, got ${JSON.stringify(opts)}`);
    const env = opts.env ?? process.env;
    if (opts.socket !== undefined && opts.url !== undefined) {
      throw badRequest("socket and url: give one, not both");
    }
    if (opts.url !== undefined && (typeof opts.url !== "string" || !canParse(opts.url))) {
      throw badRequest(`url: must be http://host:port[/prefix], got ${JSON.stringify(opts.url)}`);
    }
    let socket: string | undefined;
    if (opts.url === undefined) {
      socket = opts.socket === undefined ? defaultSocket(env) : checkName("socket", opts.socket);
      if (socket === "off") throw badRequest("socket: OBOL_SOCKET is off (the agent serves no socket): give url");
    }
    this.socket = socket;
    this.timeoutMs = opts.timeoutMs === undefined ? DEFAULTS.timeoutMs : checkInt("timeoutMs", opts.timeoutMs, 1, 60000);
    this.timeoutPauseMs = opts.timeoutPauseMs === undefined ? DEFAULTS.timeoutPauseMs : checkInt("timeoutPauseMs", opts.timeoutPauseMs, 0, 3600000);
    this.defaultMaxWaitMs = opts.maxWaitMs === undefined ? 0 : checkInt("maxWaitMs", opts.maxWaitMs, 0, 86400000);
    this.retryBaseMs = opts.retryBaseMs === undefined ? DEFAULTS.retryBaseMs : checkInt("retryBaseMs", opts.retryBaseMs, 1, 60000);
    this.sessionTtlMs = opts.sessionTtlMs === undefined ? DEFAULTS.sessionTtlMs : checkInt("sessionTtlMs", opts.sessionTtlMs, 3, 86400000);
    const maxSockets = opts.maxSockets === undefined ? DEFAULTS.maxSockets : checkInt("maxSockets", opts.maxSockets, 1, 65536);
    const idleMs = opts.idleMs === undefined ? DEFAULTS.idleMs : checkInt("idleMs", opts.idleMs, 1, 3600000);
    this.logIntervalMs = opts.logIntervalMs === undefined ? DEFAULTS.logIntervalMs : checkInt("logIntervalMs", opts.logIntervalMs, 0, 86400000);
    this.logger = opts.logger ?? console;
    if (opts.killSwitch !== undefined) {
      if (typeof opts.killSwitch !== "boolean") throw badRequest(`killSwitch: must be a boolean, got ${JSON.stringify(opts.killSwitch)}`);
      this.kill = opts.killSwitch;
    } else {
      const v = env.OBOL_KILL_SWITCH;
      this.kill = v === undefined || v === "" ? false : parseBoolEnv("OBOL_KILL_SWITCH", v);
    }
    this.t = new Transport({ socket, url: opts.url, maxSockets, idleMs });
  }

  /** Turns the kill switch on or off at run time. */
  setKillSwitch(on: boolean): void {
    if (typeof on !== "boolean") throw badRequest(`killSwitch: must be a boolean, got ${JSON.stringify(on)}`);
    this.kill = on;
  }

  get killSwitch(): boolean {
    return this.kill;
  }

  /** The counters since the client was made (a copy). */
  stats(): Stats {
    let pending = 0;
    for (const s of this.sessions) pending += s.pendingCount();
    return { ...this.counters, pendingReleases: pending };
  }

  // ---- the call and its failure modes -------------------------------------

  /**
   * One call to the agent. Resolves with the parsed 2xx body (or the raw
   * reply when raw), throws an ObolError for a 4xx, and an
   * AgentUnavailableError when the agent could not answer.
   * @internal
   */
  async call(method: string, p: string, body?: unknown, signal?: AbortSignal, raw = false): Promise<any> {
    // timeoutMs runs from here: the call times out at this deadline,
    // whatever comes before the request is sent (a connection, a resend).
    const deadline = now() + this.timeoutMs;
    if (this.closed) throw new ClosedError();
    if (signal?.aborted) throw abortReason(signal);
    this.counters.calls++;
    if (this.timeoutPauseMs > 0 && Date.now() < this.pausedUntil) {
      throw new AgentUnavailableError(`an earlier call timed out: not asking for ${this.timeoutPauseMs} ms`);
    }
    let r: Reply;
    try {
      r = await this.t.call(method, p, body === undefined ? undefined : JSON.stringify(body), deadline, this.timeoutMs, signal);
    } catch (e) {
      if (e instanceof AgentUnavailableError && e.timeout) this.pausedUntil = Date.now() + this.timeoutPauseMs;
      throw e;
    }
    if (raw) {
      // /v1/check answers 204 (granted) or 429 (rejected); any other 2xx
      // is not the agent's, and a 429 with an error body is a cap.
      if (r.status === 204 || (r.status === 429 && !isAgentErrorBody(r.body))) return r;
      if (r.status >= 200 && r.status < 300) throw new AgentUnavailableError(`unexpected ${r.status} reply to a check`);
    }
    if (r.status >= 200 && r.status < 300) {
      try {
        const v = JSON.parse(r.body);
        if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
        return v;
      } catch (e) {
        throw new AgentUnavailableError(`unreadable ${r.status} reply: ${(e as Error).message}`);
      }
    }
    if (r.status >= 400 && r.status < 500) {
      throw apiError(r);
    }
    throw new AgentUnavailableError(`status ${r.status}${r.body ? ": " + r.body.slice(0, 200) : ""}`);
  }

  /** @internal counts and logs a failure to fail open. */
  degrade(err: unknown, n = 1): void {
    this.counters.degraded += n;
    const since = this.gates.degraded.allow(Date.now(), this.logIntervalMs);
    if (since > 0) {
      this.logger.warn(`obol: agent unavailable; failing open (${(err as Error).message}; ${since} degraded since the last warning)`);
    }
  }

  /** @internal */
  killed(): void {
    this.counters.killed++;
    const since = this.gates.killed.allow(Date.now(), this.logIntervalMs);
    if (since > 0) this.logger.warn(`obol: kill switch on: a rejection became a grant (${since} since the last warning)`);
  }

  /** @internal logs a client error the middleware let through. */
  middlewareError(err: unknown): void {
    const since = this.gates.middleware.allow(Date.now(), this.logIntervalMs);
    if (since > 0) this.logger.warn(`obol: middleware let a request through on a client error: ${(err as Error).message} (${since} since the last warning)`);
  }

  /** @internal: rethrows client errors, counted; returns for agent errors. */
  failed(e: unknown): void {
    if (e instanceof AgentUnavailableError) return;
    this.counters.errors++;
    throw e;
  }

  // ---- rate decisions -----------------------------------------------------

  private decision(reply: RawReply, copies: number): Decision {
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
    if (d.granted === 0 && copies > 0 && this.kill) {
      d.granted = copies;
      d.killed = true;
      d.retryAfterMs = 0;
      this.killed();
    }
    return d;
  }

  private degradedDecision(minCopies: number): Decision {
    return { granted: minCopies, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, degraded: true, killed: false, shadow: false, retries: 0, reply: {} };
  }

  /**
   * Asks for `copies` of a rate-limited resource for a domain
   * (`POST /v1/request`). Never throws for the agent's failures: they give
   * a degraded grant of `minCopies` (with no settle ticket).
   */
  async request(resource: string, domain: string, opts: RequestOptions = {}): Promise<Decision> {
    checkName("resource", resource);
    checkName("domain", domain);
    const [copies, min] = counts(opts);
    const maxWait = opts.maxWaitMs === undefined ? this.defaultMaxWaitMs : checkInt("maxWaitMs", opts.maxWaitMs, 0, 86400000);
    if (opts.settleLater !== undefined && typeof opts.settleLater !== "boolean") {
      throw badRequest(`settleLater: must be a boolean, got ${JSON.stringify(opts.settleLater)}`);
    }
    const limit = limitField("limit", opts.limit);
    const body: Record<string, unknown> = { resource, domain, copies, min_copies: min };
    if (opts.settleLater) body.settle = true;
    if (limit) body.limit = limit;
    return this.retrying(maxWait, opts.signal, async () => {
      try {
        return this.decision(await this.call("POST", "/v1/request", body, opts.signal), copies);
      } catch (e) {
        this.failed(e);
        this.degrade(e);
        return this.degradedDecision(min);
      }
    });
  }

  /**
   * The backoff loop of maxWaitMs: retry `i` sleeps the least of what is
   * left and jitter(retryBase·2^i) (uniform in ±25%), never less than the
   * agent's retry_after_ms; a rejection no wait within what is left can
   * turn into a grant returns at once.
   * @internal
   */
  async retrying<T extends { granted: number; retries: number; retryAfterMs?: number }>(
    maxWait: number,
    signal: AbortSignal | undefined,
    once: () => Promise<T>,
  ): Promise<T> {
    if (maxWait === 0) return once();
    const start = Date.now();
    let d = await once();
    for (let i = 0; d.granted === 0 && maxWait > 0; i++) {
      const left = maxWait - (Date.now() - start);
      const ra = d.retryAfterMs ?? 0;
      if (left <= 0 || ra < 0 || ra > left) break;
      const step = this.retryBaseMs * 2 ** Math.min(i, 30);
      const jittered = step - step / 4 + Math.random() * (step / 2);
      await sleep(Math.max(ra, Math.min(left, jittered)), signal);
      this.counters.retries++;
      const retries = d.retries + 1;
      d = await once();
      d.retries = retries;
    }
    return d;
  }

  /**
   * One decision through `GET /v1/check`, the call the middleware makes:
   * all or nothing, with the IETF RateLimit fields.
   */
  async check(resource: string, domain: string, opts: { copies?: number; signal?: AbortSignal } = {}): Promise<Decision> {
    checkName("resource", resource);
    checkName("domain", domain);
    const [copies] = counts({ copies: opts.copies });
    const q = new URLSearchParams({ resource, domain });
    if (opts.copies !== undefined) q.set("copies", String(copies));
    try {
      const r: Reply = await this.call("GET", "/v1/check?" + q.toString(), undefined, opts.signal, true);
      const granted = r.status !== 429;
      const policy = headerString(r.headers["ratelimit-policy"]);
      const rl = headerString(r.headers["ratelimit"]);
      const ra = headerString(r.headers["retry-after"]);
      const rem = rl ? /;\s*r=(\d+)/.exec(rl) : null;
      const d = this.decision({ granted: granted ? copies : 0 }, copies);
      d.remaining = rem ? Number(rem[1]) : 0;
      if (!granted && !d.killed) d.retryAfterMs = ra !== undefined && /^\d+$/.test(ra) ? Number(ra) * 1000 : -1;
      d.rateLimitPolicy = policy;
      d.rateLimit = rl;
      return d;
    } catch (e) {
      this.failed(e);
      this.degrade(e);
      return this.degradedDecision(copies);
    }
  }

  /**
   * Many decisions in few calls (`POST /v1/batch`, at most 1000 items and
   * under 64 KiB a call; longer lists are split, in order). Items the
   * client refuses get their error without being sent. No retry.
   */
  async batch(needs: Need[], opts: CallOptions = {}): Promise<BatchResult[]> {
    if (!Array.isArray(needs)) throw badRequest(`batch: must be an array of {resource, domain, copies?, minCopies?, limit?}, got ${JSON.stringify(needs)}`);
    const out: BatchResult[] = new Array(needs.length);
    let chunk: { i: number; body: object; copies: number; min: number }[] = [];
    let size = 0;
    const flush = async () => {
      if (chunk.length === 0) return;
      const items = chunk;
      chunk = [];
      size = 0;
      try {
        const v = await this.call("POST", "/v1/batch", { requests: items.map((x) => x.body) }, opts.signal);
        const rs = v.responses;
        if (!Array.isArray(rs) || rs.length !== items.length) {
          throw new AgentUnavailableError(`batch reply: expected ${items.length} responses, got ${Array.isArray(rs) ? rs.length : typeof rs}`);
        }
        items.forEach((x, k) => {
          const r = rs[k];
          if (r && typeof r === "object" && r.error && typeof r.error === "object") {
            out[x.i] = { error: errorFor(statusOf(String(r.error.code)), String(r.error.code ?? ""), `obol: ${r.error.code}: ${r.error.message ?? ""}`) };
          } else {
            out[x.i] = { decision: this.decision(r ?? {}, x.copies) };
          }
        });
      } catch (e) {
        this.failed(e);
        this.degrade(e, items.length);
        for (const x of items) out[x.i] = { decision: this.degradedDecision(x.min) };
      }
    };
    for (let i = 0; i < needs.length; i++) {
      const n = needs[i];
      try {
        if (n === null || typeof n !== "object") throw badRequest(`batch[${i}]: must be {resource, domain, copies?, minCopies?, limit?}`);
        checkName(`batch[${i}].resource`, n.resource);
        checkName(`batch[${i}].domain`, n.domain);
        const [copies, min] = counts(n);
        const limit = limitField(`batch[${i}].limit`, n.limit);
        const body: Record<string, unknown> = { resource: n.resource, domain: n.domain, copies, min_copies: min };
        if (limit) body.limit = limit;
        const len = Buffer.byteLength(JSON.stringify(body)) + 1;
        if (chunk.length >= 1000 || size + len > 60000) await flush();
        chunk.push({ i, body, copies, min });
        size += len;
      } catch (e) {
        if (!(e instanceof ObolError)) throw e;
        out[i] = { error: e };
      }
    }
    await flush();
    return out;
  }

  /**
   * Gives back unused tokens of a gcra resource; the tokens left, or -1
   * when the agent could not answer. A resource whose requests set their
   * limit needs the same `limit` (it is part of the key).
   */
  async refund(resource: string, domain: string, copies: number, opts: LimitCallOptions = {}): Promise<number> {
    checkName("resource", resource);
    checkName("domain", domain);
    checkInt("copies", copies, 1, MAX_COPIES);
    const limit = limitField("limit", opts.limit);
    const body: Record<string, unknown> = { resource, domain, copies };
    if (limit) body.limit = limit;
    try {
      const v = await this.call("POST", "/v1/refund", body, opts.signal);
      return num(v.remaining);
    } catch (e) {
      this.failed(e);
      this.degrade(e);
      return -1;
    }
  }

  /**
   * Charges the real cost, `copies`, of a grant asked with `settleLater`
   * (`POST /v1/settle`), in place of its estimate: less gives the
   * difference back, more charges it past the limit (later requests wait
   * it out), once. Takes the ticket or the decision. No ticket (a
   * rejection, a degraded or killed grant) settles nothing: a zero
   * settlement, without asking. An agent that cannot answer gives a
   * `degraded` settlement, nothing charged; client errors throw
   * (`already_settled`, `unknown_ticket`, `bad_request`).
   */
  async settle(ticket: string | undefined | Decision, copies: number, opts: CallOptions = {}): Promise<Settlement> {
    if (this.closed) throw new ClosedError();
    const t = typeof ticket === "object" && ticket !== null ? ticket.ticket : ticket;
    if (t === undefined || t === null || t === "") return { charged: 0, remaining: 0, degraded: false };
    checkName("ticket", t);
    checkInt("copies", copies, 0, MAX_COPIES);
    try {
      const v = await this.call("POST", "/v1/settle", { ticket: t, copies }, opts.signal);
      if (!Number.isInteger(v.charged) || !Number.isInteger(v.remaining)) {
        throw new AgentUnavailableError(`unreadable settle reply: charged ${JSON.stringify(v.charged)}, remaining ${JSON.stringify(v.remaining)}`);
      }
      return { charged: v.charged, remaining: v.remaining, degraded: false };
    } catch (e) {
      this.failed(e);
      this.degrade(e);
      return { charged: 0, remaining: 0, degraded: true };
    }
  }

  /**
   * Forgets a resource's counts for a domain (kinds tiers and gcra) on the
   * agent and, through its mesh, on every agent (`POST /v1/reset`): a
   * support team unblocking a customer. It does not fail open: an agent
   * that cannot answer (or a reply that is not `{"reset": true}`) throws
   * AgentUnavailableError, since the reset did not happen. A resource
   * whose requests set their limit needs the same `limit` (it is part of
   * the key).
   */
  async reset(resource: string, domain: string, opts: LimitCallOptions = {}): Promise<void> {
    checkName("resource", resource);
    checkName("domain", domain);
    const limit = limitField("limit", opts.limit);
    const body: Record<string, unknown> = { resource, domain };
    if (limit) body.limit = limit;
    try {
      const v = await this.call("POST", "/v1/reset", body, opts.signal);
      if (v.reset !== true) throw new AgentUnavailableError(`unreadable reset reply: ${JSON.stringify(v).slice(0, 200)}`);
    } catch (e) {
      this.failed(e);
      const u = e as AgentUnavailableError;
      throw new AgentUnavailableError(`obol: reset of ${JSON.stringify(resource)} for ${JSON.stringify(domain)} not made: ${u.message}`, u.timeout);
    }
  }

  /**
   * Runs `POST /v1/simulate`: one resource's config on virtual time. It
   * does not fail open (there is nothing to grant): an agent that cannot
   * answer throws AgentUnavailableError.
   */
  async simulate(resource: object, requests: object[], opts: CallOptions = {}): Promise<{ config: RawReply; decisions: RawReply[] }> {
    if (resource === null || typeof resource !== "object") throw badRequest("resource: must be a resource's config object");
    if (!Array.isArray(requests)) throw badRequest("requests: must be an array");
    return this.call("POST", "/v1/simulate", { resource, requests }, opts.signal);
  }

  // ---- adaptive and pacer -------------------------------------------------

  /**
   * Asks to start one use of an adaptive resource (`POST /v1/admit`). An
   * agent that cannot answer admits, `degraded`, with no ticket.
   */
  async admit(resource: string, opts: CallOptions = {}): Promise<Admission> {
    checkName("resource", resource);
    try {
      const v = await this.call("POST", "/v1/admit", { resource }, opts.signal);
      return {
        admitted: v.admitted === true,
        ticket: typeof v.ticket === "string" ? v.ticket : undefined,
        position: typeof v.position === "number" ? v.position : undefined,
        window: num(v.window),
        degraded: false,
      };
    } catch (e) {
      this.failed(e);
      this.degrade(e);
      return { admitted: true, window: 0, degraded: true };
    }
  }

  /**
   * Ends a use begun by `admit` with its outcome: "success", or "backoff"
   * when the protected service pushed back. A missing ticket (degraded or
   * not admitted) does nothing; an agent that cannot answer drops it.
   * Resolves with the window, or undefined when nothing was sent.
   */
  async complete(ticket: string | undefined | Admission, outcome: "success" | "backoff" = "success", opts: CallOptions = {}): Promise<number | undefined> {
    const t = typeof ticket === "object" && ticket !== null ? ticket.ticket : ticket;
    if (t === undefined) return undefined;
    checkName("ticket", t);
    if (outcome !== "success" && outcome !== "backoff") throw badRequest(`outcome: must be "success" or "backoff", got ${JSON.stringify(outcome)}`);
    try {
      const v = await this.call("POST", "/v1/complete", { ticket: t, outcome }, opts.signal);
      return num(v.window);
    } catch (e) {
      this.failed(e);
      return undefined;
    }
  }

  /**
   * Admits, runs fn, completes with "success" when it resolves and
   * "backoff" when it throws (and rethrows). Resolves with
   * `{admitted: false}` without running fn when not admitted.
   */
  async admitted<T>(resource: string, fn: () => Promise<T> | T, opts: CallOptions = {}): Promise<{ admitted: true; value: T; degraded: boolean } | { admitted: false; window: number }> {
    const a = await this.admit(resource, opts);
    if (!a.admitted) return { admitted: false, window: a.window };
    let value: T;
    try {
      value = await fn();
    } catch (e) {
      await this.complete(a, "backoff").catch(() => undefined);
      throw e;
    }
    await this.complete(a, "success", opts);
    return { admitted: true, value, degraded: a.degraded };
  }

  /** How long to wait before the next call paced by a pacer resource; 0 when the agent cannot answer. */
  async pace(resource: string, opts: CallOptions = {}): Promise<number> {
    checkName("resource", resource);
    try {
      const v = await this.call("POST", "/v1/pace", { resource }, opts.signal);
      return Math.max(0, num(v.wait_ms));
    } catch (e) {
      this.failed(e);
      this.degrade(e);
      return 0;
    }
  }

  /** `pace`, then the wait (abortable). */
  async paceWait(resource: string, opts: CallOptions = {}): Promise<void> {
    const ms = await this.pace(resource, opts);
    if (ms > 0) await sleep(ms, opts.signal);
  }

  /**
   * Reports the reply to a paced call: its status (100–599) and headers
   * (a `Headers`, a plain object, or the remaining count as a number),
   * from which the remaining count is read: the RateLimit field's `r`,
   * then RateLimit-Remaining, then X-RateLimit-Remaining. Dropped when
   * the agent cannot answer.
   */
  async observe(resource: string, status: number, headers?: HeaderSource | number, opts: CallOptions = {}): Promise<void> {
    checkName("resource", resource);
    checkInt("status", status, 100, 599);
    const body: Record<string, unknown> = { resource, status };
    const rem = typeof headers === "number" ? checkInt("remaining", headers, 0, Number.MAX_SAFE_INTEGER) : remainingOf(headers);
    if (rem !== undefined) body.remaining = rem;
    try {
      await this.call("POST", "/v1/observe", body, opts.signal);
    } catch (e) {
      this.failed(e);
    }
  }

  // ---- copies -------------------------------------------------------------

  /** @internal the client's own session, opened on the first reserve or seize. */
  get main(): Session {
    if (!this.defaultSession) this.defaultSession = new Session(this);
    return this.defaultSession;
  }

  /** Reserves copies of a copy-limited resource in the client's session. See {@link Session.reserve}. */
  reserve(resource: string, domain: string, opts: RequestOptions = {}): Promise<Hold> {
    return this.main.reserve(resource, domain, opts);
  }

  /** Takes the copies of a transfer into the client's session. See {@link Session.seize}. */
  seize(transfer: string, opts: CallOptions = {}): Promise<Hold> {
    return this.main.seize(transfer, opts);
  }

  /**
   * A session of its own: its holds are released together by its
   * `close()`. With a function, the session is closed when the function
   * ends (resolves or throws): `await client.session(async (s) => { … })`.
   */
  session(): Session;
  session<T>(fn: (s: Session) => Promise<T> | T): Promise<T>;
  session<T>(fn?: (s: Session) => Promise<T> | T): Session | Promise<T> {
    const s = new Session(this);
    if (fn === undefined) return s;
    return (async () => {
      try {
        return await fn(s);
      } finally {
        await s.close();
      }
    })();
  }

  /**
   * Ends every session (the agent releases their copies) and closes the
   * connections. Later calls throw ClosedError. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all([...this.sessions].map((s) => s.close().catch(() => undefined)));
    this.closed = true;
    this.t.close();
  }
}

function canParse(u: string): boolean {
  try {
    new URL(u);
    return true;
  } catch {
    return false;
  }
}

function headerString(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(", ") : v;
}

function isAgentErrorBody(body: string): boolean {
  try {
    const v = JSON.parse(body);
    return !!v && typeof v === "object" && !!v.error && typeof v.error.code === "string";
  } catch {
    return false;
  }
}

const CODE_STATUS: Record<string, number> = {
  bad_request: 400,
  cost_over_burst: 400,
  bad_limit: 400,
  unknown_resource: 404,
  unknown_hold: 404,
  unknown_session: 404,
  unknown_transfer: 404,
  unknown_ticket: 404,
  wrong_kind: 409,
  over_release: 409,
  already_settled: 409,
  too_large: 413,
  too_many: 429,
  unauthorized: 401,
  forbidden: 403,
  unsupported_media_type: 415,
};

function statusOf(code: string): number {
  return CODE_STATUS[code] ?? 400;
}

function apiError(r: Reply): ObolError {
  try {
    const v = JSON.parse(r.body);
    if (v && typeof v === "object" && v.error && typeof v.error.code === "string") {
      return errorFor(r.status, v.error.code, `obol: ${v.error.code}: ${v.error.message ?? ""}`);
    }
  } catch {
    // not the agent's format
  }
  if (r.status === 404) return new ObolError(404, Codes.notFound, `obol: 404: the agent does not serve this path (an agent older than the client?)`);
  return new ObolError(r.status, "", `obol: status ${r.status}: ${r.body.slice(0, 200)}`);
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

/**
 * A lease with the agent: copies reserved in it are released when it
 * ends (close, or its TTL passing without keepalive if the process dies).
 * Opened on its first reserve or seize; kept alive every third of the TTL
 * by a timer that does not keep the process alive.
 */
export class Session {
  private readonly c: Client;
  private id?: string;
  /** @internal */
  get client(): Client {
    return this.c;
  }
  private opening?: Promise<string>;
  private timer?: NodeJS.Timeout;
  private readonly holds = new Set<Hold>();
  /** @internal releases the agent could not take yet, retried by the keepalive. */
  readonly pending: { hold: Hold; copies: number }[] = [];
  private ended = false;
  private ticking = false;

  constructor(c: Client) {
    this.c = c;
    c.sessions.add(this);
  }

  /** The agent's session id, once opened. */
  get sessionId(): string | undefined {
    return this.id;
  }

  /** @internal */
  pendingCount(): number {
    return this.pending.length;
  }

  private async open(signal?: AbortSignal): Promise<string> {
    if (this.id) return this.id;
    if (!this.opening) {
      this.opening = (async () => {
        const v = await this.c.call("POST", "/v1/sessions", { ttl_ms: this.c.sessionTtlMs }, signal);
        if (typeof v.session !== "string" || v.session === "") throw new AgentUnavailableError("session reply without an id");
        this.id = v.session;
        this.c.counters.sessions++;
        this.timer = setInterval(() => void this.tick(), Math.max(1, Math.floor(this.c.sessionTtlMs / 3)));
        this.timer.unref();
        return v.session as string;
      })().finally(() => {
        this.opening = undefined;
      });
    }
    return this.opening;
  }

  /** Renews the lease and retries queued releases. */
  private async tick(): Promise<void> {
    if (!this.id || this.ended || this.ticking) return;
    this.ticking = true;
    try {
      await this.tickOnce();
    } finally {
      this.ticking = false;
    }
  }

  private async tickOnce(): Promise<void> {
    if (!this.id) return;
    try {
      await this.c.call("POST", `/v1/sessions/${encodeURIComponent(this.id)}/keepalive`);
    } catch (e) {
      if (e instanceof ObolError && e.code === Codes.unknownSession) this.lost();
      return;
    }
    // Each queued release leaves the queue once the agent has taken it
    // (or no longer knows the hold).
    for (const p of [...this.pending]) {
      if (await p.hold.retryRelease(p.copies)) {
        const i = this.pending.indexOf(p);
        if (i >= 0) this.pending.splice(i, 1);
      }
    }
  }

  /** The agent no longer knows the session: its holds hold nothing. */
  private lost(): void {
    this.id = undefined;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const h of this.holds) h.forget();
    this.holds.clear();
    this.pending.length = 0;
  }

  /** @internal */
  drop(h: Hold): void {
    this.holds.delete(h);
  }

  private checkOpen(): void {
    if (this.ended || this.c.closed) throw new ClosedError();
  }

  /**
   * Reserves `copies` (default 1) of a copy-limited resource for a domain,
   * at least `minCopies` (default `copies`). A rejection is a hold with
   * `granted: 0`; an agent that cannot answer gives a degraded hold of
   * `minCopies` the agent does not hold; with the kill switch on, a
   * rejection is a killed hold of every copy asked, not held either.
   */
  async reserve(resource: string, domain: string, opts: RequestOptions = {}): Promise<Hold> {
    this.checkOpen();
    checkName("resource", resource);
    checkName("domain", domain);
    const [copies, min] = counts(opts);
    if (copies === 0) throw badRequest("copies: must be at least 1 for reserve, got 0");
    if (opts.limit !== undefined) throw badRequest("limit: not for reserve (a copies resource's limits are the config's)");
    const maxWait = opts.maxWaitMs === undefined ? this.c.defaultMaxWaitMs : checkInt("maxWaitMs", opts.maxWaitMs, 0, 86400000);
    return this.c.retrying(maxWait, opts.signal, async () => {
      const h = await this.reserveOnce(resource, domain, copies, min, opts.signal);
      return h;
    });
  }

  private async reserveOnce(resource: string, domain: string, copies: number, min: number, signal?: AbortSignal): Promise<Hold> {
    for (let attempt = 0; ; attempt++) {
      try {
        const session = await this.open(signal);
        const v = await this.c.call("POST", "/v1/reserve", { resource, domain, copies, min_copies: min, session }, signal);
        const granted = num(v.granted);
        if (granted === 0 && this.c.killSwitch) {
          this.c.killed();
          return new Hold(this, { id: "", resource, domain, granted: copies, degraded: false, killed: true, reply: v });
        }
        const h = new Hold(this, { id: typeof v.hold === "string" ? v.hold : "", resource, domain, granted, degraded: false, killed: false, reply: v });
        if (h.id) this.holds.add(h);
        return h;
      } catch (e) {
        if (e instanceof ObolError && e.code === Codes.unknownSession && attempt === 0) {
          this.lost();
          continue;
        }
        this.c.failed(e);
        this.c.degrade(e);
        return new Hold(this, { id: "", resource, domain, granted: min, degraded: true, killed: false, reply: {} });
      }
    }
  }

  /**
   * Takes the copies of a transfer. `degraded:N` and `killed:N` ids (from
   * holds the agent did not hold) give such a hold of N copies without
   * asking; a real id the agent cannot answer for gives a degraded hold of
   * 0 copies (the client cannot know how many the transfer had).
   */
  async seize(transfer: string, opts: CallOptions = {}): Promise<Hold> {
    this.checkOpen();
    checkName("transfer", transfer);
    const m = /^(degraded|killed):(\d+)$/.exec(transfer);
    if (m) {
      return new Hold(this, { id: "", resource: "", domain: "", granted: Number(m[2]), degraded: m[1] === "degraded", killed: m[1] === "killed", reply: {} });
    }
    for (let attempt = 0; ; attempt++) {
      try {
        const session = await this.open(opts.signal);
        const v = await this.c.call("POST", "/v1/seize", { transfer, session }, opts.signal);
        const h = new Hold(this, {
          id: String(v.hold ?? ""),
          resource: String(v.resource ?? ""),
          domain: String(v.domain ?? ""),
          granted: num(v.copies),
          degraded: false,
          killed: false,
          reply: v,
        });
        if (h.id) this.holds.add(h);
        return h;
      } catch (e) {
        if (e instanceof ObolError && e.code === Codes.unknownSession && attempt === 0) {
          this.lost();
          continue;
        }
        this.c.failed(e);
        this.c.degrade(e);
        return new Hold(this, { id: "", resource: "", domain: "", granted: 0, degraded: true, killed: false, reply: {} });
      }
    }
  }

  /**
   * Ends the session: the agent releases every copy it holds. Idempotent;
   * an agent that cannot answer lets the session expire with its TTL.
   */
  async close(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    if (this.timer) clearInterval(this.timer);
    this.c.sessions.delete(this);
    for (const h of this.holds) h.forget();
    this.holds.clear();
    this.pending.length = 0;
    if (this.opening) await this.opening.catch(() => undefined);
    if (!this.id || this.c.closed) return;
    const id = this.id;
    this.id = undefined;
    try {
      await this.c.call("DELETE", `/v1/sessions/${encodeURIComponent(id)}`);
    } catch {
      // gone or unreachable: the lease expires on its own
    }
  }

  /** @internal */
  queue(h: Hold, copies: number): void {
    this.pending.push({ hold: h, copies });
  }
}

/** Copies reserved (or seized). `release()` is idempotent and safe after `transfer`. */
export class Hold implements HoldInfo {
  readonly id: string;
  readonly resource: string;
  readonly domain: string;
  readonly granted: number;
  readonly degraded: boolean;
  readonly killed: boolean;
  readonly reply: RawReply;
  /** Requests sent again while `maxWaitMs` waited. */
  retries = 0;
  private left: number;
  private readonly s: Session;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(s: Session, i: HoldInfo) {
    this.s = s;
    this.id = i.id;
    this.resource = i.resource;
    this.domain = i.domain;
    this.granted = i.granted;
    this.degraded = i.degraded;
    this.killed = i.killed;
    this.reply = i.reply;
    this.left = i.id ? i.granted : 0;
  }

  /** Copies still held by the agent for this hold. */
  get held(): number {
    return this.left;
  }

  /** @internal the session ended or was lost: nothing is held any more. */
  forget(): void {
    this.left = 0;
  }

  /** Operations on one hold run one after the other. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.chain.then(fn, fn);
    this.chain = p.catch(() => undefined);
    return p;
  }

  /** Releases every copy still held. Idempotent. */
  release(opts: CallOptions = {}): Promise<void> {
    return this.serial(() => this.doRelease(this.left, opts.signal));
  }

  /**
   * Releases `n` copies (at most what is held). When the agent cannot
   * answer, the release is queued and retried by the session's keepalive.
   */
  releaseN(n: number, opts: CallOptions = {}): Promise<void> {
    checkInt("copies", n, 1, MAX_COPIES);
    if (this.id && n > this.left) return Promise.reject(badRequest(`copies: must be at most the ${this.left} held, got ${n}`));
    return this.serial(() => this.doRelease(n, opts.signal));
  }

  private async doRelease(n: number, signal?: AbortSignal): Promise<void> {
    n = Math.min(n, this.left);
    if (!this.id || n <= 0) return;
    try {
      const v = await this.s.client.call("POST", "/v1/release", { hold: this.id, copies: n }, signal);
      this.left = typeof v.held === "number" ? v.held : this.left - n;
    } catch (e) {
      if (e instanceof ObolError && (e.code === Codes.unknownHold || e.code === Codes.unknownSession)) {
        this.left = 0;
      } else if (e instanceof AgentUnavailableError) {
        // The agent keeps the copies until the release gets through (the
        // session's keepalive retries it) or the session ends.
        this.left -= n;
        this.s.queue(this, n);
        this.s.client.degrade(e);
        return;
      } else {
        this.s.client.failed(e);
      }
    }
    if (this.left <= 0) this.s.drop(this);
  }

  /**
   * @internal the release of n copies the agent could not take, sent
   * again: true when done (taken, or a hold the agent no longer knows).
   */
  async retryRelease(n: number): Promise<boolean> {
    if (!this.id) return true;
    try {
      await this.s.client.call("POST", "/v1/release", { hold: this.id, copies: n });
      return true;
    } catch (e) {
      return !(e instanceof AgentUnavailableError);
    }
  }

  /**
   * Hands `n` copies (default: all held) to another process, which seizes
   * them with the returned id within `ttlMs` (0: the agent's default). A
   * degraded or killed hold gives `degraded:N` / `killed:N`; an agent that
   * cannot answer keeps the copies in this hold and gives `degraded:N`.
   */
  transfer(n?: number, ttlMs = 0, opts: CallOptions = {}): Promise<string> {
    return this.serial(async () => {
      const want = n === undefined ? (this.id ? this.left : this.granted) : checkInt("copies", n, 1, MAX_COPIES);
      checkInt("ttlMs", ttlMs, 0, 86400000);
      if (!this.id) {
        if (want > this.granted) throw badRequest(`copies: must be at most the ${this.granted} granted, got ${want}`);
        return `${this.killed ? "killed" : "degraded"}:${want}`;
      }
      if (want > this.left) throw badRequest(`copies: must be at most the ${this.left} held, got ${want}`);
      const body: Record<string, unknown> = { hold: this.id, copies: want };
      if (ttlMs > 0) body.ttl_ms = ttlMs;
      try {
        const v = await this.s.client.call("POST", "/v1/transfer", body, opts.signal);
        this.left -= want;
        if (this.left <= 0) this.s.drop(this);
        return String(v.transfer);
      } catch (e) {
        this.s.client.failed(e);
        this.s.client.degrade(e);
        return `degraded:${want}`;
      }
    });
  }
}
