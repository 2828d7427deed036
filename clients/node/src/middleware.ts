import type { IncomingMessage, ServerResponse } from "node:http";
import type { Client, Decision } from "./client";

/**
 * What a request is counted as: `[resource, domain]`, or null/undefined to
 * let the request through without asking.
 */
export type KeyFunc<Req> = (req: Req) => readonly [string, string] | null | undefined | Promise<readonly [string, string] | null | undefined>;

export interface MiddlewareOptions<Req> {
  key: KeyFunc<Req>;
  /** Copies each request costs (default 1). */
  copies?: number;
}

/** The headers of a decision: the RateLimit fields, and Retry-After on a rejection. */
export function decisionHeaders(d: Decision): Record<string, string> {
  const h: Record<string, string> = {};
  if (d.rateLimitPolicy) h["RateLimit-Policy"] = d.rateLimitPolicy;
  if (d.rateLimit) h["RateLimit"] = d.rateLimit;
  if (d.granted === 0 && d.retryAfterMs > 0) h["Retry-After"] = String(Math.max(1, Math.ceil(d.retryAfterMs / 1000)));
  return h;
}

const BODY = "429 too many requests\n";

/**
 * Decides a request through `GET /v1/check`. Resolves with the decision,
 * or undefined when the request goes on without one (no key, or a client
 * error, logged at most once per log interval: a limiter's config mistake
 * must not take the service down). Degraded and killed decisions are
 * grants.
 */
async function decide<Req>(c: Client, o: MiddlewareOptions<Req>, req: Req): Promise<Decision | undefined> {
  try {
    const k = await o.key(req);
    if (!k) return undefined;
    return await c.check(k[0], k[1], o.copies === undefined ? {} : { copies: o.copies });
  } catch (e) {
    c.middlewareError(e);
    return undefined;
  }
}

/**
 * Express and Connect middleware, `(req, res, next)`: a rejection is
 * answered 429 with Retry-After (whole seconds, rounded up; left out when
 * no wait would help) and the RateLimit fields; a grant goes on with the
 * RateLimit fields set.
 */
export function middleware<Req extends IncomingMessage = IncomingMessage>(c: Client, o: MiddlewareOptions<Req>) {
  if (!o || typeof o.key !== "function") throw new TypeError("obol: middleware: options.key must be a function (req) => [resource, domain]");
  return (req: Req, res: ServerResponse, next: (err?: unknown) => void): void => {
    decide(c, o, req).then((d) => {
      if (d) for (const [k, v] of Object.entries(decisionHeaders(d))) res.setHeader(k, v);
      if (d && d.granted === 0) {
        res.statusCode = 429;
        res.setHeader("Content-Type", "text/plain; charset=utf-8");
        res.end(BODY);
        return;
      }
      next();
    }, next);
  };
}

/** The parts of a Fastify request and reply the hook uses. */
interface FastifyReplyLike {
  header(name: string, value: string): unknown;
  code(status: number): FastifyReplyLike;
  send(body: unknown): unknown;
}

/**
 * A Fastify `onRequest` hook with the middleware's behaviour:
 * `app.addHook("onRequest", fastifyHook(client, { key }))`.
 */
export function fastifyHook<Req = unknown>(c: Client, o: MiddlewareOptions<Req>) {
  if (!o || typeof o.key !== "function") throw new TypeError("obol: fastifyHook: options.key must be a function (request) => [resource, domain]");
  return async (request: Req, reply: FastifyReplyLike): Promise<unknown> => {
    const d = await decide(c, o, request);
    if (!d) return undefined;
    for (const [k, v] of Object.entries(decisionHeaders(d))) reply.header(k, v);
    if (d.granted === 0) {
      reply.header("Content-Type", "text/plain; charset=utf-8");
      return reply.code(429).send(BODY);
    }
    return undefined;
  };
}
