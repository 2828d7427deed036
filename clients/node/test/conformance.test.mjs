// The conformance vectors of the agent's contract (POST /v1/simulate
// cases), run through the client's simulate. The suite gets their file in
// OBOL_CONFORMANCE_VECTORS (go test ./clients/... sets it when the vectors
// are present); the test skips, saying so, without it.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as fs from "node:fs";
import { Client } from "../esm/index.mjs";
import { startAgent, noAgent } from "./helpers.mjs";

const vectors = process.env.OBOL_CONFORMANCE_VECTORS || "";
const skip = noAgent || (vectors && fs.existsSync(vectors) ? false : "no conformance vectors: OBOL_CONFORMANCE_VECTORS names no file (go test ./clients/... sets it when the vectors are present)");

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
