/**
 * Errors are for client errors only: a rejection is a decision with
 * `granted: 0`, and an agent that cannot answer gives a degraded grant.
 */

/** The agent's error codes (the `code` of an {@link ObolError}). */
export const Codes = {
  badRequest: "bad_request",
  costOverBurst: "cost_over_burst",
  unknownResource: "unknown_resource",
  unknownHold: "unknown_hold",
  unknownSession: "unknown_session",
  unknownTransfer: "unknown_transfer",
  wrongKind: "wrong_kind",
  overRelease: "over_release",
  tooLarge: "too_large",
  tooMany: "too_many",
  unauthorized: "unauthorized",
  notFound: "not_found",
  closed: "closed",
} as const;

/**
 * A client error. `status` is the agent's HTTP status (0 when the client
 * refused the call before asking); `code` is the agent's error code
 * (`unknown_resource`, `bad_request`, …), or "" for a 4xx reply that is not
 * in the agent's format (a proxy's).
 */
export class ObolError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = "ObolError";
    this.status = status;
    this.code = code;
  }
}

/** A call after {@link Client.close}. */
export class ClosedError extends ObolError {
  constructor() {
    super(0, Codes.closed, "obol: client closed");
    this.name = "ClosedError";
  }
}

/** An argument the client refuses before asking the agent. */
export function badRequest(message: string): ObolError {
  return new ObolError(0, Codes.badRequest, "obol: " + message);
}

/**
 * Why the agent could not answer (internal: such a call fails open). It
 * is thrown to callers only by calls that cannot fail open (`simulate`).
 */
export class AgentUnavailableError extends Error {
  readonly timeout: boolean;
  constructor(message: string, timeout = false) {
    super(message);
    this.name = "AgentUnavailableError";
    this.timeout = timeout;
  }
}
