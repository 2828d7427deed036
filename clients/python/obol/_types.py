"""The replies of the client's calls: Decision (a rate decision),
Settlement (what settle did) and Stats (the client's counters)."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from ._common import _int
from .ratelimit import first_param, parse_list


class Decision:
    """The outcome of a rate decision (request, check, a batch item). A
    rejection is a Decision with granted == 0, never an exception.

    granted, remaining, retry_after_ms (-1: no wait would help), reset_after_ms
    and shadow are the agent's reply fields; reply is the whole reply (empty
    when degraded). degraded: the agent could not be asked and the client
    granted min_copies. killed: the kill switch turned a rejection into a grant
    of every copy asked (reply is then the agent's rejection). retries: how
    many times max_wait sent the call again. ratelimit_policy and ratelimit are
    the IETF RateLimit fields as the agent wrote them (check only; "" when
    absent). ticket: the settle ticket of a grant asked with
    settle_later=True, for Client.settle; None for a rejection, a degraded or
    killed grant, and without settle_later.
    """

    __slots__ = ("granted", "remaining", "retry_after_ms", "reset_after_ms", "degraded", "killed",
                 "shadow", "retries", "ratelimit_policy", "ratelimit", "ticket", "reply")

    def __init__(self, granted: int = 0, remaining: int = 0, retry_after_ms: int = 0,
                 reset_after_ms: int = 0, degraded: bool = False, killed: bool = False,
                 shadow: bool = False, retries: int = 0, ratelimit_policy: str = "",
                 ratelimit: str = "", reply: Optional[Dict[str, Any]] = None,
                 ticket: Optional[str] = None) -> None:
        self.granted = granted
        self.remaining = remaining
        self.retry_after_ms = retry_after_ms
        self.reset_after_ms = reset_after_ms
        self.degraded = degraded
        self.killed = killed
        self.shadow = shadow
        self.retries = retries
        self.ratelimit_policy = ratelimit_policy
        self.ratelimit = ratelimit
        self.ticket = ticket
        self.reply: Dict[str, Any] = reply if reply is not None else {}

    @classmethod
    def from_reply(cls, reply: Dict[str, Any]) -> "Decision":
        """A Decision of an agent's reply; ValueError when a field has the wrong type."""
        if "granted" not in reply:
            raise ValueError("no granted field")
        shadow = reply.get("shadow", False)
        ticket = reply.get("ticket")
        if ticket is not None and not isinstance(ticket, str):
            raise ValueError("ticket: not a string: %r" % (ticket,))
        return cls(granted=_int(reply, "granted"), remaining=_int(reply, "remaining"),
                   retry_after_ms=_int(reply, "retry_after_ms"), reset_after_ms=_int(reply, "reset_after_ms"),
                   shadow=shadow is True, reply=reply, ticket=ticket or None)

    def __bool__(self) -> bool:
        return self.granted > 0

    @property
    def policies(self) -> List[Tuple[str, Dict[str, Union[int, str]]]]:
        """RateLimit-Policy parsed: [(name, {"q": 5, "w": 1}), ...] ([] when absent or malformed)."""
        return parse_list(self.ratelimit_policy)

    @property
    def ratelimit_window_ms(self) -> int:
        """The RateLimit field's t in ms: the window of the policy closest to its limit (0 without one)."""
        t = first_param(self.ratelimit, "t")
        return t * 1000 if isinstance(t, int) and t >= 0 else 0

    def __repr__(self) -> str:
        flags = "".join(", %s=True" % f for f in ("degraded", "killed", "shadow") if getattr(self, f))
        return "Decision(granted=%d, remaining=%d, retry_after_ms=%d, reset_after_ms=%d%s)" % (
            self.granted, self.remaining, self.retry_after_ms, self.reset_after_ms, flags)


class Settlement(NamedTuple):
    """What Client.settle did: charged is the real cost less the estimate
    (negative: given back), remaining what a request of the key could get
    now. degraded: the agent could not be asked, and nothing was charged
    (failing open, as for a decision)."""
    charged: int = 0
    remaining: int = 0
    degraded: bool = False


class Stats(NamedTuple):
    """Counters since the client was made."""
    calls: int  #: decisions asked (request, check, batch items, reserve, seize, admit)
    degraded: int  #: decisions and calls made without the agent (failing open)
    killed: int  #: rejections the kill switch turned into grants
    retries: int  #: calls max_wait sent again
    errors: int  #: client errors raised
    sessions: int  #: sessions opened with the agent
    pending_releases: int  #: releases waiting for the agent to come back
