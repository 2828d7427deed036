"""The Client: rate decisions, copies with sessions, admissions, pacing, and
failing open when the agent cannot answer.

Client is made of parts, each in a module of its own: _base (the bookkeeping
every call shares), _batch (batch), _settle (refund, settle, reset),
_sessions (Hold, Session and the calls on copies) and _adaptive (Admission,
adaptive windows and pacers); _types has the replies (Decision, Settlement,
Stats) and _common the constants and checks. The rest is here: the rate
decisions (request, check), simulate, close."""

from __future__ import annotations

import logging
import math
import os
import random
import threading
import time
import weakref
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple
from urllib.parse import quote

from ._adaptive import Admission, _AdaptiveCalls
from ._batch import Need, _BatchCalls
from ._common import (BATCH_MAX_BYTES, BATCH_MAX_ITEMS, DEFAULT_LOG_INTERVAL, DEFAULT_RETRY_BASE,
                      DEFAULT_SESSION_TTL_MS, DEFAULT_TIMEOUT, DEFAULT_TIMEOUT_PAUSE, MAX_COPIES, _check_names,
                      _counts, _int, _json, _kill_switch_env, _LogLimiter, _seconds, default_socket, log)
from ._sessions import Hold, Session, _CopyCalls
from ._settle import _SettleCalls
from ._transport import Transport, Unavailable
from ._types import Decision, Settlement, Stats
from .errors import AgentUnavailable, APIError, ClientClosed, bad
from .limits import Limit, wire_limit
from .ratelimit import first_param

# Client, and the names of its parts that code may import from here.
__all__ = [
    "Client", "Decision", "Settlement", "Stats", "Hold", "Session", "Admission", "Need", "default_socket", "log",
    "MAX_COPIES", "BATCH_MAX_ITEMS", "BATCH_MAX_BYTES", "DEFAULT_TIMEOUT", "DEFAULT_SESSION_TTL_MS",
    "DEFAULT_RETRY_BASE", "DEFAULT_TIMEOUT_PAUSE", "DEFAULT_LOG_INTERVAL",
]

# Every client, so that a forked child starts its own background loop and
# sessions rather than sharing its parent's.
_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for c in list(_clients):
        c._lock = threading.Lock()
        c._rand_lock = threading.Lock()
        c._loop = None
        c._stop = threading.Event()
        c._sessions = set()
        c._pending = []
        c._default = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Client(_BatchCalls, _SettleCalls, _CopyCalls, _AdaptiveCalls):
    """A client of the obol agent, safe to share between threads.

    socket: the agent's Unix socket (default: $OBOL_SOCKET, else the agent's
    own default rule); url: ``http://127.0.0.1:7070`` instead (exclusive with
    socket). timeout: seconds one call may take, connecting included; past
    it the decision is degraded. kill_switch: True turns every rejection into
    a grant marked killed (default: $OBOL_KILL_SWITCH). max_wait: seconds a
    rejection is retried by default (0: no retry; each call may override it).
    """

    def __init__(self, socket: Optional[str] = None, url: Optional[str] = None,
                 timeout: float = DEFAULT_TIMEOUT, kill_switch: Optional[bool] = None,
                 max_wait: float = 0, *, session_ttl_ms: int = DEFAULT_SESSION_TTL_MS,
                 retry_base: float = DEFAULT_RETRY_BASE, timeout_pause: float = DEFAULT_TIMEOUT_PAUSE,
                 log_interval: float = DEFAULT_LOG_INTERVAL, logger: Optional[logging.Logger] = None,
                 environ: Optional[Mapping[str, str]] = None, rand: Optional[random.Random] = None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        env = os.environ if environ is None else environ
        if socket is not None and url is not None:
            raise ValueError("obol: socket %r and url %r: give one" % (socket, url))
        if socket is not None and (not isinstance(socket, str) or socket == ""):
            raise ValueError("obol: socket: a non-empty path is required, got %r" % (socket,))
        self.timeout = _seconds("timeout", timeout, allow_zero=False)
        self.max_wait = _seconds("max_wait", max_wait)
        self.retry_base = _seconds("retry_base", retry_base, allow_zero=False)
        if isinstance(timeout_pause, bool) or not isinstance(timeout_pause, (int, float)) or math.isnan(timeout_pause):
            raise ValueError("obol: timeout_pause: want a number of seconds (≤ 0: none), got %r" % (timeout_pause,))
        self.log_interval = _seconds("log_interval", log_interval)
        if isinstance(session_ttl_ms, bool) or not isinstance(session_ttl_ms, int) \
                or not 3 <= session_ttl_ms <= 86_400_000:
            raise ValueError("obol: session_ttl_ms: want an integer in [3, 86400000] (3 ms to 24 h), got %r"
                             % (session_ttl_ms,))
        if kill_switch is None:
            kill_switch = _kill_switch_env(env.get("OBOL_KILL_SWITCH", ""))
        if url is None and socket is None:
            socket = default_socket(env)
        self._t = Transport(socket, url, self.timeout)
        self._t.pause = max(float(timeout_pause), 0.0)
        self.kill_switch = bool(kill_switch)
        self._log = logger or log
        self._rand = rand or random.Random()
        self._rand_lock = threading.Lock()
        self._sleep = sleep
        self._clock = clock
        self._lock = threading.Lock()
        self._counts = {"calls": 0, "degraded": 0, "killed": 0, "retries": 0, "errors": 0}
        self._n_sessions = 0
        self._sessions: set = set()
        self._pending: List[Tuple[str, int, Session]] = []
        self._degraded_log = _LogLimiter()
        self._killed_log = _LogLimiter()
        self.middleware_log = _LogLimiter()
        self._closed = False
        self._stop = threading.Event()
        self._loop: Optional[threading.Thread] = None
        self._session_ttl_ms = session_ttl_ms
        self._default: Optional[Session] = None
        _clients.add(self)

    # ---- public ----

    def set_kill_switch(self, on: bool) -> None:
        """Turns the kill switch on or off at run time."""
        self.kill_switch = bool(on)

    def stats(self) -> Stats:
        """The client's counters."""
        with self._lock:
            return Stats(pending_releases=len(self._pending), sessions=self._n_sessions, **self._counts)

    def _decide(self, resource: str, domain: str, copies: int, min_copies: Optional[int],
                max_wait: Optional[float], check: bool, settle: bool = False,
                limit: Optional[Limit] = None) -> Decision:
        self._begin()
        try:
            _check_names(resource, domain)
            copies, min_copies = _counts(copies, min_copies)
            wait = self._max_wait(max_wait)
            if check and min_copies != copies:
                raise bad("min_copies: check grants all or nothing; want %d (copies), got %d" % (copies, min_copies))
            if not isinstance(settle, bool):
                raise bad("settle_later: want True or False, got %r" % (settle,))
            lim = wire_limit(limit)
        except APIError as e:
            raise self._fail(e)

        def once() -> Tuple[Decision, bool, int]:
            d = self._check_once(resource, domain, copies) if check else \
                self._request_once(resource, domain, copies, min_copies, settle, lim)
            return d, d.granted > 0 or copies == 0, d.retry_after_ms

        try:
            d, retries = self._retry(once, wait)
        except Unavailable as e:
            self._degrade(e)
            return Decision(granted=min_copies, degraded=True)
        except APIError as e:
            raise self._fail(e)
        d.retries = retries
        if d.granted == 0 and copies > 0 and self.kill_switch:
            d.granted, d.retry_after_ms, d.killed, d.ticket = copies, 0, True, None
            self._killed(resource, domain)
        return d

    def _request_once(self, resource: str, domain: str, copies: int, min_copies: int,
                      settle: bool = False, limit: Optional[Dict[str, Any]] = None) -> Decision:
        body: Dict[str, Any] = {"resource": resource, "domain": domain, "copies": copies, "min_copies": min_copies}
        if settle:
            body["settle"] = True
        if limit is not None:
            body["limit"] = limit
        _, _, raw = self._t.call("POST", "/v1/request", body)
        try:
            return Decision.from_reply(_json(raw))
        except ValueError as e:
            raise Unavailable("unreadable reply: %s" % e) from None

    def _check_once(self, resource: str, domain: str, copies: int) -> Decision:
        path = "/v1/check?resource=%s&domain=%s&copies=%d" % (quote(resource, safe="/"), quote(domain, safe="/"), copies)
        status, resp, raw = self._t.call("GET", path, accept_429=True)
        policy = resp.getheader("RateLimit-Policy") or ""
        rl = resp.getheader("RateLimit") or ""
        if status == 429:
            try:
                d = Decision.from_reply(_json(raw))
            except ValueError as e:
                raise Unavailable("unreadable reply: %s" % e) from None
        else:
            d = Decision(granted=copies)
            r = first_param(rl, "r")
            if isinstance(r, int) and r >= 0:
                d.remaining = min(r, MAX_COPIES)
        d.ratelimit_policy, d.ratelimit = policy, rl
        return d

    def request(self, resource: str, domain: str, copies: int = 1, min_copies: Optional[int] = None,
                max_wait: Optional[float] = None, *, settle_later: bool = False,
                limit: Optional[Limit] = None) -> Decision:
        """Asks for a rate decision (kinds tiers and gcra): copies (default 1,
        0 is a peek), at least min_copies (default all). With max_wait
        (seconds) a rejection is retried with jittered backoff, never before
        the agent's retry_after, until granted or the wait is spent.
        settle_later=True asks for a settle ticket with the grant
        (Decision.ticket): copies is an estimate, and settle charges the real
        cost once it is known. limit: a Limit set by the request, for a
        resource the config does not define (see obol.limits).

        Raises only for client errors (BadRequest, BadLimit, UnknownResource,
        WrongKind, CostOverBurst, TooMany...). An agent that is gone, hung,
        failing or unreadable gives Decision(granted=min_copies,
        degraded=True), without a ticket."""
        return self._decide(resource, domain, copies, min_copies, max_wait, check=False, settle=settle_later,
                            limit=limit)

    def check(self, resource: str, domain: str, copies: int = 1, max_wait: Optional[float] = None) -> Decision:
        """request as an HTTP proxy asks (GET /v1/check), with the IETF
        RateLimit fields set (ratelimit_policy, ratelimit). All or nothing. A
        grant's reply is empty (remaining is the RateLimit field's r); a
        rejection's is the agent's whole reply."""
        return self._decide(resource, domain, copies, None, max_wait, check=True)

    # ---- simulation ----

    def simulate(self, resource: Mapping[str, Any], requests: Iterable[Mapping[str, Any]],
                 timeout: float = 10.0) -> List[Decision]:
        """Runs requests ({"at_ms", "domain", "copies", "min_copies", "op"})
        against a fresh engine with one resource's config, on virtual time
        (POST /v1/simulate; nothing live is touched), and returns a Decision
        per request (a refund's has only remaining). It does not fail open:
        AgentUnavailable when the agent cannot answer."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        body = {"resource": dict(resource), "requests": [dict(r) for r in requests]}
        try:
            _, _, raw = self._t.call("POST", "/v1/simulate", body, timeout=_seconds("timeout", timeout, False))
            ds = _json(raw).get("decisions")
            if not isinstance(ds, list):
                raise Unavailable("unreadable reply: no decisions")
            out = []
            for d in ds:
                if isinstance(d, dict) and "granted" not in d:  # a refund item: {"remaining"}
                    out.append(Decision(remaining=_int(d, "remaining"), reply=d))
                else:
                    out.append(Decision.from_reply(d))
            return out
        except (Unavailable, ValueError, AttributeError) as e:
            raise AgentUnavailable("obol: simulate: %s" % e) from None
        except APIError as e:
            raise self._fail(e)

    # ---- end ----

    def close(self) -> None:
        """Stops the background loop, ends the sessions (the agent releases
        every copy they hold) and closes the connections. Later calls raise
        ClientClosed."""
        if self._closed:
            return
        self._stop.set()
        with self._lock:
            sessions = list(self._sessions)
            loop = self._loop
        for s in sessions:
            s.close()
        self._closed = True
        if loop is not None:
            loop.join()
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Client(%r)" % (self._t.address,)
