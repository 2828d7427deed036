// Limits set by the request: the `limit` option of request, batch items,
// refund and reset as the agent receives it, the mistakes the client
// refuses before asking, and the agent's bad_limit and too_many errors;
// then against a real agent whose namespaces allow such limits.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { Client, ObolError, Codes, BadRequestError, BadLimitError, LimitError, UnknownResourceError } from "../esm/index.mjs";
import { fakeAgent, startAgent, noAgent, tempDir, memLogger } from "./helpers.mjs";

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function reply(res, status, v) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(v));
}

/** A fake agent that grants everything, or answers `error` (an {code, message}) to every call. */
async function echoAgent(t, error) {
  let f;
  f = await fakeAgent(t, (req, res) => {
    if (error) return reply(res, error.status, { error: { code: error.code, message: error.message } });
    const body = JSON.parse(f.bodies[f.bodies.length - 1] || "{}");
    switch (req.url) {
      case "/v1/request":
        return reply(res, 200, { granted: body.copies, remaining: 1, retry_after_ms: 0, reset_after_ms: 0, ...(body.settle ? { ticket: "c-1" } : {}) });
      case "/v1/batch":
        return reply(res, 200, { responses: body.requests.map((r) => ({ granted: r.copies, remaining: 1 })) });
      case "/v1/refund":
        return reply(res, 200, { remaining: 7 });
      case "/v1/reset":
        return reply(res, 200, { reset: true });
    }
    reply(res, 404, { error: { code: "not_found", message: req.url } });
  });
  return f;
}

const sent = (f) => JSON.parse(f.bodies[f.bodies.length - 1]);

test("limit on the wire: request, batch, refund, reset", async (t) => {
  const f = await echoAgent(t);
  const c = new Client({ socket: f.sock, timeoutMs: 2000 });
  t.after(() => c.close());

  const gcra = { kind: "gcra", burst: 2, count: 1, period: "1s" };
  const d = await c.request("req/a", "u", { limit: gcra });
  assert.equal(d.granted, 1);
  assert.equal(f.calls.at(-1), "/v1/request");
  assert.deepEqual(sent(f), { resource: "req/a", domain: "u", copies: 1, min_copies: 1, limit: { kind: "gcra", burst: 2, count: 1, period: "1s" } });

  // A period in milliseconds goes as a Go duration; a fraction of one, in nanoseconds.
  await c.request("req/a", "u", { limit: { kind: "gcra", burst: 10, count: 5, period: 1500 } });
  assert.deepEqual(sent(f).limit, { kind: "gcra", burst: 10, count: 5, period: "1500ms" });
  await c.request("req/a", "u", { limit: { kind: "gcra", burst: 10, count: 5, period: 0.25 } });
  assert.equal(sent(f).limit.period, "250000ns");
  await c.request("req/a", "u", { limit: { kind: "gcra", burst: 10, count: 5, period: 3_600_000 } });
  assert.equal(sent(f).limit.period, "3600000ms");

  const tiers = { kind: "tiers", tiers: "5,1,1,0,50,5,5,15" };
  const s = await c.request("req/t", "u", { copies: 2, minCopies: 1, settleLater: true, limit: tiers });
  assert.equal(s.ticket, "c-1");
  assert.deepEqual(sent(f), { resource: "req/t", domain: "u", copies: 2, min_copies: 1, settle: true, limit: tiers });

  // Without the option, no field.
  await c.request("req/a", "u");
  assert.equal("limit" in sent(f), false);
  await c.request("req/a", "u", { limit: undefined });
  assert.equal("limit" in sent(f), false);

  const b = await c.batch([
    { resource: "req/a", domain: "u", limit: gcra },
    { resource: "cfg/x", domain: "u", copies: 2 },
    { resource: "req/t", domain: "v", limit: tiers },
  ]);
  assert.deepEqual(b.map((r) => r.decision.granted), [1, 2, 1]);
  assert.equal(f.calls.at(-1), "/v1/batch");
  assert.deepEqual(sent(f).requests, [
    { resource: "req/a", domain: "u", copies: 1, min_copies: 1, limit: gcra },
    { resource: "cfg/x", domain: "u", copies: 2, min_copies: 2 },
    { resource: "req/t", domain: "v", copies: 1, min_copies: 1, limit: tiers },
  ]);

  assert.equal(await c.refund("req/a", "u", 1, { limit: { kind: "gcra", burst: 2, count: 1, period: 1000 } }), 7);
  assert.equal(f.calls.at(-1), "/v1/refund");
  assert.deepEqual(sent(f), { resource: "req/a", domain: "u", copies: 1, limit: { kind: "gcra", burst: 2, count: 1, period: "1000ms" } });
  assert.equal(await c.refund("req/a", "u", 1), 7); // the signature without options still works
  assert.deepEqual(sent(f), { resource: "req/a", domain: "u", copies: 1 });

  await c.reset("req/t", "u", { limit: tiers });
  assert.equal(f.calls.at(-1), "/v1/reset");
  assert.deepEqual(sent(f), { resource: "req/t", domain: "u", limit: tiers });
  await c.reset("req/t", "u");
  assert.deepEqual(sent(f), { resource: "req/t", domain: "u" });
  assert.deepEqual([c.stats().degraded, c.stats().errors], [0, 0]);
});

test("limit: the client refuses obvious mistakes before asking, naming the option", async (t) => {
  const f = await echoAgent(t);
  const c = new Client({ socket: f.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  const g = { kind: "gcra", burst: 2, count: 1, period: "1s" };
  const cases = [
    [null, /^obol: limit: must be \{kind: "gcra"/],
    ["gcra", /^obol: limit: must be \{kind: "gcra".*got "gcra"/],
    [[g], /^obol: limit: must be/],
    [{ burst: 2, count: 1, period: "1s" }, /^obol: limit\.kind: must be "gcra" or "tiers", got undefined/],
    [{ ...g, kind: "leaky" }, /^obol: limit\.kind: must be "gcra" or "tiers", got "leaky"/],
    [{ ...g, kind: "GCRA" }, /^obol: limit\.kind: .*got "GCRA"/],
    [{ ...g, burst: 0 }, /^obol: limit\.burst: must be an integer ≥ 1, got 0/],
    [{ ...g, burst: 1.5 }, /^obol: limit\.burst: .*got 1\.5/],
    [{ ...g, burst: "2" }, /^obol: limit\.burst: .*got "2"/],
    [{ ...g, count: -1 }, /^obol: limit\.count: .*got -1/],
    [{ kind: "gcra", burst: 2, period: "1s" }, /^obol: limit\.count: .*got undefined/],
    [{ ...g, period: 0 }, /^obol: limit\.period: .*positive, finite number of milliseconds, got 0/],
    [{ ...g, period: -5 }, /^obol: limit\.period: .*got -5/],
    [{ ...g, period: Infinity }, /^obol: limit\.period: .*got Infinity/],
    [{ ...g, period: NaN }, /^obol: limit\.period: .*got NaN/],
    [{ ...g, period: "" }, /^obol: limit\.period: .*got ""/],
    [{ ...g, period: 1e-9 }, /^obol: limit\.period: must be at least 1 ns/],
    [{ kind: "gcra", burst: 2, count: 1 }, /^obol: limit\.period: .*got undefined/],
    [{ ...g, tiers: "5,1,1,0" }, /^obol: limit\.tiers: not a field of a gcra limit/],
    [{ kind: "tiers", tiers: 5 }, /^obol: limit\.tiers: must be a string .*got 5/],
    [{ kind: "tiers" }, /^obol: limit\.tiers: must be a string .*got undefined/],
    [{ kind: "tiers", tiers: "5,1,1,0", burst: 2 }, /^obol: limit\.burst: not a field of a tiers limit/],
  ];
  const isBad = (re) => (e) => e instanceof BadRequestError && e.status === 0 && e.code === Codes.badRequest && re.test(e.message);
  for (const [limit, re] of cases) {
    await assert.rejects(c.request("req/a", "u", { limit }), isBad(re), JSON.stringify(limit));
    await assert.rejects(c.refund("req/a", "u", 1, { limit }), isBad(re), JSON.stringify(limit));
    await assert.rejects(c.reset("req/a", "u", { limit }), isBad(re), JSON.stringify(limit));
  }
  assert.equal(f.calls.length, 0, "nothing sent");

  // A batch item's mistake is that item's error; the others are sent.
  const b = await c.batch([
    { resource: "req/a", domain: "u", limit: g },
    { resource: "req/a", domain: "v", limit: { ...g, burst: 0 } },
    { resource: "req/a", domain: "w", limit: { kind: "tiers", tiers: ["5,1,1,0"] } },
  ]);
  assert.equal(b[0].decision.granted, 1);
  assert.ok(isBad(/^obol: batch\[1\]\.limit\.burst: must be an integer ≥ 1, got 0/)(b[1].error), b[1].error?.message);
  assert.ok(isBad(/^obol: batch\[2\]\.limit\.tiers: must be a string/)(b[2].error), b[2].error?.message);
  assert.deepEqual(sent(f).requests.map((r) => r.domain), ["u"]);

  // reserve (copies) takes no limit.
  await assert.rejects(c.reserve("jobs/x", "u", { limit: g }), isBad(/^obol: limit: not for reserve/));
  // Refused also when the agent is down.
  const down = new Client({ socket: path.join(tempDir(t), "none.sock"), logger: memLogger() });
  t.after(() => down.close());
  await assert.rejects(down.request("req/a", "u", { limit: { ...g, period: -1 } }), isBad(/limit\.period/));
  const d = await down.request("req/a", "u", { limit: g });
  assert.deepEqual([d.granted, d.degraded], [1, true]); // a valid limit fails open as any request
});

test("bad_limit is a BadLimitError; too_many stays a LimitError", async (t) => {
  const msg = "limit.burst: must be ≥ 1, got 0";
  const f = await echoAgent(t, { status: 400, code: "bad_limit", message: msg });
  const c = new Client({ socket: f.sock, timeoutMs: 2000 });
  t.after(() => c.close());
  const g = { kind: "gcra", burst: 2, count: 1, period: "1s" };
  const isBadLimit = (e) =>
    e instanceof BadLimitError &&
    e instanceof ObolError &&
    e.name === "BadLimitError" &&
    e.status === 400 &&
    e.code === Codes.badLimit &&
    e.code === "bad_limit" &&
    e.message === `obol: bad_limit: ${msg}`;
  await assert.rejects(c.request("req/a", "u", { limit: g }), isBadLimit);
  await assert.rejects(c.refund("req/a", "u", 1, { limit: g }), isBadLimit);
  await assert.rejects(c.reset("req/a", "u", { limit: g }), isBadLimit); // a client error, not "reset not made"
  assert.deepEqual([c.stats().errors, c.stats().degraded], [3, 0]);
  // The CommonJS build gives the same class.
  const require = createRequire(import.meta.url);
  assert.equal(require("../dist/index.js").BadLimitError, BadLimitError);

  // In a batch, an item's bad_limit.
  const fb = await fakeAgent(t, (req, res) =>
    reply(res, 200, { responses: [{ granted: 1, remaining: 0 }, { error: { code: "bad_limit", message: msg } }, { error: { code: "too_many", message: "namespace \"req\": 1000 limits set by requests" } }] }),
  );
  const cb = new Client({ socket: fb.sock, timeoutMs: 2000 });
  t.after(() => cb.close());
  const b = await cb.batch([1, 2, 3].map((i) => ({ resource: "req/a", domain: `d${i}`, limit: g })));
  assert.equal(b[0].decision.granted, 1);
  assert.ok(isBadLimit(b[1].error), b[1].error?.message);
  assert.ok(b[2].error instanceof LimitError && b[2].error.status === 429 && b[2].error.code === Codes.tooMany);

  const ft = await echoAgent(t, { status: 429, code: "too_many", message: 'namespace "req": 100000 keys of limits set by requests' });
  const ct = new Client({ socket: ft.sock, timeoutMs: 2000 });
  t.after(() => ct.close());
  await assert.rejects(ct.request("req/a", "u", { limit: g }), (e) => e instanceof LimitError && e.status === 429 && /keys of limits/.test(e.message));
});

// ---- against a real agent ---------------------------------------------------

const LIMITS_CONFIG = `
namespaces:
  req: {request_limits: true}
  tenant: {request_limits: true}
  cap: {request_limits: true, max_request_limits: 1}
  open: {allow_unconfigured: true}
resources:
  req/conf: {kind: gcra, burst: 3, count: 1, period: 1h}
`;

test("limits set by the request, against the agent", { skip: noAgent }, async (t) => {
  const a = await startAgent(t, LIMITS_CONFIG);
  const c = new Client({ socket: a.sock, timeoutMs: 2000, logger: memLogger() });
  t.after(() => c.close());
  const two = { kind: "gcra", burst: 2, count: 1, period: "1h" };
  const grants = async (resource, domain, limit, n = 1) => (await c.request(resource, domain, { copies: n, limit })).granted;

  // A gcra limit of burst 2: two grants, then a rejection.
  assert.equal(await grants("req/api", "u", two), 1);
  assert.equal(await grants("req/api", "u", two), 1);
  const r = await c.request("req/api", "u", { limit: two });
  assert.equal(r.granted, 0);
  assert.ok(r.retryAfterMs > 0, JSON.stringify(r.reply));
  // The same limit written otherwise (3600000 ms is 1h) is the same key.
  assert.equal(await grants("req/api", "u", { ...two, period: 3_600_000 }), 0);
  // Another limit on the same name counts apart; so does another domain.
  const three = { ...two, burst: 3 };
  assert.equal(await grants("req/api", "u", three, 3), 3);
  assert.equal(await grants("req/api", "u", three), 0);
  assert.equal(await grants("req/api", "v", two, 2), 2);

  // refund and reset with the limit reach that key.
  assert.equal(await c.refund("req/api", "u", 1, { limit: two }), 1);
  assert.equal(await grants("req/api", "u", two), 1);
  assert.equal(await grants("req/api", "u", three), 0); // untouched
  await c.reset("req/api", "u", { limit: three });
  assert.equal(await grants("req/api", "u", three, 3), 3);
  assert.equal(await grants("req/api", "u", two), 0); // untouched

  // A tiers limit; batch items with and without a limit.
  const tiers = { kind: "tiers", tiers: "2,60,60,0" };
  const b = await c.batch([
    { resource: "req/t", domain: "u", limit: tiers },
    { resource: "req/t", domain: "u", limit: tiers },
    { resource: "req/t", domain: "u", limit: tiers },
    { resource: "req/conf", domain: "u" },
    { resource: "req/api", domain: "w", limit: two, copies: 2 },
  ]);
  assert.deepEqual(
    b.map((x) => x.decision?.granted),
    [1, 1, 0, 1, 2],
    JSON.stringify(b),
  );

  // A resource the config defines ignores a valid limit (burst 3, not 1).
  const one = { kind: "gcra", burst: 1, count: 1, period: "1h" };
  assert.equal(await grants("req/conf", "v", one, 3), 3);

  // settleLater with a limit: the ticket knows its key.
  const s = await c.request("req/s", "u", { copies: 2, settleLater: true, limit: two });
  assert.equal(typeof s.ticket, "string");
  assert.deepEqual([(await c.settle(s, 1)).charged, await grants("req/s", "u", two)], [-1, 1]);
  assert.deepEqual([c.stats().degraded, c.stats().errors], [0, 0]);
});

test("bad limits and namespaces that refuse them, against the agent", { skip: noAgent }, async (t) => {
  const a = await startAgent(t, LIMITS_CONFIG);
  const c = new Client({ socket: a.sock, timeoutMs: 2000, logger: memLogger() });
  t.after(() => c.close());
  const isBadLimit = (re) => (e) => e instanceof BadLimitError && e.status === 400 && e.code === Codes.badLimit && re.test(e.message);
  const g = { kind: "gcra", burst: 2, count: 1, period: "1s" };

  await assert.rejects(c.request("req/api", "u", { limit: { ...g, period: "1 parsec" } }), isBadLimit(/limit\.period/));
  await assert.rejects(c.request("req/api", "u", { limit: { kind: "tiers", tiers: "two,1,1,0" } }), isBadLimit(/limit\.tiers/));
  await assert.rejects(c.refund("req/api", "u", 1, { limit: { ...g, period: "soon" } }), isBadLimit(/limit\.period/));
  await assert.rejects(c.reset("req/api", "u", { limit: { ...g, period: "soon" } }), isBadLimit(/limit\.period/));
  // The config wins: a limit sent for a configured resource is not even read.
  assert.equal((await c.request("req/conf", "w", { limit: { ...g, period: "soon" } })).granted, 1);
  const b = await c.batch([
    { resource: "req/api", domain: "u", limit: g },
    { resource: "req/api", domain: "u", limit: { ...g, period: "soon" } },
  ]);
  assert.equal(b[0].decision?.granted, 1, JSON.stringify(b));
  assert.ok(isBadLimit(/limit\.period/)(b[1].error), b[1].error?.message);

  // Namespaces without request_limits refuse a limit; without one, an unknown resource is what it was.
  await assert.rejects(c.request("open/api", "u", { limit: g }), isBadLimit(/does not allow limits set by requests/));
  await assert.rejects(c.request("other/api", "u", { limit: g }), isBadLimit(/does not allow limits set by requests/));
  await assert.rejects(c.request("req/nolimit", "u"), (e) => e instanceof UnknownResourceError);

  // A namespace's cap of limits set by requests: too_many, a LimitError.
  assert.equal((await c.request("cap/a", "u", { limit: g })).granted, 1);
  await assert.rejects(c.request("cap/a", "u", { limit: { ...g, burst: 3 } }), (e) => e instanceof LimitError && e.status === 429 && e.code === Codes.tooMany);
  assert.equal(c.stats().degraded, 0);
});

test("the docs' example of limits set by the request runs", { skip: noAgent }, async (t) => {
  const text = fs.readFileSync(path.join(pkg, "..", "..", "docs", "client-node.md"), "utf8");
  const m = /### Limits set by the request\n[\s\S]*?```js\n([\s\S]*?)\n```/.exec(text);
  assert.ok(m, "no example in the section");
  const a = await startAgent(t, LIMITS_CONFIG);
  const dir = tempDir(t);
  fs.mkdirSync(path.join(dir, "node_modules", "@obol"), { recursive: true });
  fs.symlinkSync(pkg, path.join(dir, "node_modules", "@obol", "client"));
  const file = path.join(dir, "limits.mjs");
  // A new process's first call can pass the 20 ms default timeout, and the
  // calls after it then fail open: the example is run with a longer one.
  assert.ok(m[1].includes("new Client()"), m[1]);
  fs.writeFileSync(file, m[1].replace("new Client()", "new Client({ timeoutMs: 5000 })") + "\n");
  const { err, stdout, stderr } = await new Promise((resolve) =>
    execFile(process.execPath, [file], { env: { ...process.env, OBOL_SOCKET: a.sock }, timeout: 30000 }, (err, stdout, stderr) =>
      resolve({ err, stdout, stderr }),
    ),
  );
  assert.equal(err, null, `the example failed:\n--- stdout:\n${stdout}\n--- stderr:\n${stderr}`);
  assert.equal(stderr, "");
  assert.match(stdout, /^obol: bad_limit: limit\.period: must be a duration/);
});
