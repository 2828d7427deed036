"""Adaptive windows and pacers: Admission, and Client.admit, complete, pace,
pace_wait and observe."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from ._base import _ClientBase
from ._common import _check_count, _int, _json
from ._transport import Unavailable
from .errors import APIError, ClientClosed, bad

if TYPE_CHECKING:
    from ._client import Client


class Admission:
    """An admission to an adaptive resource's window. ``with client.admit(r)
    as a:`` completes it on exit: outcome "success", or "backoff" when the
    block raised (set a.outcome to choose). admitted is False for a
    rejection; degraded/killed admissions are admitted without a ticket."""

    def __init__(self, client: "Client", resource: str, admitted: bool, ticket: Optional[str],
                 position: int, window: int, degraded: bool = False, killed: bool = False) -> None:
        self._client = client
        self.resource = resource
        self.admitted = admitted
        self.ticket = ticket
        self.position = position
        self.window = window
        self.degraded = degraded
        self.killed = killed
        self.outcome: Optional[str] = None
        self._done = False

    def __bool__(self) -> bool:
        return self.admitted

    def complete(self, outcome: str = "success") -> Optional[int]:
        """Reports how the admitted call went; returns the new window (None
        when there was no ticket or the agent could not be asked). Once only;
        later calls do nothing."""
        if self._done or self.ticket is None:
            self._done = True
            return None
        self._done = True
        return self._client.complete(self.ticket, outcome)

    def __enter__(self) -> "Admission":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.complete(self.outcome or ("backoff" if exc_type is not None else "success"))

    def __repr__(self) -> str:
        return "Admission(resource=%r, admitted=%r, ticket=%r, window=%d%s)" % (
            self.resource, self.admitted, self.ticket, self.window,
            ", degraded=True" if self.degraded else ", killed=True" if self.killed else "")


class _AdaptiveCalls(_ClientBase):
    """Client.admit, complete, pace, pace_wait and observe. self is always
    a Client (hence the type: ignore where an Admission is made)."""

    def admit(self, resource: str) -> Admission:
        """Asks an adaptive resource's window for a place. Degraded: admitted
        without a ticket. Killed: a rejection admitted without a ticket."""
        self._begin()
        try:
            if not isinstance(resource, str) or not resource:
                raise bad("resource: a non-empty string is required, got %r" % (resource,))
        except APIError as e:
            raise self._fail(e)
        try:
            _, _, raw = self._t.call("POST", "/v1/admit", {"resource": resource})
            r = _json(raw)
            admitted = r.get("admitted")
            ticket = r.get("ticket")
            if not isinstance(admitted, bool) or (admitted and not isinstance(ticket, str)):
                raise Unavailable("unreadable reply: %r" % (raw[:80],))
            a = Admission(self, resource, admitted, ticket if admitted else None,  # type: ignore[arg-type]
                          _int(r, "position"), _int(r, "window"))
        except ValueError as e:
            self._degrade(Unavailable(str(e)), what="admitting")
            return Admission(self, resource, True, None, 0, 0, degraded=True)  # type: ignore[arg-type]
        except Unavailable as e:
            self._degrade(e, what="admitting")
            return Admission(self, resource, True, None, 0, 0, degraded=True)  # type: ignore[arg-type]
        except APIError as e:
            raise self._fail(e)
        if not a.admitted and self.kill_switch:
            a.admitted, a.killed = True, True
            self._killed(resource, "")
        return a

    def complete(self, ticket: str, outcome: str = "success") -> Optional[int]:
        """Reports an admitted call's outcome ("success" or "backoff"); returns
        the window, or None when the agent could not be asked."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        if not isinstance(ticket, str) or not ticket:
            raise self._fail(bad("ticket: a non-empty string is required, got %r" % (ticket,)))
        if outcome not in ("success", "backoff"):
            raise self._fail(bad('outcome: want "success" or "backoff", got %r' % (outcome,)))
        try:
            _, _, raw = self._t.call("POST", "/v1/complete", {"ticket": ticket, "outcome": outcome})
            return _int(_json(raw), "window")
        except (Unavailable, ValueError) as e:
            self._degrade(e, what="dropping a completion")
            return None
        except APIError as e:
            raise self._fail(e)

    def pace(self, resource: str) -> int:
        """A pacer's wait in ms before the next call to the API it stands for
        (0 when the agent could not be asked: not pacing)."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        if not isinstance(resource, str) or not resource:
            raise self._fail(bad("resource: a non-empty string is required, got %r" % (resource,)))
        try:
            _, _, raw = self._t.call("POST", "/v1/pace", {"resource": resource})
            w = _int(_json(raw), "wait_ms")
            return max(w, 0)
        except (Unavailable, ValueError) as e:
            self._degrade(e, what="not pacing")
            return 0
        except APIError as e:
            raise self._fail(e)

    def pace_wait(self, resource: str) -> None:
        """Sleeps the pacer's wait."""
        w = self.pace(resource)
        if w > 0:
            self._sleep(w / 1000)

    def observe(self, resource: str, status: int, remaining: Optional[int] = None,
                headers: Optional[Mapping[str, str]] = None) -> None:
        """Tells a pacer how a call to its API went: the HTTP status, and what
        is left of the quota, as remaining or as the reply's headers (their
        RateLimit or RateLimit-Remaining values are sent as they are). Dropped
        when the agent cannot be asked."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        try:
            if not isinstance(resource, str) or not resource:
                raise bad("resource: a non-empty string is required, got %r" % (resource,))
            if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
                raise bad("status: want an HTTP status in [100, 599], got %r" % (status,))
            body: Dict[str, Any] = {"resource": resource, "status": status}
            if remaining is not None:
                if headers:
                    raise bad("give remaining or headers, not both")
                body["remaining"] = _check_count("remaining", remaining, 10 ** 18 - 1)
            elif headers:
                if not hasattr(headers, "items"):
                    raise bad("headers: want a mapping of the reply's headers (a dict, an http.client "
                              "HTTPMessage...), got %r" % (type(headers).__name__,))
                low = {str(k).lower(): v for k, v in headers.items()}
                if low.get("ratelimit"):
                    body["ratelimit"] = str(low["ratelimit"])
                if low.get("ratelimit-remaining"):
                    body["ratelimit_remaining"] = str(low["ratelimit-remaining"])
        except APIError as e:
            raise self._fail(e)
        try:
            self._t.call("POST", "/v1/observe", body)
        except Unavailable as e:
            self._degrade(e, what="dropping an observation")
        except APIError as e:
            raise self._fail(e)
