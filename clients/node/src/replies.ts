// The agent's error replies, read into ObolErrors.
import { Codes, ObolError, errorFor } from "./errors";
import type { Reply } from "./transport";

export function isAgentErrorBody(body: string): boolean {
  try {
    const v = JSON.parse(body);
    return !!v && typeof v === "object" && !!v.error && typeof v.error.code === "string";
  } catch {
    return false;
  }
}

const CODE_STATUS: Record<string, number> = {
  bad_request: 400,
  cost_over_burst: 400,
  bad_limit: 400,
  unknown_resource: 404,
  unknown_hold: 404,
  unknown_session: 404,
  unknown_transfer: 404,
  unknown_ticket: 404,
  wrong_kind: 409,
  over_release: 409,
  already_settled: 409,
  too_large: 413,
  too_many: 429,
  unauthorized: 401,
  forbidden: 403,
  unsupported_media_type: 415,
};

export function statusOf(code: string): number {
  return CODE_STATUS[code] ?? 400;
}

export function apiError(r: Reply): ObolError {
  try {
    const v = JSON.parse(r.body);
    if (v && typeof v === "object" && v.error && typeof v.error.code === "string") {
      return errorFor(r.status, v.error.code, `obol: ${v.error.code}: ${v.error.message ?? ""}`);
    }
  } catch {
    // not the agent's format
  }
  if (r.status === 404) return new ObolError(404, Codes.notFound, `obol: 404: the agent does not serve this path (an agent older than the client?)`);
  return new ObolError(r.status, "", `obol: status ${r.status}: ${r.body.slice(0, 200)}`);
}
