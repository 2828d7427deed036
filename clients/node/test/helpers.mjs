// Shared by the tests: a real agent built from this repository (its
// binary's path in OBOL_AGENT_BIN), and fake agents that fail in the ways a
// client must survive.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import * as readline from "node:readline";

export const CONFIG = `
namespaces:
  open: {allow_unconfigured: true}
resources:
  t/tiers: {kind: tiers, tiers: "5,1,1,0,50,5,5,15", hard_limit: 100}
  t/gcra: {kind: gcra, burst: 20, count: 20, period: 1s}
  t/one: {kind: gcra, burst: 1, count: 1, period: 1s}
  t/slow: {kind: gcra, burst: 1, count: 1, period: 200ms}
  t/hour: {kind: gcra, burst: 1, count: 1, period: 1h}
  t/none: {kind: tiers, tiers: []}
  t/copies:
    kind: copies
    domain_limit: 5
    global_limit: 100
  t/two: {kind: copies, domain_limit: 2}
  t/adaptive: {kind: adaptive, min_window: 2, max_window: 10}
  t/pacer: {kind: pacer, quota: 100, period: 1m}
  api/search: {kind: gcra, burst: 20, count: 20, period: 1s}
  api/export: {kind: tiers, tiers: "5,1,1,0,50,5,5,15"}
  jobs/sandbox: {kind: copies, domain_limit: 5}
  auth/login: {kind: adaptive, min_window: 5, max_window: 250}
  github/api: {kind: pacer, quota: 4500, period: 1h}
`;

/** A directory short enough for a socket path (108 bytes). */
export function tempDir(t) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), "obolnode"));
  t.after(() => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

/**
 * Starts the agent on a socket in a temp dir and resolves when its log
 * says it started; stopped when the test ends. Without OBOL_AGENT_BIN the
 * test is skipped by the caller (see agentBin).
 */
export async function startAgent(t, config = CONFIG, { http = false } = {}) {
  const bin = process.env.OBOL_AGENT_BIN;
  const dir = tempDir(t);
  fs.writeFileSync(path.join(dir, "c.yaml"), config);
  const sock = path.join(dir, "a.sock");
  const child = spawn(bin, ["--config", path.join(dir, "c.yaml"), "--socket", sock, "--http", http ? "127.0.0.1:0" : "off"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const log = [];
  let httpAddr;
  const started = new Promise((resolve, reject) => {
    const onLine = (line) => {
      log.push(line);
      if (log.length > 50) log.shift();
    };
    readline.createInterface({ input: child.stderr }).on("line", onLine);
    readline.createInterface({ input: child.stdout }).on("line", onLine);
    child.on("exit", (code) => reject(new Error(`agent exited (${code}) before serving:\n${log.join("\n")}`)));
    child.on("error", reject);
    // The agent logs "obol agent started" once its listeners are up.
    const onStart = (line) => {
      if (line.includes("obol agent started")) {
        try {
          httpAddr = JSON.parse(line).http;
        } catch {
          // a text log line: no address
        }
        resolve();
      }
    };
    readline.createInterface({ input: child.stderr }).on("line", onStart);
    readline.createInterface({ input: child.stdout }).on("line", onStart);
  });
  const stop = () =>
    new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once("exit", resolve);
      child.kill("SIGTERM");
    });
  t.after(stop);
  await started;
  return { sock, dir, child, stop, log, http: httpAddr };
}

export const agentBin = process.env.OBOL_AGENT_BIN;
export const noAgent = agentBin ? false : "OBOL_AGENT_BIN is not set: build the agent (go build ./cmd/agent) and give its path";

/**
 * A fake agent on a Unix socket: mode is one of "hang" (accepts, never
 * answers), "reset" (closes every connection at once), "500", "503",
 * "garbage" (a 200 that is not JSON), "redirect" (302), "badjson" (200
 * with a JSON array), "half" (headers then the connection closes), or a
 * function (req, res) for anything else. `calls` has the paths asked and
 * `bodies` the request bodies, in order (not for "hang" and "reset").
 */
export async function fakeAgent(t, mode) {
  const { createServer } = await import("node:http");
  const dir = tempDir(t);
  const sock = path.join(dir, "fake.sock");
  const sockets = new Set();
  let server;
  const calls = [];
  const bodies = [];
  if (mode === "hang" || mode === "reset") {
    server = net.createServer((s) => {
      sockets.add(s);
      calls.push(1);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {});
      if (mode === "reset") s.destroy();
    });
  } else {
    server = createServer((req, res) => {
      calls.push(req.url);
      const chunks = [];
      req.on("data", (b) => chunks.push(b));
      req.on("end", () => {
        bodies.push(Buffer.concat(chunks).toString());
        if (typeof mode === "function") return mode(req, res);
        switch (mode) {
          case "500":
            res.writeHead(500, { "content-type": "application/json" });
            return res.end('{"error":{"code":"internal","message":"a bug"}}');
          case "503":
            res.writeHead(503, { "content-type": "application/json" });
            return res.end('{"error":{"code":"not_ready","message":"starting"}}');
          case "garbage":
            res.writeHead(200, { "content-type": "application/json" });
            return res.end("<html>not json");
          case "badjson":
            res.writeHead(200, { "content-type": "application/json" });
            return res.end("[1,2]");
          case "redirect":
            res.writeHead(302, { location: "/elsewhere" });
            return res.end();
          case "half":
            res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
            res.write('{"granted":');
            return res.destroy();
        }
      });
    });
    server.on("connection", (s) => {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
    });
  }
  await new Promise((resolve) => server.listen(sock, resolve));
  t.after(
    () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  );
  return { sock, calls, bodies, server };
}

/** A logger that keeps its lines. */
export function memLogger() {
  const lines = [];
  return { lines, warn: (m) => lines.push(m) };
}
