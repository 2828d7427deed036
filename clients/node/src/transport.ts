import * as http from "node:http";
import { AgentUnavailableError, badRequest } from "./errors";

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
   * the signal's reason when the caller aborted.
   */
  call(method: string, path: string, body: string | undefined, timeoutMs: number, signal?: AbortSignal): Promise<Reply> {
    return this.once(method, path, body, timeoutMs, signal, true);
  }

  private once(
    method: string,
    path: string,
    body: string | undefined,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    mayResend: boolean,
  ): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const headers: http.OutgoingHttpHeaders = { accept: "application/json" };
      if (body !== undefined) {
        headers["content-type"] = "application/json";
        headers["content-length"] = Buffer.byteLength(body);
      }
      let done = false;
      let gotReply = false;
      const started = Date.now();
      const finish = (err: Error | undefined, r?: Reply) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        if (err) reject(err);
        else resolve(r!);
      };
      const req = http.request({ ...this.base, method, path: this.prefix + path, headers });
      const timer = setTimeout(() => {
        finish(new AgentUnavailableError(`no reply within ${timeoutMs} ms`, true));
        req.destroy();
      }, timeoutMs);
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
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          const left = timeoutMs - (Date.now() - started);
          if (left <= 0) {
            reject(new AgentUnavailableError(`no reply within ${timeoutMs} ms`, true));
            return;
          }
          this.once(method, path, body, left, signal, false).then(resolve, reject);
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
