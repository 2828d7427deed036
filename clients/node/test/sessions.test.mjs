// Sessions and holds against a real agent: reserve, release, transfer,
// seize, session(), keepalive, and a lost session.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, ObolError, Codes } from "../esm/index.mjs";
import { startAgent, noAgent, memLogger } from "./helpers.mjs";

test("reserve, release, and a rejection", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  const h = await c.reserve("t/two", "acme", { copies: 2 });
  assert.deepEqual([h.granted, h.held, h.degraded], [2, 2, false]);
  assert.ok(h.id);
  const r = await c.reserve("t/two", "acme");
  assert.equal(r.granted, 0);
  assert.equal(r.id, "");
  await h.releaseN(1);
  assert.equal(h.held, 1);
  await assert.rejects(h.releaseN(5), /at most the 1 held, got 5/);
  await h.release();
  await h.release(); // idempotent
  assert.equal(h.held, 0);
  const p = await c.reserve("t/two", "acme", { copies: 3, minCopies: 1 });
  assert.equal(p.granted, 2);
  await p.release();
  await assert.rejects(c.reserve("t/gcra", "acme"), (e) => e instanceof ObolError && e.code === Codes.wrongKind);
  assert.equal(c.stats().sessions, 1);
});

test("transfer and seize between two clients", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c1 = new Client({ socket: a.sock, timeoutMs: 2000 });
  const c2 = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => Promise.all([c1.close(), c2.close()]));
  const h = await c1.reserve("t/copies", "d", { copies: 3 });
  const id = await h.transfer(2, 5000);
  assert.equal(h.held, 1);
  const h2 = await c2.seize(id);
  assert.deepEqual([h2.granted, h2.resource, h2.domain], [2, "t/copies", "d"]);
  await assert.rejects(c2.seize(id), (e) => e.code === Codes.unknownTransfer);
  // Closing c2 ends its session: the agent releases the seized copies.
  await c2.close();
  const more = await c1.reserve("t/copies", "d", { copies: 4 });
  assert.equal(more.granted, 4);
});

test("session(fn) releases its copies when fn ends, even when it throws", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  const got = await c.session(async (s) => {
    const h = await s.reserve("t/two", "x", { copies: 2 });
    return h.granted;
  });
  assert.equal(got, 2);
  await assert.rejects(
    c.session(async (s) => {
      await s.reserve("t/two", "x", { copies: 2 });
      throw new Error("boom");
    }),
    /boom/,
  );
  const h = await c.reserve("t/two", "x", { copies: 2 });
  assert.equal(h.granted, 2, "both sessions' copies were released");
});

test("keepalive renews the lease; a lost session is reopened by the next reserve", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000, sessionTtlMs: 1500 });
  t.after(() => c.close());
  const h = await c.reserve("t/two", "k", { copies: 2 });
  // Wait until four keepalives (one every 500 ms) have been sent: more
  // than the TTL has passed, and the agent must still hold the copies.
  const base = c.stats().calls;
  while (c.stats().calls < base + 4) await new Promise((r) => setTimeout(r, 20));
  const r = await c.reserve("t/two", "k");
  assert.equal(r.granted, 0, "the copies are still held: the session was kept alive");
  await h.release();
  // Another client ends this client's session behind its back.
  const sid = c.main.sessionId;
  await fetchDelete(a.sock, `/v1/sessions/${sid}`);
  const again = await c.reserve("t/two", "k", { copies: 2 });
  assert.equal(again.granted, 2);
  assert.notEqual(c.main.sessionId, sid);
});

test("maxWaitMs on reserve waits for a release", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  const h = await c.reserve("t/two", "w", { copies: 2 });
  const p = c.reserve("t/two", "w", { maxWaitMs: 10000 });
  await h.release();
  const got = await p;
  assert.equal(got.granted, 1);
});

test("a release the agent cannot take is queued and retried by the keepalive", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000, sessionTtlMs: 60000, logger: memLogger() });
  t.after(() => c.close());
  const h = await c.reserve("t/two", "q", { copies: 1 });
  await a.stop();
  await h.release();
  assert.equal(c.stats().pendingReleases, 1);
  assert.equal(c.stats().degraded, 1);
});

function fetchDelete(sock, p) {
  return new Promise((resolve, reject) => {
    import("node:http").then(({ request }) => {
      const req = request({ socketPath: sock, host: "localhost", path: p, method: "DELETE" }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      });
      req.on("error", reject);
      req.end();
    });
  });
}
