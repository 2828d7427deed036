"""_ClientBase: what every call of a Client shares (its counters, failing
open with a log line per interval, client errors, retries with jittered
backoff), and the state the parts of Client use, which Client.__init__ sets."""

from __future__ import annotations

import logging
import random
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from ._common import _LogLimiter, _seconds
from ._transport import Transport
from .errors import ClientClosed

if TYPE_CHECKING:
    from ._sessions import Session


class _ClientBase:
    """The bookkeeping of Client, shared by its parts (batch, settle and
    reset, copies, adaptive windows and pacers). Client.__init__ sets the
    state declared here."""

    timeout: float
    max_wait: float
    retry_base: float
    log_interval: float
    kill_switch: bool
    middleware_log: _LogLimiter
    _t: Transport
    _log: logging.Logger
    _rand: random.Random
    _rand_lock: threading.Lock
    _sleep: Callable[[float], None]
    _clock: Callable[[], float]
    _lock: threading.Lock
    _counts: Dict[str, int]
    _n_sessions: int
    _sessions: set[Session]
    _pending: List[Tuple[str, int, Session]]
    _degraded_log: _LogLimiter
    _killed_log: _LogLimiter
    _closed: bool
    _stop: threading.Event
    _loop: Optional[threading.Thread]
    _session_ttl_ms: int
    _default: Optional[Session]

    # ---- bookkeeping ----

    def _add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def _begin(self) -> None:
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        self._add("calls")

    def _fail(self, e: Exception) -> Exception:
        self._add("errors")
        return e

    def _degrade(self, e: BaseException, events: int = 1, what: str = "granting min_copies") -> None:
        self._add("degraded", events)
        n = self._degraded_log.allow(self._clock(), self.log_interval, events)
        if n:
            self._log.warning("obol: agent unavailable; failing open (%s): %s (degraded: %d)", what, e, n)

    def _killed(self, resource: str, domain: str) -> None:
        self._add("killed")
        n = self._killed_log.allow(self._clock(), self.log_interval)
        if n:
            self._log.warning("obol: kill switch on; granting a rejected request (resource %s, domain %s, killed: %d)",
                              resource, domain, n)

    def _max_wait(self, v: Optional[float]) -> float:
        return self.max_wait if v is None else _seconds("max_wait", v)

    def _backoff(self, i: int, left: float, retry_after: float) -> Optional[float]:
        if left <= 0 or retry_after < 0 or retry_after > left:
            return None
        v = self.retry_base
        while i > 0 and v < left:
            v *= 2
            i -= 1
        with self._rand_lock:
            v = v - v / 4 + self._rand.random() * v / 2
        return max(min(left, v), retry_after)

    def _retry(self, once: Callable[[], Tuple[Any, bool, int]], wait: float) -> Tuple[Any, int]:
        """Calls once until it grants or wait is spent; once returns (value,
        granted, retry_after_ms). Returns (the last value, retries)."""
        start = self._clock() if wait > 0 else 0.0
        i = 0
        while True:
            v, granted, retry_after_ms = once()
            if granted or wait <= 0 or self.kill_switch:
                return v, i
            s = self._backoff(i, wait - (self._clock() - start), retry_after_ms / 1000)
            if s is None:
                return v, i
            self._sleep(s)
            self._add("retries")
            i += 1
