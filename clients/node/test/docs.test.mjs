// The examples of docs/client-node.md and of the README, run against a real agent: every
// ```js block after a "<!-- example -->" line is written to a module of
// its own (importing "@obol/client" as an application would) and run
// with OBOL_SOCKET set to the agent's socket.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { startAgent, noAgent, tempDir } from "./helpers.mjs";

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const doc = path.join(pkg, "..", "..", "docs", "client-node.md");
const readme = path.join(pkg, "..", "..", "README.md");

function examples() {
  const out = [];
  for (const f of [doc, readme]) {
    const text = fs.readFileSync(f, "utf8");
    const re = /<!-- example -->\s*\n```js\n([\s\S]*?)\n```/g;
    for (let m; (m = re.exec(text)); ) out.push(m[1]);
  }
  return out;
}

test("the docs' examples run", { skip: noAgent }, async (t) => {
  const blocks = examples();
  assert.ok(blocks.length >= 3, `found ${blocks.length} examples in docs/client-node.md`);
  const a = await startAgent(t);
  const dir = tempDir(t);
  // The application's node_modules: the package itself, and the
  // frameworks its examples use.
  fs.mkdirSync(path.join(dir, "node_modules", "@obol"), { recursive: true });
  fs.symlinkSync(pkg, path.join(dir, "node_modules", "@obol", "client"));
  for (const m of ["express", "fastify"]) fs.symlinkSync(path.join(pkg, "node_modules", m), path.join(dir, "node_modules", m));
  for (const [i, code] of blocks.entries()) {
    const file = path.join(dir, `example${i}.mjs`);
    fs.writeFileSync(file, code + "\n");
    const { err, stdout, stderr } = await new Promise((resolve) =>
      execFile(process.execPath, [file], { env: { ...process.env, OBOL_SOCKET: a.sock }, timeout: 30000 }, (err, stdout, stderr) =>
        resolve({ err, stdout, stderr }),
      ),
    );
    assert.equal(err, null, `example ${i + 1} failed:\n${code}\n--- stdout:\n${stdout}\n--- stderr:\n${stderr}`);
  }
});
