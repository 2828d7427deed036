// The ES module entry: the CommonJS build, re-exported by name.
import cjs from "../dist/index.js";

export const {
  Client,
  Session,
  Hold,
  defaultSocket,
  remainingOf,
  ObolError,
  ClosedError,
  AgentUnavailableError,
  Codes,
  BadRequestError,
  UnknownResourceError,
  WrongKindError,
  CostOverBurstError,
  UnknownIdError,
  OverReleaseError,
  AlreadySettledError,
  BadLimitError,
  LimitError,
  middleware,
  fastifyHook,
  decisionHeaders,
} = cjs;
export default cjs;
