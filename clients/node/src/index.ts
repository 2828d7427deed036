export {
  Client,
  Session,
  Hold,
  defaultSocket,
  remainingOf,
} from "./client";
export type {
  ClientOptions,
  Decision,
  RequestOptions,
  CallOptions,
  LimitCallOptions,
  Settlement,
  Need,
  BatchResult,
  Stats,
  Admission,
  HoldInfo,
  Logger,
  RawReply,
  HeaderSource,
} from "./client";
export {
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
} from "./errors";
export type { Limit, GcraLimit, TiersLimit } from "./limit";
export { middleware, fastifyHook, decisionHeaders } from "./middleware";
export type { KeyFunc, MiddlewareOptions } from "./middleware";
