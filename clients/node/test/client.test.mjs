// The client against a real agent: rate decisions, errors, kill switch,
// maxWaitMs, AbortSignal, check, batch, refund, settle and reset, adaptive
// and pacer.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import {
  Client,
  ObolError,
  ClosedError,
  Codes,
  UnknownResourceError,
  WrongKindError,
  BadRequestError,
  UnknownIdError,
  AlreadySettledError,
} from "../esm/index.mjs";
import { startAgent, noAgent, memLogger } from "./helpers.mjs";

test("require and import give the same classes", () => {
  const cjs = createRequire(import.meta.url)("..");
  assert.equal(cjs.Client, Client);
  assert.equal(cjs.ObolError, ObolError);
});

test("request: grants, then rejects with retryAfterMs", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  const d = await c.request("t/hour", "u1");
  assert.equal(d.granted, 1);
  assert.equal(d.degraded, false);
  assert.equal(d.killed, false);
  assert.equal(d.reply.granted, 1);
  const r = await c.request("t/hour", "u1");
  assert.equal(r.granted, 0);
  assert.ok(r.retryAfterMs > 0, `retryAfterMs ${r.retryAfterMs}`);
  const tiers = await c.request("t/tiers", "u1", { copies: 3 });
  assert.equal(tiers.granted, 3);
  assert.equal(typeof tiers.remaining, "number");
  assert.equal(tiers.resetAfterMs, 1000);
  const partial = await c.request("t/gcra", "u1", { copies: 25 - 5, minCopies: 1 });
  assert.equal(partial.granted, 20);
  const some = await c.request("t/gcra", "u2", { copies: 15 });
  assert.equal(some.granted, 15);
  assert.equal(some.remaining, 5);
  const rest = await c.request("t/gcra", "u2", { copies: 10, minCopies: 1 });
  assert.equal(rest.granted, 5);
  const peek = await c.request("t/tiers", "u1", { copies: 0 });
  assert.equal(peek.granted, 0);
  assert.equal(peek.killed, false);
  assert.equal(c.stats().calls, 7);
  assert.equal(c.stats().degraded, 0);
});

test("client errors are typed and name the bad value", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  await assert.rejects(c.request("nope/x", "u"), (e) => e instanceof UnknownResourceError && e instanceof ObolError && e.code === Codes.unknownResource && e.status === 404);
  await assert.rejects(c.request("t/copies", "u"), (e) => e instanceof WrongKindError && e.code === Codes.wrongKind && e.status === 409);
  await assert.rejects(c.request("t/gcra", "u", { copies: 21 }), (e) => e.code === Codes.costOverBurst);
  await assert.rejects(c.request("", "u"), (e) => e instanceof BadRequestError && e.code === Codes.badRequest && e.status === 0 && /resource/.test(e.message));
  await assert.rejects(c.request("t/gcra", "u", { copies: -1 }), (e) => /copies.*got -1/.test(e.message));
  await assert.rejects(c.request("t/gcra", "u", { copies: 1.5 }), (e) => /copies.*got 1.5/.test(e.message));
  await assert.rejects(c.request("t/gcra", "u", { copies: 1, minCopies: 2 }), (e) => /minCopies.*at most copies/.test(e.message));
  await assert.rejects(c.request("t/gcra", "u", { maxWaitMs: -5 }), (e) => /maxWaitMs/.test(e.message));
  assert.equal(c.stats().errors, 3);
  assert.throws(() => new Client({ socket: a.sock, url: "http://127.0.0.1:1" }), /one, not both/);
  assert.throws(() => new Client({ socket: a.sock, timeoutMs: 0 }), /timeoutMs: must be an integer in \[1, 60000\], got 0/);
  assert.throws(() => new Client({ url: "ftp://x" }), /url/);
  assert.throws(() => new Client({ socket: a.sock, env: { OBOL_KILL_SWITCH: "maybe" } }), /OBOL_KILL_SWITCH.*maybe/);
  await c.close();
  await assert.rejects(c.request("t/gcra", "u"), ClosedError);
});

test("kill switch: the agent is asked, a rejection becomes a killed grant of every copy", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const log = memLogger();
  const c = new Client({ socket: a.sock, timeoutMs: 2000, env: { OBOL_KILL_SWITCH: "1" }, logger: log });
  t.after(() => c.close());
  assert.equal(c.killSwitch, true);
  assert.equal((await c.request("t/hour", "k")).killed, false);
  const d = await c.request("t/hour", "k");
  assert.equal(d.granted, 1);
  assert.equal(d.killed, true);
  assert.equal(d.retryAfterMs, 0);
  assert.equal(d.reply.granted, 0);
  await c.request("t/hour", "k");
  assert.equal(c.stats().killed, 2);
  assert.equal(log.lines.length, 1, log.lines.join("\n"));
  c.setKillSwitch(false);
  assert.equal((await c.request("t/hour", "k")).granted, 0);
});

test("maxWaitMs retries a rejection until granted, never before retry_after", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  // The first grant is after start; the next one cannot come before 200 ms
  // after it (the resource's period).
  const start = Date.now();
  assert.equal((await c.request("t/slow", "w")).granted, 1);
  const d = await c.request("t/slow", "w", { maxWaitMs: 5000 });
  assert.equal(d.granted, 1);
  assert.ok(d.retries >= 1);
  assert.ok(Date.now() - start >= 190, `granted after ${Date.now() - start} ms`);
  // A wait shorter than retry_after returns the rejection at once.
  await c.request("t/hour", "w");
  const r = await c.request("t/hour", "w", { maxWaitMs: 10 });
  assert.equal(r.granted, 0);
  assert.equal(r.retries, 0);
});

test("AbortSignal: an aborted call throws the signal's reason, also while waiting", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(c.request("t/gcra", "s", { signal: ac.signal }), { name: "AbortError" });
  await c.request("t/hour", "s");
  const ac2 = new AbortController();
  const p = c.request("t/hour", "s", { maxWaitMs: 60000, signal: ac2.signal });
  // Abort once the first rejection came back and the client sleeps.
  setImmediate(() => ac2.abort());
  await assert.rejects(p, { name: "AbortError" });
});

test("check: the RateLimit fields and Retry-After", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  const d = await c.check("t/tiers", "c");
  assert.equal(d.granted, 1);
  assert.match(d.rateLimitPolicy, /q=5/);
  assert.match(d.rateLimit, /r=4/);
  assert.equal(d.remaining, 4);
  await c.check("t/hour", "c");
  const r = await c.check("t/hour", "c");
  assert.equal(r.granted, 0);
  assert.ok(r.retryAfterMs >= 1000, `retryAfterMs ${r.retryAfterMs}`);
  assert.match(r.rateLimit, /r=0/);
  await assert.rejects(c.check("nope/x", "c"), (e) => e.code === Codes.unknownResource);
});

test("batch: decisions and per-item errors, in order; refund", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  const rs = await c.batch([
    { resource: "t/hour", domain: "b" },
    { resource: "t/hour", domain: "b" },
    { resource: "nope/x", domain: "b" },
    { resource: "", domain: "b" },
    { resource: "t/gcra", domain: "b", copies: 4 },
  ]);
  assert.equal(rs[0].decision.granted, 1);
  assert.equal(rs[1].decision.granted, 0);
  assert.equal(rs[2].error.code, Codes.unknownResource);
  assert.ok(rs[2].error instanceof UnknownResourceError);
  assert.equal(rs[2].error.status, 404);
  assert.match(rs[3].error.message, /batch\[3\]\.resource/);
  assert.equal(rs[4].decision.granted, 4);
  assert.equal(await c.refund("t/gcra", "b", 2), 18);
  // Past one call's 1000 items the list is split.
  const many = await c.batch(Array.from({ length: 2500 }, (_, i) => ({ resource: "open/x", domain: "d" + (i % 7), copies: 0 })));
  assert.equal(many.length, 2500);
  assert.ok(many.every((r) => r.decision && !r.decision.degraded));
});

test("settleLater, settle and reset", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000, logger: memLogger() });
  t.after(() => c.close());
  const d = await c.request("t/gcra", "s", { copies: 15, settleLater: true });
  assert.equal(d.granted, 15);
  assert.equal(typeof d.ticket, "string");
  assert.equal(d.reply.ticket, d.ticket);
  const st = await c.settle(d.ticket, 4); // 11 of the estimate given back
  assert.deepEqual([st.charged, st.degraded], [-11, false]);
  assert.equal(st.remaining, (await c.request("t/gcra", "s", { copies: 0 })).remaining);
  await assert.rejects(c.settle(d, 4), (e) => e instanceof AlreadySettledError && e.code === Codes.alreadySettled && e.status === 409);
  await assert.rejects(c.settle("c-none", 4), (e) => e instanceof UnknownIdError && e.code === Codes.unknownTicket && e.status === 404);
  assert.equal((await c.request("t/gcra", "s", { copies: 0 })).ticket, undefined); // without settleLater

  // More than the estimate: charged at once, past the limit.
  const big = await c.request("t/hour", "s", { settleLater: true });
  assert.equal((await c.settle(big, 3)).charged, 2);
  // A rejection has no ticket; nor has a killed grant.
  const r = await c.request("t/hour", "s", { settleLater: true });
  assert.deepEqual([r.granted, r.ticket], [0, undefined]);
  c.setKillSwitch(true);
  const k = await c.request("t/hour", "s", { settleLater: true });
  assert.deepEqual([k.granted, k.killed, k.ticket], [1, true, undefined]);
  c.setKillSwitch(false);

  await c.reset("t/hour", "s");
  assert.equal((await c.request("t/hour", "s")).granted, 1);
  await c.reset("t/hour", "s");
  await c.reset("t/hour", "s"); // again: harmless
  await assert.rejects(c.reset("nope/x", "u"), (e) => e instanceof UnknownResourceError && e.status === 404);
  await assert.rejects(c.reset("t/copies", "u"), (e) => e instanceof WrongKindError);

  await assert.rejects(c.settle("c-x", -1), (e) => e instanceof BadRequestError && e.status === 0 && /copies.*got -1/.test(e.message));
  await assert.rejects(c.request("t/gcra", "s", { settleLater: "yes" }), (e) => e instanceof BadRequestError && /settleLater/.test(e.message));
  await assert.rejects(c.reset("", "u"), (e) => e instanceof BadRequestError && /resource/.test(e.message));
  assert.equal(c.stats().degraded, 0);
  await c.close();
  await assert.rejects(c.settle("c-x", 1), ClosedError);
  await assert.rejects(c.reset("t/hour", "s"), ClosedError);
});

test("admit/complete and pace/observe", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  const ad = await c.admit("t/adaptive");
  assert.equal(ad.admitted, true);
  assert.equal(typeof ad.ticket, "string");
  assert.equal(typeof (await c.complete(ad, "success")), "number");
  const r = await c.admitted("t/adaptive", async () => 42);
  assert.deepEqual([r.admitted, r.value], [true, 42]);
  await assert.rejects(c.complete("x", "meh"), /outcome/);
  const wait = await c.pace("t/pacer");
  assert.ok(wait >= 0);
  await c.observe("t/pacer", 200, { "RateLimit-Remaining": "50" });
  await c.observe("t/pacer", 429, 0);
  await assert.rejects(c.observe("t/pacer", 99), /status: must be an integer in \[100, 599\], got 99/);
  await assert.rejects(c.pace("t/gcra"), (e) => e.code === Codes.wrongKind);
});

test("url: the same calls over loopback HTTP, with a path prefix refused by the agent as not found", { skip: noAgent }, async (t) => {
  const a = await startAgent(t, undefined, { http: true });
  assert.ok(a.http, "the agent's started line names its HTTP address");
  const c = new Client({ url: `http://${a.http}`, timeoutMs: 2000 });
  t.after(() => c.close());
  assert.equal((await c.request("t/hour", "h")).granted, 1);
  assert.equal((await c.request("t/hour", "h")).granted, 0);
  const h = await c.reserve("t/two", "h");
  assert.equal(h.granted, 1);
  await h.release();
  const p = new Client({ url: `http://${a.http}/prefix`, timeoutMs: 2000 });
  t.after(() => p.close());
  await assert.rejects(p.request("t/hour", "h"), (e) => e instanceof ObolError && e.status === 404);
});

test("the default socket follows the agent's rule", async () => {
  const { defaultSocket } = await import("../esm/index.mjs");
  assert.equal(defaultSocket({ OBOL_SOCKET: "/x/a.sock", XDG_RUNTIME_DIR: "/run/user/1" }), "/x/a.sock");
  assert.equal(defaultSocket({ XDG_RUNTIME_DIR: "/run/user/1" }), "/run/user/1/obol.sock");
  const fallback = defaultSocket({});
  assert.ok(fallback === "/run/obol/obol.sock" || fallback === `/tmp/obol-${process.getuid()}/obol.sock`, fallback);
  assert.equal(new Client({ env: { OBOL_SOCKET: "/x/b.sock" } }).socket, "/x/b.sock");
  assert.throws(() => new Client({ env: { OBOL_SOCKET: "off" } }), /OBOL_SOCKET is off/);
});
