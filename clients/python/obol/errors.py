"""The client's exceptions: client errors only (an agent that is gone, hung or
failing is never an exception: the decision is degraded instead)."""

from __future__ import annotations

from typing import Dict, Optional, Type


class ObolError(Exception):
    """The base of every exception the client raises."""


class ClientClosed(ObolError):
    """A call on a client after close()."""


class AgentUnavailable(ObolError):
    """Raised only by calls that cannot fail open (simulate, reset): the agent
    could not be asked, or its reply could not be read."""


class APIError(ObolError):
    """A client error: a 4xx reply of the agent, or an argument the client
    refuses before asking (then status is 0).

    ``status`` is the HTTP status (0 when the client refused the call itself),
    ``code`` the error code of the agent's API (``"unknown_resource"``...; ""
    when a 4xx reply was not in the agent's format, e.g. a proxy's), and
    ``message`` names the bad value and what was expected.
    """

    code_name = ""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__("obol: %s (%d): %s" % (code or "error", status, message))
        self.status = status
        self.code = code
        self.message = message


class BadRequest(APIError, ValueError):
    """A malformed call: a missing or invalid field (code bad_request)."""

    code_name = "bad_request"


class BadLimit(BadRequest):
    """A limit set by the request (limit=) the agent refuses (code
    bad_limit): malformed or invalid (the message names the field, e.g.
    limit.burst), or given in a namespace that does not allow limits set
    by requests."""

    code_name = "bad_limit"


class CostOverBurst(APIError):
    """A gcra request for more copies than the bucket's burst."""

    code_name = "cost_over_burst"


class UnknownResource(APIError, LookupError):
    """No config for the resource, and its namespace allows no unconfigured one."""

    code_name = "unknown_resource"


class UnknownHold(APIError, LookupError):
    """The hold is unknown, released, or its session ended."""

    code_name = "unknown_hold"


class UnknownSession(APIError, LookupError):
    """The session is unknown, ended or expired."""

    code_name = "unknown_session"


class UnknownTransfer(APIError, LookupError):
    """The transfer is unknown, seized or expired."""

    code_name = "unknown_transfer"


class UnknownTicket(APIError, LookupError):
    """The admission or settle ticket is unknown, completed or expired (a
    settle ticket settled long ago too)."""

    code_name = "unknown_ticket"


class AlreadySettled(APIError):
    """The settle ticket was settled before."""

    code_name = "already_settled"


class WrongKind(APIError):
    """A rate call on a copies resource, or the reverse."""

    code_name = "wrong_kind"


class OverRelease(APIError):
    """Releasing or transferring more copies than the hold has."""

    code_name = "over_release"


class TooLarge(APIError):
    """A body or batch over the agent's limit."""

    code_name = "too_large"


class TooMany(APIError):
    """A per-agent or per-session cap (sessions, holds, transfers, tickets,
    settle tickets, kept resets) is full, or a namespace's cap of limits set
    by requests (their definitions or keys)."""

    code_name = "too_many"


class NotFound(APIError):
    """The agent serves no such path (an agent older than the client)."""

    code_name = "not_found"


_BY_CODE: Dict[str, Type[APIError]] = {
    c.code_name: c
    for c in (BadRequest, BadLimit, CostOverBurst, UnknownResource, UnknownHold, UnknownSession,
              UnknownTransfer, UnknownTicket, AlreadySettled, WrongKind, OverRelease, TooLarge, TooMany, NotFound)
}


def api_error(status: int, code: Optional[str], message: str) -> APIError:
    """The exception of an agent's error code (APIError for a code it does not know)."""
    cls = _BY_CODE.get(code or "", APIError)
    return cls(status, code or "", message)


def bad(message: str) -> BadRequest:
    """A BadRequest the client raises before asking."""
    return BadRequest(0, "bad_request", message)
