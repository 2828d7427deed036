import * as http from "node:http";
import { performance } from "node:perf_hooks";
import { AgentUnavailableError, badRequest } from "./errors";

/** The clock of the calls' deadlines: monotonic, in fractional milliseconds. */
export const now = (): number => performance.now();

/** A word no one notifies: Atomics.wait on it sleeps the thread, allocating nothing. */
const NAP = new Int32Array(new SharedArrayBuffer(4));
/** The longest nap of one event-loop turn, in ms. */
const NAP_MS = 0.2;
/** A loop turn shorter than this (ms, the naps left out) had nothing else to do. */
const IDLE_TURN_MS = 0.05;

/**
 * Runs fn once, at the deadline (a time of {@link now}), not before it and
 * not a whole timer tick after it, unless cancelled first. Node runs a
 * setTimeout(ms) anywhere from about ms - 1 to ms + 1 after it is set, late
 * by however long the event loop is busy (it counts whole milliseconds of a
 * clock read once per loop turn). So the timer is set to fire 1 to 2 ms
 * before the deadline, and the rest is waited for one loop turn at a time
 * (setImmediate): the loop keeps serving I/O, and a reply that comes in
 * that window is taken.
 *
 * A turn that found the loop idle (it took under IDLE_TURN_MS, not
 * counting this deadline's own naps) naps up to NAP_MS with Atomics.wait
 * before the next. Without the naps, those 1 to 2 ms were some 400 turns,
 * each allocating an Immediate: two thirds of the garbage of a timed-out
 * call, so V8's scavenges, 1 to 3 ms each, fell in that window and made
 * the grant late; with them a window is about ten turns. A busy loop
 * (turns longer than IDLE_TURN_MS) is never put to sleep, and among
 * several deadlines waiting at once, a turn that one of them napped in is
 * not idle for the others. fn is never called synchronously from the
 * constructor.
 */
export class Deadline {
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private cancelled = false;
  /** When check last ran (after its nap), or undefined before it first ran. */
  private last: number | undefined;

  constructor(
    readonly at: number,
    private readonly fn: () => void,
  ) {
    this.schedule(at - now());
  }

  cancel(): void {
    this.cancelled = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.timer = this.immediate = undefined;
  }

  private schedule(left: number): void {
    // A timer of floor(left) - 1 ms fires from floor(left) - 2 ms on: at
    // least frac(left) ms, at most 2 + frac(left) ms, before the deadline.
    const ms = Math.floor(left) - 1;
    if (ms >= 1) this.timer = setTimeout(this.check, ms);
    else this.immediate = setImmediate(this.check);
  }

  private readonly check = (): void => {
    this.timer = this.immediate = undefined;
    if (this.cancelled) return;
    let t = now();
    let left = this.at - t;
    if (left > 0 && this.last !== undefined && t - this.last < IDLE_TURN_MS) {
      Atomics.wait(NAP, 0, 0, Math.min(left, NAP_MS));
      t = now();
      left = this.at - t;
    }
    this.last = t;
    if (left > 0) {
      this.schedule(left);
      return;
    }
    this.cancelled = true;
    this.fn();
  };
}

/** A reply the agent gave: its status, headers and body. */
export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface TransportOptions {
  socket?: string;
  url?: string;
  maxSockets: number;
  idleMs: number;
}

/** Errors of a kept-alive connection the agent closed before replying. */
const RESENDABLE = new Set(["ECONNRESET", "EPIPE"]);

/**
 * One keep-alive pool of connections to the agent (its Unix socket or a
 * loopback URL), and one call: send, read the whole reply, within a
 * deadline, cancellable by an AbortSignal.
 */
export class Transport {
  readonly agent: http.Agent;
  private readonly base: http.RequestOptions;
  private readonly prefix: string;

  constructor(o: TransportOptions) {
    this.agent = new http.Agent({
      keepAlive: true,
      maxSockets: o.maxSockets,
      // Sockets idle this long are closed by the client (the agent keeps
      // them longer, so the client is the one that closes first).
      timeout: o.idleMs,
      scheduling: "lifo",
    });
    if (o.url !== undefined) {
      const u = new URL(o.url);
      if (u.protocol !== "http:") {
        throw badRequest(`url: must be http://host:port[/prefix], got ${JSON.stringify(o.url)}`);
      }
      this.base = { host: u.hostname, port: u.port || 80, agent: this.agent };
      this.prefix = u.pathname.replace(/\/+$/, "");
    } else {
      // The agent checks Host: a socket's requests carry "localhost".
      this.base = { socketPath: o.socket, host: "localhost", agent: this.agent };
      this.prefix = "";
    }
  }

  /**
   * Sends one request. It resolves with the reply, or rejects with an
   * AgentUnavailableError (the agent could not answer: fail open), or with
   * the signal's reason when the caller aborted. deadline is a time of
   * {@link now}, taken when the caller's call started (timeoutMs after it):
   * the call times out at it, not before, connecting and a resend
   * included.
   */
  call(method: string, path: string, body: string | undefined, deadline: number, timeoutMs: number, signal?: AbortSignal): Promise<Reply> {
    return this.once(method, path, body, deadline, timeoutMs, signal, true);
  }

  private once(
    method: string,
    path: string,
    body: string | undefined,
    deadline: number,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    mayResend: boolean,
  ): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const timedOut = () => new AgentUnavailableError(`no reply within ${timeoutMs} ms`, true);
      if (now() >= deadline) {
        reject(timedOut());
        return;
      }
      const headers: http.OutgoingHttpHeaders = { accept: "application/json" };
      if (body !== undefined) {
        headers["content-type"] = "application/json";
        headers["content-length"] = Buffer.byteLength(body);
      }
      let done = false;
      let gotReply = false;
      const finish = (err: Error | undefined, r?: Reply) => {
        if (done) return;
        done = true;
        timer.cancel();
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve(r!);
      };
      // The timer runs to the deadline the caller took, and is set before
      // the request (and its connection) is made; it never fires
      // synchronously. At the deadline the caller gets its answer first;
      // the connection is destroyed after, off the caller's time.
      const timer = new Deadline(deadline, () => {
        finish(timedOut());
        setImmediate(() => req.destroy());
      });
      let req: http.ClientRequest;
      try {
        req = http.request({ ...this.base, method, path: this.prefix + path, headers });
      } catch (e) {
        timer.cancel();
        throw e;
      }
      const onAbort = () => {
        finish(abortReason(signal!));
        req.destroy();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      req.on("error", (e: NodeJS.ErrnoException) => {
        if (done) return;
        // A kept-alive connection the agent closed (it restarted, or
        // closed an idle connection) is retried once on a new connection,
        // when it failed before any reply byte; a timeout never is.
        if (mayResend && !gotReply && req.reusedSocket && RESENDABLE.has(e.code ?? "")) {
          done = true;
          timer.cancel();
          signal?.removeEventListener("abort", onAbort);
          // Within the same deadline (once() rejects at once if it is past).
          this.once(method, path, body, deadline, timeoutMs, signal, false).then(resolve, reject);
          return;
        }
        finish(new AgentUnavailableError(`${e.code ?? "error"}: ${e.message}`));
      });
      req.on("response", (res) => {
        gotReply = true;
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          finish(undefined, { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") });
        });
        res.on("error", (e) => finish(new AgentUnavailableError(`reading the reply: ${e.message}`)));
        res.on("aborted", () => finish(new AgentUnavailableError("the agent closed the connection mid-reply")));
      });
      req.end(body);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

export function abortReason(signal: AbortSignal): Error {
  const r = (signal as AbortSignal & { reason?: unknown }).reason;
  if (r instanceof Error) return r;
  const e = new Error("The operation was aborted");
  e.name = "AbortError";
  return e;
}
