#!/usr/bin/env node
// The Node client's figures: decisions per second from one process, the
// client's cost per decision against a bare node:http call over the same
// socket, and how long a degraded grant takes with the socket missing and
// with an agent that accepts and never answers.
//
//   cd clients/node && npm ci && node bench.mjs [--agent PATH] [--n 20000] [--seconds 3] [--rounds 5] [--hung 500]
//
// Without --agent (or OBOL_AGENT_BIN) it builds the agent with go build.
import { execFileSync, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import * as readline from "node:readline";
import { fileURLToPath } from "node:url";
import { Client } from "./esm/index.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));

function flags() {
  const o = { agent: process.env.OBOL_AGENT_BIN, n: 20000, seconds: 3, rounds: 5, hung: 500 };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i++) {
    const k = a[i].replace(/^--/, "");
    if (!(k in o) || i + 1 >= a.length) {
      console.error(`usage: node bench.mjs [--agent PATH] [--n CALLS] [--seconds S] [--rounds R] [--hung CALLS]; bad argument ${JSON.stringify(a[i])}`);
      process.exit(2);
    }
    const v = a[++i];
    if (k === "agent") o.agent = v;
    else {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1) {
        console.error(`--${k}: must be a positive integer, got ${JSON.stringify(v)}`);
        process.exit(2);
      }
      o[k] = n;
    }
  }
  return o;
}

const o = flags();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "obolbench"));
const cleanup = [];
process.on("exit", () => {
  for (const f of cleanup) f();
  fs.rmSync(dir, { recursive: true, force: true });
});

if (!o.agent) {
  o.agent = path.join(dir, "agent");
  execFileSync("go", ["build", "-o", o.agent, "./cmd/agent"], { cwd: path.join(here, "..", ".."), stdio: "inherit" });
}

async function startAgent() {
  const sock = path.join(dir, "a.sock");
  fs.writeFileSync(path.join(dir, "c.yaml"), "resources:\n  bench/open: {kind: gcra, burst: 1000000000, count: 1000000000, period: 1s}\n");
  const child = spawn(o.agent, ["--config", path.join(dir, "c.yaml"), "--socket", sock, "--http", "off"], { stdio: ["ignore", "pipe", "pipe"] });
  cleanup.push(() => child.kill("SIGTERM"));
  await new Promise((resolve, reject) => {
    child.on("exit", (c) => reject(new Error(`agent exited ${c}`)));
    for (const s of [child.stdout, child.stderr]) {
      readline.createInterface({ input: s }).on("line", (l) => l.includes("obol agent started") && resolve());
    }
  });
  return sock;
}

const ns = () => process.hrtime.bigint();
const ms = (a, b) => Number(b - a) / 1e6;

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

// The bare call: node:http with a keep-alive agent over the same socket,
// JSON.stringify and JSON.parse, no failure handling.
function bareClient(sock) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  return (body) =>
    new Promise((resolve, reject) => {
      const s = JSON.stringify(body);
      const req = http.request(
        { socketPath: sock, host: "localhost", path: "/v1/request", method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(s) } },
        (res) => {
          const chunks = [];
          res.on("data", (c) => chunks.push(c));
          res.on("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString())));
        },
      );
      req.on("error", reject);
      req.end(s);
    });
}

const FIRST = `
const { Client } = require(".");
const c = new Client({ socket: process.argv[1], timeoutMs: 1000 });
const t0 = process.hrtime.bigint();
c.request("bench/open", "d").then(() => { console.log(Number(process.hrtime.bigint() - t0) / 1e6); return c.close(); });
`;

async function seqNsPerCall(fn, n) {
  const t0 = ns();
  for (let i = 0; i < n; i++) await fn(i);
  return Number(ns() - t0) / n;
}

async function main() {
  const sock = await startAgent();
  const c = new Client({ socket: sock, timeoutMs: 1000 });
  const bare = bareClient(sock);
  const body = { resource: "bench/open", domain: "d", copies: 1, min_copies: 1 };
  const viaClient = () => c.request("bench/open", "d");
  const viaBare = () => bare(body);

  console.log(`node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? "?"}), load ${os.loadavg().map((x) => x.toFixed(1)).join(" ")}`);
  // Warm up both paths (JIT, connections).
  await seqNsPerCall(viaClient, 2000);
  await seqNsPerCall(viaBare, 2000);

  // Overhead: alternate rounds so that both see the same machine.
  const ratios = [];
  const cs = [];
  const bs = [];
  // Each round interleaves blocks of 250 calls of each, so that a burst of
  // other work on the machine falls on both alike.
  const block = 250;
  for (let r = 0; r < o.rounds; r++) {
    let b = 0;
    let k = 0;
    for (let done = 0; done < o.n; done += block) {
      b += await seqNsPerCall(viaBare, block);
      k += await seqNsPerCall(viaClient, block);
    }
    const blocks = Math.ceil(o.n / block);
    bs.push(b / blocks);
    cs.push(k / blocks);
    ratios.push(k / b);
  }
  const f = (x) => (x / 1000).toFixed(1);
  console.log(`sequential, µs per decision: client ${cs.map(f).join(" ")} | bare node:http ${bs.map(f).join(" ")}`);
  console.log(`client / bare, per round: ${ratios.map((x) => x.toFixed(2)).join(" ")}; median ${pct(ratios, 50).toFixed(2)} (target ≤ 1.2)`);
  if (c.stats().degraded > 0) console.log(`warning: ${c.stats().degraded} degraded decisions during the run`);

  // Throughput: decisions per second from one process, sequential and with 64 in flight.
  for (const inflight of [1, 64]) {
    let count = 0;
    const end = Date.now() + o.seconds * 1000;
    const worker = async () => {
      while (Date.now() < end) {
        await c.request("bench/open", "d" + (count % 100));
        count++;
      }
    };
    const t0 = ns();
    await Promise.all(Array.from({ length: inflight }, worker));
    console.log(`decisions/s, ${inflight} in flight: ${Math.round(count / (ms(t0, ns()) / 1000))}`);
  }
  await c.close();

  // The first call of a fresh process (Node loads parts of its HTTP client
  // lazily): five processes, one call each, timeout 1 s.
  const firsts = [];
  for (let i = 0; i < 5; i++) {
    const out = execFileSync(process.execPath, ["-e", FIRST, sock], { cwd: here }).toString().trim();
    firsts.push(Number(out));
  }
  console.log(`first call of a process, ms: ${firsts.map((x) => x.toFixed(1)).join(" ")}`);

  // Degraded, socket missing.
  const gone = new Client({ socket: path.join(dir, "none.sock"), logger: { warn() {} } });
  for (let i = 0; i < 200; i++) await gone.request("bench/open", "d");
  const missing = [];
  for (let i = 0; i < 2000; i++) {
    const t0 = ns();
    const d = await gone.request("bench/open", "d");
    missing.push(ms(t0, ns()));
    if (!d.degraded) throw new Error("expected a degraded grant");
  }
  console.log(`degraded grant, socket missing: p50 ${pct(missing, 50).toFixed(3)} ms, p99 ${pct(missing, 99).toFixed(3)} ms, max ${Math.max(...missing).toFixed(3)} ms (target < 2 ms)`);

  // Degraded, agent hangs (accepts, never answers), default timeout 20 ms,
  // no pause: --hung calls (500 by default, so that p99 is the fifth
  // slowest rather than the second of 100).
  const hsock = path.join(dir, "hang.sock");
  const held = new Set();
  const srv = net.createServer((s) => {
    held.add(s);
    s.on("error", () => {});
    s.on("close", () => held.delete(s));
  });
  await new Promise((r) => srv.listen(hsock, r));
  const hung = new Client({ socket: hsock, timeoutPauseMs: 0, logger: { warn() {} } });
  const hang = [];
  for (let i = 0; i < o.hung; i++) {
    const t0 = ns();
    const d = await hung.request("bench/open", "d");
    hang.push(ms(t0, ns()));
    if (!d.degraded) throw new Error("expected a degraded grant");
  }
  console.log(`degraded grant, agent hangs (timeoutMs 20, ${o.hung} calls): p50 ${pct(hang, 50).toFixed(2)} ms, p99 ${pct(hang, 99).toFixed(2)} ms, max ${Math.max(...hang).toFixed(2)} ms (target ≤ 21 ms)`);
  const paused = new Client({ socket: hsock, logger: { warn() {} } });
  await paused.request("bench/open", "d");
  const t0 = ns();
  for (let i = 0; i < 1000; i++) await paused.request("bench/open", "d");
  console.log(`after a timeout, within timeoutPauseMs (100): ${(ms(t0, ns()) / 1000 * 1000).toFixed(1)} µs per degraded grant`);
  await Promise.all([gone.close(), hung.close(), paused.close()]);
  for (const s of held) s.destroy();
  srv.close();
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
