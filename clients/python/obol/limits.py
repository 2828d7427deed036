"""Limits set by the request: a limit sent with a call (request, a batch
item, refund, reset) for a resource the agent's config does not define, in
a namespace whose config allows it (request_limits: true).

    limit = obol.Limit.gcra(burst=10, count=5, period="1s")
    client.request("tenants/acme-api", "user-42", limit=limit)

The limit is part of the key: the same resource name with another limit
counts apart. The client checks only the argument types and that burst and
count are positive integers; the agent checks the rest and refuses a bad
limit with bad_limit (obol.BadLimit)."""

from __future__ import annotations

import datetime
from typing import Any, Dict, Optional, Union

from .errors import bad

Period = Union[str, datetime.timedelta]

# timedelta renders in the largest unit that divides it exactly, as the
# agent reads a Go duration: 1500 ms is "1500ms", 90 min "90m".
_UNITS = (("h", 3_600_000_000), ("m", 60_000_000), ("s", 1_000_000), ("ms", 1000), ("us", 1))


def _positive(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise bad("limit.%s: must be an integer ≥ 1, got %r" % (name, v))
    return v


def duration(v: Period) -> str:
    """period as the agent reads it: a duration string as it is (non-empty),
    or a positive timedelta rendered as a Go duration ("1500ms")."""
    if isinstance(v, str):
        if not v:
            raise bad('limit.period: a duration such as "1s" or "250ms" is required, got ""')
        return v
    if isinstance(v, datetime.timedelta):
        us = (v.days * 86_400 + v.seconds) * 1_000_000 + v.microseconds
        if us <= 0:
            raise bad("limit.period: must be a positive duration, got %r" % (v,))
        for unit, n in _UNITS:
            if us % n == 0:
                return "%d%s" % (us // n, unit)
    raise bad('limit.period: want a duration string such as "1s" or a datetime.timedelta, got %r' % (v,))


class Limit:
    """A limit set by the request: Limit.gcra(burst, count, period) or
    Limit.tiers("5,1,1,0,..."). Immutable; equal when they send the same
    fields. kind is "gcra" or "tiers"; burst, count and period are the gcra
    fields (0, 0, "" for tiers); spec is the tier string ("" for gcra)."""

    __slots__ = ("kind", "burst", "count", "period", "spec", "_wire")

    kind: str
    burst: int
    count: int
    period: str
    spec: str
    _wire: Dict[str, Any]

    def __init__(self) -> None:
        raise TypeError("obol: make a Limit with Limit.gcra(burst, count, period) or Limit.tiers(spec)")

    @classmethod
    def _make(cls, kind: str, burst: int, count: int, period: str, spec: str, wire: Dict[str, Any]) -> "Limit":
        self = object.__new__(cls)
        for k, v in (("kind", kind), ("burst", burst), ("count", count), ("period", period), ("spec", spec),
                     ("_wire", wire)):
            object.__setattr__(self, k, v)
        return self

    @classmethod
    def gcra(cls, burst: int, count: int, period: Period) -> "Limit":
        """A token bucket: count copies every period, up to burst at once.
        period is a duration string ("1s", "250ms", "1h30m") or a positive
        datetime.timedelta."""
        b, c, p = _positive("burst", burst), _positive("count", count), duration(period)
        return cls._make("gcra", b, c, p, "", {"kind": "gcra", "burst": b, "count": c, "period": p})

    @classmethod
    def tiers(cls, spec: str) -> "Limit":
        """Tiers in the compact syntax: groups of limit,window,active,cooldown
        (seconds), e.g. "5,1,1,0,50,5,5,15"."""
        if not isinstance(spec, str) or not spec:
            raise bad('limit.tiers: a tier string such as "5,1,1,0" is required, got %r' % (spec,))
        return cls._make("tiers", 0, 0, "", spec, {"kind": "tiers", "tiers": spec})

    def wire(self) -> Dict[str, Any]:
        """The body field limit as sent."""
        return dict(self._wire)

    def __reduce__(self) -> Any:
        if self.kind == "tiers":
            return (Limit.tiers, (self.spec,))
        return (Limit.gcra, (self.burst, self.count, self.period))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("obol: a Limit is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Limit) and self._wire == other._wire

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._wire.items())))

    def __repr__(self) -> str:
        if self.kind == "tiers":
            return "Limit.tiers(%r)" % (self.spec,)
        return "Limit.gcra(burst=%d, count=%d, period=%r)" % (self.burst, self.count, self.period)


def wire_limit(limit: Any) -> Optional[Dict[str, Any]]:
    """The body field of a call's limit= (None: no field); BadRequest for
    anything but a Limit or None."""
    if limit is None:
        return None
    if not isinstance(limit, Limit):
        raise bad("limit: want an obol.Limit (Limit.gcra(...) or Limit.tiers(...)) or None, got %r" % (limit,))
    return limit._wire
