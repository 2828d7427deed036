// Many rate decisions in few calls.
import type { Client } from "./client";
import { decision, degradedDecision } from "./decisions";
import { AgentUnavailableError, ObolError, badRequest, errorFor } from "./errors";
import { limitField } from "./limit";
import { statusOf } from "./replies";
import type { BatchResult, CallOptions, Need } from "./types";
import { checkName, counts } from "./util";

/** {@link Client.batch}. */
export async function batch(c: Client, needs: Need[], opts: CallOptions = {}): Promise<BatchResult[]> {
  if (!Array.isArray(needs)) throw badRequest(`batch: must be an array of {resource, domain, copies?, minCopies?, limit?}, got ${JSON.stringify(needs)}`);
  const out: BatchResult[] = new Array(needs.length);
  let chunk: { i: number; body: object; copies: number; min: number }[] = [];
  let size = 0;
  const flush = async () => {
    if (chunk.length === 0) return;
    const items = chunk;
    chunk = [];
    size = 0;
    try {
      const v = await c.call("POST", "/v1/batch", { requests: items.map((x) => x.body) }, opts.signal);
      const rs = v.responses;
      if (!Array.isArray(rs) || rs.length !== items.length) {
        throw new AgentUnavailableError(`batch reply: expected ${items.length} responses, got ${Array.isArray(rs) ? rs.length : typeof rs}`);
      }
      items.forEach((x, k) => {
        const r = rs[k];
        if (r && typeof r === "object" && r.error && typeof r.error === "object") {
          out[x.i] = { error: errorFor(statusOf(String(r.error.code)), String(r.error.code ?? ""), `obol: ${r.error.code}: ${r.error.message ?? ""}`) };
        } else {
          out[x.i] = { decision: decision(c, r ?? {}, x.copies) };
        }
      });
    } catch (e) {
      c.failed(e);
      c.degrade(e, items.length);
      for (const x of items) out[x.i] = { decision: degradedDecision(x.min) };
    }
  };
  for (let i = 0; i < needs.length; i++) {
    const n = needs[i];
    try {
      if (n === null || typeof n !== "object") throw badRequest(`batch[${i}]: must be {resource, domain, copies?, minCopies?, limit?}`);
      checkName(`batch[${i}].resource`, n.resource);
      checkName(`batch[${i}].domain`, n.domain);
      const [copies, min] = counts(n);
      const limit = limitField(`batch[${i}].limit`, n.limit);
      const body: Record<string, unknown> = { resource: n.resource, domain: n.domain, copies, min_copies: min };
      if (limit) body.limit = limit;
      const len = Buffer.byteLength(JSON.stringify(body)) + 1;
      if (chunk.length >= 1000 || size + len > 60000) await flush();
      chunk.push({ i, body, copies, min });
      size += len;
    } catch (e) {
      if (!(e instanceof ObolError)) throw e;
      out[i] = { error: e };
    }
  }
  await flush();
  return out;
}
