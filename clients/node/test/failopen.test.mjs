// The fail-open matrix, against fake agents: every way the agent can fail
// gives a grant of minCopies marked degraded, counted, and logged at most
// once per interval; client errors still throw.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as path from "node:path";
import { performance } from "node:perf_hooks";
import transport from "../dist/transport.js";
import { Client, ObolError, Codes, AgentUnavailableError } from "../esm/index.mjs";
import { fakeAgent, tempDir, memLogger } from "./helpers.mjs";

const MODES = ["hang", "reset", "500", "503", "garbage", "badjson", "redirect", "half"];

for (const mode of MODES) {
  test(`fails open: ${mode}`, async (t) => {
    const f = await fakeAgent(t, mode);
    const log = memLogger();
    const c = new Client({ socket: f.sock, timeoutMs: 50, timeoutPauseMs: 0, logger: log });
    t.after(() => c.close());
    const d = await c.request("t/x", "u", { copies: 3, minCopies: 2 });
    assert.deepEqual(
      { granted: d.granted, degraded: d.degraded, killed: d.killed, retryAfterMs: d.retryAfterMs },
      { granted: 2, degraded: true, killed: false, retryAfterMs: 0 },
    );
    assert.deepEqual(d.reply, {});
    const none = await c.request("t/x", "u", { copies: 3, minCopies: 0 });
    assert.equal(none.granted, 0);
    assert.equal(none.degraded, true);
    const ck = await c.check("t/x", "u");
    assert.equal(ck.degraded, true);
    assert.equal(ck.granted, 1);
    const b = await c.batch([{ resource: "t/x", domain: "u" }, { resource: "t/x", domain: "v", copies: 2, minCopies: 1 }]);
    assert.deepEqual(b.map((r) => [r.decision.granted, r.decision.degraded]), [[1, true], [1, true]]);
    assert.equal(await c.refund("t/x", "u", 1), -1);
    const sl = await c.request("t/x", "u", { copies: 3, minCopies: 2, settleLater: true });
    assert.deepEqual([sl.granted, sl.degraded, sl.ticket], [2, true, undefined]);
    assert.deepEqual(await c.settle("c-real", 2), { charged: 0, remaining: 0, degraded: true });
    const h = await c.reserve("t/c", "u", { copies: 4, minCopies: 1 });
    assert.deepEqual([h.granted, h.degraded, h.held], [1, true, 0]);
    assert.equal(await h.transfer(), "degraded:1");
    await h.release();
    assert.equal(await c.pace("t/p"), 0);
    await c.observe("t/p", 200);
    const ad = await c.admit("t/a");
    assert.deepEqual([ad.admitted, ad.degraded], [true, true]);
    assert.equal(await c.complete(ad), undefined);
    const s = c.stats();
    assert.ok(s.degraded >= 11, JSON.stringify(s));
    assert.equal(s.errors, 0);
    // A reset does not fail open: the reset did not happen.
    await assert.rejects(c.reset("t/x", "u"), (e) => e instanceof AgentUnavailableError && /reset of "t\/x" for "u" not made/.test(e.message));
    assert.equal(c.stats().errors, 0);
    // Logged once for all of them (the interval is a minute).
    assert.equal(log.lines.length, 1, log.lines.join("\n"));
    assert.match(log.lines[0], /failing open/);
    // Bad arguments are still client errors.
    await assert.rejects(c.request("", "u"), (e) => e instanceof ObolError && e.code === Codes.badRequest);
  });
}

test("fails open: the socket is missing", async (t) => {
  const c = new Client({ socket: path.join(tempDir(t), "none.sock"), logger: memLogger() });
  t.after(() => c.close());
  const d = await c.request("t/x", "u");
  assert.deepEqual([d.granted, d.degraded], [1, true]);
  const h = await c.seize("some-real-id");
  assert.deepEqual([h.granted, h.degraded], [0, true]);
  const k = await c.seize("degraded:3");
  assert.deepEqual([k.granted, k.degraded], [3, true]);
  // No ticket (a degraded grant's): nothing to settle, nothing asked.
  const calls = c.stats().calls;
  assert.deepEqual(await c.settle(d.ticket, 5), { charged: 0, remaining: 0, degraded: false });
  assert.deepEqual(await c.settle(d, 5), { charged: 0, remaining: 0, degraded: false });
  assert.deepEqual(await c.settle("", 5), { charged: 0, remaining: 0, degraded: false });
  assert.equal(c.stats().calls, calls);
  await assert.rejects(c.reset("t/x", "u"), AgentUnavailableError);
});

test("a 4xx not in the agent's format is a client error with an empty code", async (t) => {
  const f = await fakeAgent(t, (req, res) => {
    res.writeHead(403, { "content-type": "text/plain" });
    res.end("forbidden by a proxy");
  });
  const c = new Client({ socket: f.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  await assert.rejects(c.request("t/x", "u"), (e) => e instanceof ObolError && e.status === 403 && e.code === "");
  assert.equal(c.stats().degraded, 0);
});

test("a timeout pauses asking: within timeoutPauseMs, decisions are degraded at once", async (t) => {
  const f = await fakeAgent(t, "hang");
  const c = new Client({ socket: f.sock, timeoutMs: 30, timeoutPauseMs: 60000, logger: memLogger() });
  t.after(() => c.close());
  await c.request("t/x", "u");
  assert.equal(f.calls.length, 1);
  const d = await c.request("t/x", "u");
  assert.equal(d.degraded, true);
  assert.equal(f.calls.length, 1, "the paused call must not connect");
});

// The timeout's rules, checked without timing bounds that a busy machine
// could break: a call is never given up before timeoutMs has passed since
// it started, and time spent before the request goes out (connecting
// included) counts.

/** Blocks the event loop for ms (a synchronous wait). */
function block(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

test("a timed-out call is degraded no earlier than timeoutMs after it started", async (t) => {
  const f = await fakeAgent(t, "hang");
  const c = new Client({ socket: f.sock, timeoutMs: 15, timeoutPauseMs: 0, logger: memLogger() });
  t.after(() => c.close());
  for (let i = 0; i < 50; i++) {
    const t0 = performance.now();
    const d = i % 2 ? await c.check("t/x", "u") : await c.request("t/x", "u");
    const took = performance.now() - t0;
    assert.equal(d.degraded, true);
    assert.ok(took >= 15, `call ${i} degraded after ${took.toFixed(3)} ms, before its timeoutMs (15)`);
  }
});

test("the deadline runs from the call's start: a slow connect counts, and a reply after the deadline is not taken", async (t) => {
  const f = await fakeAgent(t, (req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"granted":1}');
  });
  const c = new Client({ socket: f.sock, timeoutMs: 20, timeoutPauseMs: 0, logger: memLogger() });
  t.after(() => c.close());
  assert.equal((await c.request("t/x", "u")).degraded, false);
  // Connecting takes 30 ms of the call's 20 (a synchronous wait inside
  // http.request): the deadline has passed before the request is even
  // written, so the call is degraded at the loop's next timer turn, before
  // the agent (in this process) can have read the request.
  const agent = c.t.agent;
  const orig = agent.createConnection;
  agent.createConnection = function (...a) {
    block(30);
    return orig.apply(this, a);
  };
  agent.destroy(); // no kept-alive connection: the next call connects
  const d = await c.request("t/x", "u");
  assert.equal(d.degraded, true, "the call should time out: its connect took longer than timeoutMs");
  agent.createConnection = orig;
  assert.equal((await c.request("t/x", "u")).degraded, false);
});

test("Deadline: fires once, never synchronously, never before its time; cancel stops it", async () => {
  const { Deadline, now } = transport;
  for (const ms of [0, 0.3, 1, 2.5, 7, 12]) {
    const at = now() + ms;
    let fired = 0;
    let firedAt = 0;
    const done = new Promise((resolve) => {
      new Deadline(at, () => {
        fired++;
        firedAt = now();
        resolve();
      });
    });
    assert.equal(fired, 0, "fired synchronously");
    await done;
    assert.ok(firedAt >= at, `${ms} ms: fired ${(at - firedAt).toFixed(3)} ms early`);
    await new Promise((r) => setTimeout(r, 5));
    assert.equal(fired, 1);
  }
  let fired = false;
  // Cancelled before its first turn, in either stage: a timer (3 ms
  // away) or the polling of the last 1 to 2 ms (0.2 ms away).
  for (const ms of [3, 0.2]) {
    const d = new Deadline(now() + ms, () => {
      fired = true;
    });
    d.cancel();
  }
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(fired, false, "a cancelled deadline fired");
});

test("Deadline: an idle loop naps through the last 1 to 2 ms in a few turns; a busy loop is never put to sleep", async (t) => {
  const { Deadline, now } = transport;
  const wait = Atomics.wait;
  const si = globalThis.setImmediate;
  let naps = 0;
  let turns = 0;
  Atomics.wait = (...a) => {
    naps++;
    return wait(...a);
  };
  globalThis.setImmediate = (...a) => {
    turns++;
    return si(...a);
  };
  t.after(() => {
    Atomics.wait = wait;
    globalThis.setImmediate = si;
  });
  const at = now() + 12;
  await new Promise((resolve) => new Deadline(at, resolve));
  assert.ok(now() >= at);
  // Without naps the window is hundreds of turns, each an Immediate.
  assert.ok(naps >= 1, "an idle loop did not nap");
  assert.ok(turns < 60, `an idle loop took ${turns} turns`);

  // Every turn of a busy loop holds 0.1 ms of other work: longer than an
  // idle turn, so the deadline polls without sleeping.
  naps = 0;
  let busy = true;
  const work = () => {
    block(0.1);
    if (busy) si(work);
  };
  si(work);
  const at2 = now() + 8;
  await new Promise((resolve) => new Deadline(at2, resolve));
  busy = false;
  assert.ok(now() >= at2);
  assert.equal(naps, 0, "a busy loop was put to sleep");
});

test("keep-alive: sequential calls share one connection; a closed idle one is replaced", async (t) => {
  let conns = 0;
  const f = await fakeAgent(t, (req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"granted":1,"remaining":3}');
  });
  f.server.on("connection", () => conns++);
  const c = new Client({ socket: f.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  for (let i = 0; i < 20; i++) assert.equal((await c.request("t/x", "u")).granted, 1);
  assert.equal(conns, 1);
  // The agent closes its idle connections (as it does after its idle
  // timeout, or when it restarts): the next call is sent again on a new one.
  f.server.closeIdleConnections?.();
  const d = await c.request("t/x", "u");
  assert.equal(d.degraded, false);
});

test("a reset on a reused connection is sent again once, on a new connection", async (t) => {
  let n = 0;
  const f = await fakeAgent(t, (req, res) => {
    n++;
    if (n === 2) {
      // Drop the kept-alive connection without a reply.
      req.socket.destroy();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"granted":1}');
  });
  const c = new Client({ socket: f.sock, timeoutMs: 2000, logger: memLogger() });
  t.after(() => c.close());
  assert.equal((await c.request("t/x", "u")).degraded, false);
  const d = await c.request("t/x", "u");
  assert.equal(d.degraded, false, "the dropped call is sent again");
  assert.equal(n, 3);
});

test("the warning is at most once per logIntervalMs, with the count since the last", async (t) => {
  const log = memLogger();
  const c = new Client({ socket: path.join(tempDir(t), "none.sock"), logger: log, logIntervalMs: 60000 });
  t.after(() => c.close());
  for (let i = 0; i < 50; i++) await c.request("t/x", "u");
  assert.equal(log.lines.length, 1);
  assert.equal(c.stats().degraded, 50);
  const every = memLogger();
  const c2 = new Client({ socket: path.join(tempDir(t), "none.sock"), logger: every, logIntervalMs: 0 });
  t.after(() => c2.close());
  for (let i = 0; i < 3; i++) await c2.request("t/x", "u");
  assert.equal(every.lines.length, 3);
});

test("kill switch with an agent that cannot answer: degraded, not killed", async (t) => {
  const c = new Client({ socket: path.join(tempDir(t), "none.sock"), killSwitch: true, logger: memLogger() });
  t.after(() => c.close());
  const d = await c.request("t/x", "u", { copies: 3, minCopies: 1 });
  assert.deepEqual([d.granted, d.degraded, d.killed], [1, true, false]);
});

test("a queued release is sent again by the session's keepalive once the agent answers", async (t) => {
  let releases = 0;
  let fail = true;
  const f = await fakeAgent(t, (req, res) => {
    const json = (status, v) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(v));
    };
    if (req.url === "/v1/sessions") return json(200, { session: "s1", ttl_ms: 90 });
    if (req.url === "/v1/sessions/s1/keepalive") return fail ? json(503, { error: { code: "not_ready", message: "x" } }) : json(200, { session: "s1", ttl_ms: 90 });
    if (req.url === "/v1/reserve") return json(200, { granted: 2, hold: "h1" });
    if (req.url === "/v1/release") {
      if (fail) return json(503, { error: { code: "not_ready", message: "x" } });
      releases++;
      return json(200, { released: 2, held: 0 });
    }
    json(404, { error: { code: "bad_request", message: "unexpected " + req.url } });
  });
  const c = new Client({ socket: f.sock, timeoutMs: 2000, sessionTtlMs: 90, logger: memLogger() });
  t.after(() => c.close());
  const h = await c.reserve("t/c", "u", { copies: 2 });
  assert.equal(h.held, 2);
  await h.release();
  assert.equal(c.stats().pendingReleases, 1);
  fail = false;
  // The keepalive runs every 30 ms: wait until it has sent the release.
  while (c.stats().pendingReleases > 0) await new Promise((r) => setTimeout(r, 10));
  assert.equal(releases, 1);
});
