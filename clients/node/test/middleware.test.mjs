// The middleware with the real frameworks (Express, Fastify) against a
// real agent, and degraded when the agent is gone.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as path from "node:path";
import express from "express";
import Fastify from "fastify";
import { Client, middleware, fastifyHook } from "../esm/index.mjs";
import { startAgent, noAgent, tempDir, memLogger } from "./helpers.mjs";

const key = (req) => {
  const u = req.headers["x-user"];
  return u ? ["t/hour", String(u)] : null;
};

async function listen(app) {
  return new Promise((resolve) => {
    const srv = app.listen(0, "127.0.0.1", () => resolve(srv));
  });
}

async function get(base, user, p = "/") {
  const res = await fetch(base + p, { headers: user ? { "x-user": user } : {} });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

function expressApp(c, k = key) {
  const app = express();
  app.use(middleware(c, { key: k }));
  app.get("/", (req, res) => res.send("ok"));
  return app;
}

test("express: grant, then 429 with Retry-After and the RateLimit fields", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  const srv = await listen(expressApp(c));
  t.after(async () => {
    await new Promise((r) => srv.close(r));
    await c.close();
  });
  const base = `http://127.0.0.1:${srv.address().port}`;
  const ok = await get(base, "alice");
  assert.equal(ok.status, 200);
  assert.equal(ok.body, "ok");
  assert.match(ok.headers.get("ratelimit-policy"), /q=1/);
  assert.match(ok.headers.get("ratelimit"), /r=0/);
  const no = await get(base, "alice");
  assert.equal(no.status, 429);
  assert.match(no.headers.get("retry-after"), /^[1-9][0-9]*$/);
  assert.match(no.headers.get("ratelimit"), /r=0/);
  assert.equal(no.body, "429 too many requests\n");
  assert.equal((await get(base, "bob")).status, 200);
  assert.equal((await get(base, null)).status, 200, "no key: through without asking");
});

test("express: an agent that is gone lets requests through; a config mistake too, logged", async (t) => {
  const log = memLogger();
  const c = new Client({ socket: path.join(tempDir(t), "none.sock"), logger: log });
  const srv = await listen(expressApp(c, () => { throw new Error("no key here"); }));
  const c2 = new Client({ socket: path.join(tempDir(t), "none.sock"), logger: memLogger() });
  const srv2 = await listen(expressApp(c2));
  t.after(async () => {
    await new Promise((r) => srv.close(r));
    await new Promise((r) => srv2.close(r));
    await c.close();
    await c2.close();
  });
  assert.equal((await get(`http://127.0.0.1:${srv2.address().port}`, "alice")).status, 200);
  assert.equal(c2.stats().degraded, 1);
  assert.equal((await get(`http://127.0.0.1:${srv.address().port}`, "alice")).status, 200);
  assert.equal((await get(`http://127.0.0.1:${srv.address().port}`, "alice")).status, 200);
  assert.equal(log.lines.length, 1);
  assert.match(log.lines[0], /no key here/);
});

test("fastify: the onRequest hook answers 429 with the fields", { skip: noAgent }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 2000 });
  const app = Fastify();
  app.addHook("onRequest", fastifyHook(c, { key: (req) => ["t/hour", String(req.headers["x-user"] ?? "anon")] }));
  app.get("/", async () => "ok");
  t.after(async () => {
    await app.close();
    await c.close();
  });
  const first = await app.inject({ method: "GET", url: "/", headers: { "x-user": "carol" } });
  assert.equal(first.statusCode, 200);
  assert.equal(first.body, "ok");
  assert.match(String(first.headers["ratelimit-policy"]), /q=1/);
  const second = await app.inject({ method: "GET", url: "/", headers: { "x-user": "carol" } });
  assert.equal(second.statusCode, 429);
  assert.match(String(second.headers["retry-after"]), /^[1-9][0-9]*$/);
  assert.equal(second.body, "429 too many requests\n");
});

test("fastify: degraded grants pass", async (t) => {
  const c = new Client({ socket: path.join(tempDir(t), "none.sock"), logger: memLogger() });
  const app = Fastify();
  app.addHook("onRequest", fastifyHook(c, { key: () => ["t/one", "x"] }));
  app.get("/", async () => "ok");
  t.after(async () => {
    await app.close();
    await c.close();
  });
  const r = await app.inject({ method: "GET", url: "/" });
  assert.equal(r.statusCode, 200);
  assert.equal(c.stats().degraded, 1);
});
