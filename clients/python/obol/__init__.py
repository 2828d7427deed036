"""obol: the Python client of the obol rate-limiting agent.

    from obol import Client
    client = Client()                      # the agent's Unix socket, by its default rule
    d = client.request("api/search", "user-42")
    if d.granted: ...

It fails open: an agent that is gone, hung, failing or unreadable gives a
grant of min_copies marked degraded, never an exception. Exceptions are for
client errors only (see obol.errors).
"""

from ._client import (BATCH_MAX_BYTES, BATCH_MAX_ITEMS, DEFAULT_TIMEOUT, Admission, Client, Decision,
                      Hold, Session, Settlement, Stats, default_socket)
from .errors import (AgentUnavailable, AlreadySettled, APIError, BadLimit, BadRequest, ClientClosed,
                     CostOverBurst, NotFound, ObolError, OverRelease, TooLarge, TooMany, UnknownHold, UnknownResource,
                     UnknownSession, UnknownTicket, UnknownTransfer, WrongKind)
from .limits import Limit
from .middleware import ASGIMiddleware, WSGIMiddleware
from .ratelimit import parse_list as parse_ratelimit

__version__ = "0.1.0"

__all__ = [
    "Client", "Decision", "Hold", "Session", "Admission", "Settlement", "Stats", "Limit", "default_socket",
    "WSGIMiddleware", "ASGIMiddleware", "parse_ratelimit", "DEFAULT_TIMEOUT",
    "BATCH_MAX_ITEMS", "BATCH_MAX_BYTES",
    "ObolError", "APIError", "AgentUnavailable", "ClientClosed", "BadRequest", "BadLimit", "CostOverBurst",
    "UnknownResource", "UnknownHold", "UnknownSession", "UnknownTransfer", "UnknownTicket",
    "AlreadySettled", "WrongKind", "OverRelease", "TooLarge", "TooMany", "NotFound",
]
