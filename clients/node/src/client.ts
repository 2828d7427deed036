// The Client: its options, the one call to the agent every other call
// makes, and how that call fails open. The calls themselves are in
// decisions.ts, batch.ts, settle.ts, adaptive.ts and session.ts.
import * as adaptive from "./adaptive";
import * as batches from "./batch";
import * as decisions from "./decisions";
import { AgentUnavailableError, ClosedError, badRequest } from "./errors";
import type { HeaderSource } from "./headers";
import { apiError, isAgentErrorBody } from "./replies";
import * as settlement from "./settle";
import { Hold, Session } from "./session";
import { defaultSocket } from "./socket";
import { Reply, Transport, abortReason, now } from "./transport";
import type {
  Admission,
  BatchResult,
  CallOptions,
  ClientOptions,
  Decision,
  LimitCallOptions,
  Logger,
  Need,
  RawReply,
  RequestOptions,
  Settlement,
  Stats,
} from "./types";
import { canParse, checkInt, checkName, parseBoolEnv, sleep } from "./util";

// index.ts exports these from here, with the Client.
export { Session, Hold } from "./session";
export { defaultSocket } from "./socket";
export { remainingOf } from "./headers";
export type { HeaderSource } from "./headers";
export type {
  Admission,
  BatchResult,
  CallOptions,
  ClientOptions,
  Decision,
  HoldInfo,
  LimitCallOptions,
  Logger,
  Need,
  RawReply,
  RequestOptions,
  Settlement,
  Stats,
} from "./types";

const DEFAULTS = {
  timeoutMs: 20,
  timeoutPauseMs: 100,
  retryBaseMs: 10,
  sessionTtlMs: 30000,
  maxSockets: 256,
  idleMs: 10000,
  logIntervalMs: 60000,
};

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

  /**
   * Asks for `copies` of a rate-limited resource for a domain
   * (`POST /v1/request`). Never throws for the agent's failures: they give
   * a degraded grant of `minCopies` (with no settle ticket).
   */
  request(resource: string, domain: string, opts: RequestOptions = {}): Promise<Decision> {
    return decisions.request(this, resource, domain, opts);
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
  check(resource: string, domain: string, opts: { copies?: number; signal?: AbortSignal } = {}): Promise<Decision> {
    return decisions.check(this, resource, domain, opts);
  }

  /**
   * Many decisions in few calls (`POST /v1/batch`, at most 1000 items and
   * under 64 KiB a call; longer lists are split, in order). Items the
   * client refuses get their error without being sent. No retry.
   */
  batch(needs: Need[], opts: CallOptions = {}): Promise<BatchResult[]> {
    return batches.batch(this, needs, opts);
  }

  /**
   * Gives back unused tokens of a gcra resource; the tokens left, or -1
   * when the agent could not answer. A resource whose requests set their
   * limit needs the same `limit` (it is part of the key).
   */
  refund(resource: string, domain: string, copies: number, opts: LimitCallOptions = {}): Promise<number> {
    return settlement.refund(this, resource, domain, copies, opts);
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
  settle(ticket: string | undefined | Decision, copies: number, opts: CallOptions = {}): Promise<Settlement> {
    return settlement.settle(this, ticket, copies, opts);
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
  reset(resource: string, domain: string, opts: LimitCallOptions = {}): Promise<void> {
    return settlement.reset(this, resource, domain, opts);
  }

  /**
   * Runs `POST /v1/simulate`: one resource's config on virtual time. It
   * does not fail open (there is nothing to grant): an agent that cannot
   * answer throws AgentUnavailableError.
   */
  simulate(resource: object, requests: object[], opts: CallOptions = {}): Promise<{ config: RawReply; decisions: RawReply[] }> {
    return settlement.simulate(this, resource, requests, opts);
  }

  // ---- adaptive and pacer -------------------------------------------------

  /**
   * Asks to start one use of an adaptive resource (`POST /v1/admit`). An
   * agent that cannot answer admits, `degraded`, with no ticket.
   */
  admit(resource: string, opts: CallOptions = {}): Promise<Admission> {
    return adaptive.admit(this, resource, opts);
  }

  /**
   * Ends a use begun by `admit` with its outcome: "success", or "backoff"
   * when the protected service pushed back. A missing ticket (degraded or
   * not admitted) does nothing; an agent that cannot answer drops it.
   * Resolves with the window, or undefined when nothing was sent.
   */
  complete(ticket: string | undefined | Admission, outcome: "success" | "backoff" = "success", opts: CallOptions = {}): Promise<number | undefined> {
    return adaptive.complete(this, ticket, outcome, opts);
  }

  /**
   * Admits, runs fn, completes with "success" when it resolves and
   * "backoff" when it throws (and rethrows). Resolves with
   * `{admitted: false}` without running fn when not admitted.
   */
  admitted<T>(resource: string, fn: () => Promise<T> | T, opts: CallOptions = {}): Promise<{ admitted: true; value: T; degraded: boolean } | { admitted: false; window: number }> {
    return adaptive.admitted(this, resource, fn, opts);
  }

  /** How long to wait before the next call paced by a pacer resource; 0 when the agent cannot answer. */
  pace(resource: string, opts: CallOptions = {}): Promise<number> {
    return adaptive.pace(this, resource, opts);
  }

  /** `pace`, then the wait (abortable). */
  paceWait(resource: string, opts: CallOptions = {}): Promise<void> {
    return adaptive.paceWait(this, resource, opts);
  }

  /**
   * Reports the reply to a paced call: its status (100–599) and headers
   * (a `Headers`, a plain object, or the remaining count as a number),
   * from which the remaining count is read: the RateLimit field's `r`,
   * then RateLimit-Remaining, then X-RateLimit-Remaining. Dropped when
   * the agent cannot answer.
   */
  observe(resource: string, status: number, headers?: HeaderSource | number, opts: CallOptions = {}): Promise<void> {
    return adaptive.observe(this, resource, status, headers, opts);
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
