"""Client.refund, settle and reset: the calls that change what a rate
decision counted."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ._base import _ClientBase
from ._common import _check_count, _check_names, _int, _json
from ._transport import Unavailable
from ._types import Settlement
from .errors import AgentUnavailable, APIError, ClientClosed, bad
from .limits import Limit, wire_limit


class _SettleCalls(_ClientBase):
    """Client.refund, settle and reset."""

    def refund(self, resource: str, domain: str, copies: int, *, limit: Optional[Limit] = None) -> int:
        """Gives copies back to a gcra bucket (of a limit set by the request:
        the same limit); returns the tokens remaining, -1 when the agent
        could not be asked (the refund is dropped)."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        try:
            _check_names(resource, domain)
            _check_count("copies", copies)
            lim = wire_limit(limit)
        except APIError as e:
            raise self._fail(e)
        body: Dict[str, Any] = {"resource": resource, "domain": domain, "copies": copies}
        if lim is not None:
            body["limit"] = lim
        try:
            _, _, raw = self._t.call("POST", "/v1/refund", body)
            try:
                return _int(_json(raw), "remaining", None)  # type: ignore[arg-type]
            except ValueError as e:
                raise Unavailable("unreadable reply: %s" % e) from None
        except Unavailable as e:
            self._degrade(e, what="dropping a refund")
            return -1
        except APIError as e:
            raise self._fail(e)

    def settle(self, ticket: Optional[str], copies: int) -> Settlement:
        """Charges the real cost, copies, of a grant asked with
        settle_later=True in place of its estimate: less gives the
        difference back, more charges it past the limit (later requests wait
        it out), once. A ticket of None or "" (a degraded, killed or rejected
        decision) settles nothing: Settlement(0, 0, False), without asking.
        An agent that cannot answer gives Settlement(degraded=True), nothing
        charged. Raises only for client errors (AlreadySettled,
        UnknownTicket, BadRequest)."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        if ticket is None or ticket == "":
            return Settlement()
        try:
            if not isinstance(ticket, str):
                raise bad("ticket: a string is required, got %r" % (ticket,))
            _check_count("copies", copies)
        except APIError as e:
            raise self._fail(e)
        try:
            _, _, raw = self._t.call("POST", "/v1/settle", {"ticket": ticket, "copies": copies})
            r = _json(raw)
            try:
                return Settlement(charged=_int(r, "charged", None),  # type: ignore[arg-type]
                                  remaining=_int(r, "remaining", None))  # type: ignore[arg-type]
            except ValueError as e:
                raise Unavailable("unreadable reply: %s" % e) from None
        except Unavailable as e:
            self._degrade(e, what="charging nothing")
            return Settlement(degraded=True)
        except APIError as e:
            raise self._fail(e)

    def reset(self, resource: str, domain: str, *, limit: Optional[Limit] = None) -> None:
        """Forgets resource's counts for domain (kinds tiers and gcra) on the
        agent and, through its mesh, on every agent: a support team
        unblocking a customer. A limit set by the request is part of the
        key: give the same limit. It does not fail open: an agent that cannot
        be asked (or whose reply is not {"reset": true}) raises
        AgentUnavailable, since the reset did not happen.
        Client errors raise as for any call (UnknownResource, WrongKind,
        BadLimit, TooMany...)."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        try:
            _check_names(resource, domain)
            lim = wire_limit(limit)
        except APIError as e:
            raise self._fail(e)
        body: Dict[str, Any] = {"resource": resource, "domain": domain}
        if lim is not None:
            body["limit"] = lim
        try:
            _, _, raw = self._t.call("POST", "/v1/reset", body)
            if _json(raw).get("reset") is not True:
                raise Unavailable("unreadable reply: %r" % (raw[:80],))
        except Unavailable as e:
            raise AgentUnavailable("obol: reset of %r for %r not made: %s" % (resource, domain, e)) from None
        except APIError as e:
            raise self._fail(e)
