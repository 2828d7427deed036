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
  unknownTicket: "unknown_ticket",
  alreadySettled: "already_settled",
  badLimit: "bad_limit",
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

/** `bad_request`: a bad argument (the agent's, or one the client refused before asking). */
export class BadRequestError extends ObolError {}
/** `unknown_resource`: no config for the resource. */
export class UnknownResourceError extends ObolError {}
/** `wrong_kind`: a rate call on a copies resource, or the reverse. */
export class WrongKindError extends ObolError {}
/** `cost_over_burst`: a gcra request for more than the burst. */
export class CostOverBurstError extends ObolError {}
/** `unknown_hold`, `unknown_session`, `unknown_transfer`, `unknown_ticket`: an id unknown, ended or expired. */
export class UnknownIdError extends ObolError {}
/** `over_release`: releasing more copies than the hold has. */
export class OverReleaseError extends ObolError {}
/** `already_settled`: a settle ticket settled before. */
export class AlreadySettledError extends ObolError {}
/**
 * `bad_limit`: a `limit` option the agent refused (malformed or invalid; the
 * message names the field), or a namespace that does not allow limits set by
 * requests.
 */
export class BadLimitError extends ObolError {}
/**
 * `too_large`, `too_many`: a body, batch or cap (sessions, holds, transfers,
 * settle tickets, kept resets, a namespace's limits set by requests and their
 * keys) over its limit.
 */
export class LimitError extends ObolError {}

const CLASSES: Record<string, new (status: number, code: string, message: string) => ObolError> = {
  bad_request: BadRequestError,
  unknown_resource: UnknownResourceError,
  wrong_kind: WrongKindError,
  cost_over_burst: CostOverBurstError,
  unknown_hold: UnknownIdError,
  unknown_session: UnknownIdError,
  unknown_transfer: UnknownIdError,
  unknown_ticket: UnknownIdError,
  over_release: OverReleaseError,
  already_settled: AlreadySettledError,
  bad_limit: BadLimitError,
  too_large: LimitError,
  too_many: LimitError,
};

/** The error of an agent's code: the subclass of ObolError for it, else ObolError. */
export function errorFor(status: number, code: string, message: string): ObolError {
  const C = CLASSES[code] ?? ObolError;
  const e = new C(status, code, message);
  if (C !== ObolError) e.name = C.name;
  return e;
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
  return errorFor(0, Codes.badRequest, "obol: " + message);
}

/**
 * Why the agent could not answer (internal: such a call fails open). It
 * is thrown to callers only by calls that cannot fail open (`simulate`,
 * `reset`).
 */
export class AgentUnavailableError extends Error {
  readonly timeout: boolean;
  constructor(message: string, timeout = false) {
    super(message);
    this.name = "AgentUnavailableError";
    this.timeout = timeout;
  }
}
