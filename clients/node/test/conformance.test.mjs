// The conformance vectors of the agent's contract (POST /v1/simulate
// cases), run through the client's simulate. They live beside the
// repository, in ../shared/conformance/vectors.json from its root; the
// test skips, saying so, without them.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "../esm/index.mjs";
import { startAgent, noAgent } from "./helpers.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const vectors = path.join(root, "..", "shared", "conformance", "vectors.json");
const skip = noAgent || (fs.existsSync(vectors) ? false : `conformance vectors not found at ../shared/conformance/vectors.json beside the repository`);

test("conformance vectors through the client", { skip }, async (t) => {
  const a = await startAgent(t);
  const c = new Client({ socket: a.sock, timeoutMs: 30000 });
  t.after(() => c.close());
  const { cases } = JSON.parse(fs.readFileSync(vectors, "utf8"));
  assert.ok(cases.length > 0);
  const failures = [];
  for (const k of cases) {
    const got = await c.simulate(k.resource, k.requests);
    if (got.decisions.length !== k.expect.length) {
      failures.push(`${k.name}: ${got.decisions.length} decisions, expected ${k.expect.length}`);
      continue;
    }
    k.expect.forEach((want, i) => {
      for (const [f, v] of Object.entries(want)) {
        if (JSON.stringify(got.decisions[i][f]) !== JSON.stringify(v)) {
          failures.push(`${k.name}: request ${i} (${JSON.stringify(k.requests[i])}): ${f} expected ${JSON.stringify(v)}, got ${JSON.stringify(got.decisions[i][f])}`);
        }
      }
    });
  }
  assert.deepEqual(failures, [], `${failures.length} mismatches`);
});
