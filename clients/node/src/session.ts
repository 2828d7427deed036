// Copies: sessions, the leases the agent holds copies in, and their holds.
import type { Client } from "./client";
import { AgentUnavailableError, ClosedError, Codes, ObolError, badRequest } from "./errors";
import type { CallOptions, HoldInfo, RawReply, RequestOptions } from "./types";
import { MAX_COPIES, checkInt, checkName, counts, num } from "./util";

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
    return this.inSession(
      signal,
      async (session) => {
        const v = await this.c.call("POST", "/v1/reserve", { resource, domain, copies, min_copies: min, session }, signal);
        const granted = num(v.granted);
        if (granted === 0 && this.c.killSwitch) {
          this.c.killed();
          return new Hold(this, { id: "", resource, domain, granted: copies, degraded: false, killed: true, reply: v });
        }
        return new Hold(this, { id: typeof v.hold === "string" ? v.hold : "", resource, domain, granted, degraded: false, killed: false, reply: v });
      },
      () => new Hold(this, { id: "", resource, domain, granted: min, degraded: true, killed: false, reply: {} }),
    );
  }

  /**
   * Runs call with the session's id and keeps the hold it gives (when the
   * agent holds it). A session the agent no longer knows is opened anew
   * and call asked once more; any other failure, or a second loss, fails
   * open: counted, warned, and the hold of degraded() returned.
   */
  private async inSession(signal: AbortSignal | undefined, call: (session: string) => Promise<Hold>, degraded: () => Hold): Promise<Hold> {
    for (let attempt = 0; ; attempt++) {
      try {
        const h = await call(await this.open(signal));
        if (h.id) this.holds.add(h);
        return h;
      } catch (e) {
        if (e instanceof ObolError && e.code === Codes.unknownSession && attempt === 0) {
          this.lost();
          continue;
        }
        this.c.failed(e);
        this.c.degrade(e);
        return degraded();
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
    return this.inSession(
      opts.signal,
      async (session) => {
        const v = await this.c.call("POST", "/v1/seize", { transfer, session }, opts.signal);
        return new Hold(this, {
          id: String(v.hold ?? ""),
          resource: String(v.resource ?? ""),
          domain: String(v.domain ?? ""),
          granted: num(v.copies),
          degraded: false,
          killed: false,
          reply: v,
        });
      },
      () => new Hold(this, { id: "", resource: "", domain: "", granted: 0, degraded: true, killed: false, reply: {} }),
    );
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
