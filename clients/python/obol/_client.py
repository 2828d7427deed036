"""The Client: rate decisions, copies with sessions, admissions, pacing, and
failing open when the agent cannot answer."""

from __future__ import annotations

import json
import logging
import math
import os
import random
import threading
import time
import weakref
from typing import (Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional,
                    Sequence, Tuple, Union)
from urllib.parse import quote

from ._transport import Transport, Unavailable
from .errors import (AgentUnavailable, APIError, ClientClosed, UnknownHold, UnknownSession, api_error,
                     bad)
from .limits import Limit, wire_limit
from .ratelimit import first_param, parse_list

log = logging.getLogger("obol")

MAX_COPIES = 1_000_000_000
#: The agent's bounds on one batch call.
BATCH_MAX_ITEMS = 1000
BATCH_MAX_BYTES = 64 << 10
DEFAULT_TIMEOUT = 0.02
DEFAULT_SESSION_TTL_MS = 30_000
DEFAULT_RETRY_BASE = 0.01
DEFAULT_TIMEOUT_PAUSE = 0.1
DEFAULT_LOG_INTERVAL = 60.0

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def default_socket(environ: Optional[Mapping[str, str]] = None) -> str:
    """The socket a client dials when given none, by the agent's own rule:
    $OBOL_SOCKET, else $XDG_RUNTIME_DIR/obol.sock (an absolute path only),
    else /run/obol/obol.sock when /run/obol is a directory, else
    /tmp/obol-UID/obol.sock."""
    env = os.environ if environ is None else environ
    p = env.get("OBOL_SOCKET", "")
    if p == "off":
        raise ValueError('obol: OBOL_SOCKET is "off": the agent serves no Unix socket; give its url instead')
    if p:
        return p
    d = env.get("XDG_RUNTIME_DIR", "")
    if d and os.path.isabs(d):
        return os.path.join(d, "obol.sock")
    if os.path.isdir("/run/obol"):
        return "/run/obol/obol.sock"
    return os.path.join("/tmp", "obol-%d" % os.getuid(), "obol.sock")


def _kill_switch_env(v: str) -> bool:
    if v == "" or v in _FALSE:
        return False
    if v in _TRUE:
        return True
    raise ValueError("obol: OBOL_KILL_SWITCH: want 1, true, 0 or false (or t, f, TRUE, FALSE), got %r" % (v,))


def _check_names(resource: Any, domain: Any) -> None:
    if not isinstance(resource, str) or resource == "":
        raise bad("resource: a non-empty string is required, got %r" % (resource,))
    if not isinstance(domain, str) or domain == "":
        raise bad("domain: a non-empty string is required, got %r" % (domain,))


def _check_count(name: str, v: Any, hi: int = MAX_COPIES) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > hi:
        raise bad("%s: must be an integer in [0, %d], got %r" % (name, hi, v))
    return v


def _counts(copies: Any, min_copies: Any) -> Tuple[int, int]:
    copies = _check_count("copies", copies)
    if min_copies is None:
        return copies, copies
    min_copies = _check_count("min_copies", min_copies)
    if min_copies > copies:
        raise bad("min_copies: must be in [0, copies=%d], got %d" % (copies, min_copies))
    return copies, min_copies


def _seconds(name: str, v: Any, allow_zero: bool = True) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v) \
            or v < 0 or (v == 0 and not allow_zero):
        raise bad("%s: must be a finite number of seconds %s 0, got %r" % (name, "≥" if allow_zero else ">", v))
    return float(v)


def _int(reply: Mapping[str, Any], name: str, default: int = 0) -> int:
    v = reply.get(name, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("%s: not an integer: %r" % (name, v))
    return v


def _json(raw: bytes) -> Dict[str, Any]:
    try:
        v = json.loads(raw)
    except ValueError as e:
        raise Unavailable("unreadable reply: %s" % e) from None
    if not isinstance(v, dict):
        raise Unavailable("unreadable reply: not a JSON object: %r" % (raw[:80],))
    return v


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


class _LogLimiter:
    """One log line per interval; counts the events in between."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: Optional[float] = None
        self._count = 0

    def allow(self, now: float, every: float, events: int = 1) -> int:
        with self._lock:
            self._count += events
            if self._last is not None and now - self._last < every:
                return 0
            n, self._count, self._last = self._count, 0, now
            return n


class Hold:
    """Copies of a copy-limited resource held in a session. A rejected reserve
    is a Hold with granted == 0 and no id; its methods do nothing.
    ``with hold:`` releases what is left on exit."""

    def __init__(self, session: "Session", resource: str, domain: str, granted: int,
                 hold_id: Optional[str], degraded: bool = False, killed: bool = False,
                 reply: Optional[Dict[str, Any]] = None, generation: int = 0) -> None:
        self._session = session
        self.resource = resource
        self.domain = domain
        self.granted = granted
        self.id = hold_id
        self.degraded = degraded
        self.killed = killed
        self.reply: Dict[str, Any] = reply or {}
        self.retries = 0
        self._held = granted
        self._gen = generation
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """The copies the hold still has (granted less what was released or transferred)."""
        return self._held

    def __bool__(self) -> bool:
        return self.granted > 0

    def __enter__(self) -> "Hold":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def _live(self) -> bool:
        return self.id is not None and self._session._gen == self._gen and not self._session._ended

    def release(self, copies: Optional[int] = None) -> None:
        """Releases copies (default: all that is left). Idempotent; a hold the
        agent no longer knows counts as released; when the agent is
        unreachable the release is queued and retried in the background."""
        c = self._session._client
        with self._lock:
            n = self._held if copies is None else _check_count("copies", copies)
            if n > self._held:
                raise c._fail(bad("copies: releasing %d of a hold with %d left" % (n, self._held)))
            if n == 0:
                return
            self._held -= n
            if not self._live():
                return
            c._release(self.id, n, self._session)  # type: ignore[arg-type]

    def transfer(self, copies: Optional[int] = None, ttl_ms: int = 0) -> str:
        """Gives copies (default: all left) to whoever seizes the returned id
        within ttl_ms (0: the agent's default, 30 s). A degraded or killed
        hold, or an agent that cannot be asked, gives "degraded:N" /
        "killed:N", which seize turns into a hold of N without asking."""
        c = self._session._client
        with self._lock:
            n = self._held if copies is None else _check_count("copies", copies)
            _check_count("ttl_ms", ttl_ms, 86_400_000)
            if n > self._held:
                raise c._fail(bad("copies: transferring %d of a hold with %d left" % (n, self._held)))
            if not self._live():
                self._held -= n
                return "%s:%d" % ("killed" if self.killed else "degraded", n)
            body: Dict[str, Any] = {"hold": self.id, "copies": n}
            if ttl_ms:
                body["ttl_ms"] = ttl_ms
            try:
                _, _, raw = c._t.call("POST", "/v1/transfer", body)
                tid = _json(raw).get("transfer")
                if not isinstance(tid, str) or not tid:
                    raise Unavailable("no transfer id in the reply")
            except Unavailable as e:
                c._degrade(e)
                return "degraded:%d" % n  # the copies stay in the hold
            except APIError as e:
                raise c._fail(e)
            self._held -= n
            return tid

    def __repr__(self) -> str:
        return "Hold(resource=%r, domain=%r, granted=%d, held=%d, id=%r%s%s)" % (
            self.resource, self.domain, self.granted, self._held, self.id,
            ", degraded=True" if self.degraded else "", ", killed=True" if self.killed else "")


class Session:
    """A lease with the agent under which copies are held: opened on the
    first reserve or seize, renewed in the background every third of ttl_ms.
    close() (or leaving ``with client.session() as s:``) ends it: the agent
    releases every copy it holds. If the process dies, they are released
    within ttl_ms."""

    def __init__(self, client: "Client", ttl_ms: int) -> None:
        self._client = client
        self.ttl_ms = ttl_ms
        self.id: Optional[str] = None
        self._gen = 0
        self._ended = False
        self._lock = threading.Lock()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _open(self, stale: Optional[str] = None) -> str:
        """The session's id, opening it when there is none (or when it is stale)."""
        c = self._client
        with self._lock:
            if self._ended:
                raise ClientClosed("obol: the session is closed")
            if self.id is not None and self.id != stale:
                return self.id
            _, _, raw = c._t.call("POST", "/v1/sessions", {"ttl_ms": self.ttl_ms})
            sid = _json(raw).get("session")
            if not isinstance(sid, str) or not sid:
                raise Unavailable("no session id in the reply")
            self.id = sid
            self._gen += 1
            with c._lock:
                c._n_sessions += 1
                c._sessions.add(self)
            c._start_loop()
            return sid

    def _with_session(self, fn: Callable[[str], Any]) -> Any:
        sid = self._open()
        try:
            return fn(sid)
        except UnknownSession:
            # Expired while the agent was unreachable, or the agent lost its
            # state: reopen once.
            return fn(self._open(stale=sid))

    def reserve(self, resource: str, domain: str, copies: int = 1, min_copies: Optional[int] = None,
                max_wait: Optional[float] = None) -> Hold:
        """Holds copies (default 1) of a copy-limited resource for domain, at
        least min_copies (default all). A rejection is a Hold with granted 0.
        Degraded: a Hold of min_copies the agent does not hold. Killed: a
        rejection turned into a Hold of every copy asked, not held."""
        c = self._client
        c._begin()
        try:
            _check_names(resource, domain)
            copies, min_copies = _counts(copies, min_copies)
            wait = c._max_wait(max_wait)
        except APIError as e:
            raise c._fail(e)

        def once() -> Tuple[Hold, bool, int]:
            def send(sid: str) -> Tuple[Dict[str, Any], int]:
                _, _, raw = c._t.call("POST", "/v1/reserve", {"resource": resource, "domain": domain,
                                                             "copies": copies, "min_copies": min_copies,
                                                             "session": sid})
                return _json(raw), self._gen
            reply, gen = self._with_session(send)
            try:
                granted = _int(reply, "granted")
            except ValueError as e:
                raise Unavailable("unreadable reply: %s" % e) from None
            hid = reply.get("hold")
            if granted > 0 and (not isinstance(hid, str) or not hid):
                raise Unavailable("unreadable reply: a grant without a hold id")
            h = Hold(self, resource, domain, granted, hid if granted > 0 else None, reply=reply, generation=gen)
            return h, granted > 0, 0

        try:
            h, retries = c._retry(once, wait)
        except Unavailable as e:
            c._degrade(e)
            return Hold(self, resource, domain, min_copies, None, degraded=True)
        except APIError as e:
            raise c._fail(e)
        h.retries = retries
        if h.granted == 0 and copies > 0 and c.kill_switch:
            c._killed(resource, domain)
            return Hold(self, resource, domain, copies, None, killed=True, reply=h.reply)
        return h

    def seize(self, transfer_id: str) -> Hold:
        """Takes the copies another process transferred. "degraded:N" and
        "killed:N" give a hold of N without asking; when the agent cannot be
        asked, a degraded hold of 0 (the client cannot know the count)."""
        c = self._client
        c._begin()
        if not isinstance(transfer_id, str) or not transfer_id:
            raise c._fail(bad("transfer: a non-empty string is required, got %r" % (transfer_id,)))
        for prefix in ("degraded:", "killed:"):
            if transfer_id.startswith(prefix):
                n = transfer_id[len(prefix):]
                if not n.isdigit() or int(n) > MAX_COPIES:
                    raise c._fail(bad("transfer: %r: want %sN with N in [0, %d]" % (transfer_id, prefix, MAX_COPIES)))
                return Hold(self, "", "", int(n), None, degraded=prefix == "degraded:",
                            killed=prefix == "killed:")
        try:
            def send(sid: str) -> Tuple[Dict[str, Any], int]:
                _, _, raw = c._t.call("POST", "/v1/seize", {"transfer": transfer_id, "session": sid})
                return _json(raw), self._gen
            reply, gen = self._with_session(send)
            hid = reply.get("hold")
            if not isinstance(hid, str) or not hid:
                raise Unavailable("unreadable reply: no hold id")
            n = _int(reply, "copies")
        except Unavailable as e:
            c._degrade(e)
            return Hold(self, "", "", 0, None, degraded=True)
        except ValueError as e:
            c._degrade(Unavailable(str(e)))
            return Hold(self, "", "", 0, None, degraded=True)
        except APIError as e:
            raise c._fail(e)
        return Hold(self, str(reply.get("resource", "")), str(reply.get("domain", "")), n, hid,
                    reply=reply, generation=gen)

    def close(self) -> None:
        """Ends the session: the agent releases every copy it holds. An agent
        that cannot be asked lets the session expire."""
        c = self._client
        with self._lock:
            if self._ended:
                return
            self._ended = True
            sid, self.id = self.id, None
        with c._lock:
            c._sessions.discard(self)
            c._pending = [p for p in c._pending if p[2] is not self]
        if sid is None:
            return
        try:
            c._t.call("DELETE", "/v1/sessions/" + quote(sid, safe=""))
        except (Unavailable, APIError):
            pass

    def _keepalive(self) -> None:
        with self._lock:
            sid = self.id
        if sid is None or self._ended:
            return
        try:
            self._client._t.call("POST", "/v1/sessions/%s/keepalive" % quote(sid, safe=""))
        except UnknownSession:
            with self._lock:
                if self.id == sid:
                    self.id = None  # the next reserve or seize opens a new one
        except (Unavailable, APIError):
            pass


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


Need = Union[Tuple[str, str], Tuple[str, str, int], Tuple[str, str, int, Optional[int]],
             Tuple[str, str, int, Optional[int], Optional[Limit]], Mapping[str, Any]]


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


class Client:
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

    def batch(self, needs: Sequence[Need]) -> List[Union[Decision, APIError]]:
        """Many rate decisions in as few calls as the agent's limits allow
        (1000 items and 64 KiB a call). Each need is (resource, domain[,
        copies[, min_copies[, limit]]]) or a mapping with those keys. The result has,
        per need in order, a Decision or the APIError of that item (refused
        by the client before sending, or by the agent). A call the agent
        cannot answer degrades its items. No max_wait."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        if not isinstance(needs, (list, tuple)):
            raise self._fail(bad("needs: want a list of (resource, domain[, copies[, min_copies]]), got %r"
                                 % (type(needs).__name__,)))
        out: List[Union[Decision, APIError, None]] = [None] * len(needs)
        items: List[Tuple[int, Dict[str, Any], bytes]] = []
        for i, n in enumerate(needs):
            self._add("calls")
            try:
                if isinstance(n, Mapping):
                    unknown = set(n) - {"resource", "domain", "copies", "min_copies", "limit"}
                    if unknown:
                        raise bad("batch item %d: unknown keys %s; want resource, domain, copies, min_copies, limit"
                                  % (i, sorted(unknown)))
                    r, d, c, m, lim = (n.get("resource"), n.get("domain"), n.get("copies", 1), n.get("min_copies"),
                                       n.get("limit"))
                elif isinstance(n, (tuple, list)) and 2 <= len(n) <= 5:
                    r, d, c, m, lim = list(n) + [1, None, None][len(n) - 2:]
                else:
                    raise bad("batch item %d: want (resource, domain[, copies[, min_copies[, limit]]]) or a mapping, "
                              "got %r" % (i, n))
                _check_names(r, d)
                c, m = _counts(c, m)
                lim = wire_limit(lim)
            except APIError as e:
                out[i] = self._fail(e)  # type: ignore[assignment]
                continue
            body: Dict[str, Any] = {"resource": r, "domain": d, "copies": c, "min_copies": m}
            if lim is not None:
                body["limit"] = lim
            items.append((i, body, json.dumps(body, separators=(",", ":")).encode()))
        chunk: List[Tuple[int, Dict[str, Any], bytes]] = []
        size = 0
        for it in items + [None]:  # type: ignore[list-item]
            if it is not None and (len(chunk) < BATCH_MAX_ITEMS and size + len(it[2]) + 1 < BATCH_MAX_BYTES - 64):
                chunk.append(it)
                size += len(it[2]) + 1
                continue
            if chunk:
                self._batch_call(chunk, out)
            chunk, size = ([it], len(it[2]) + 1) if it is not None else ([], 0)
        return out  # type: ignore[return-value]

    def _batch_call(self, chunk: List[Tuple[int, Dict[str, Any], bytes]], out: List[Any]) -> None:
        try:
            _, _, raw = self._t.call("POST", "/v1/batch", {"requests": [b for _, b, _ in chunk]})
            replies = _json(raw).get("responses")
            if not isinstance(replies, list) or len(replies) != len(chunk):
                raise Unavailable("unreadable reply: want %d responses" % len(chunk))
            decided = []
            for (i, body, _), r in zip(chunk, replies):
                if not isinstance(r, dict):
                    raise Unavailable("unreadable reply: a response is not an object")
                if isinstance(r.get("error"), dict):
                    e = r["error"]
                    code = str(e.get("code", ""))
                    decided.append((i, self._fail(api_error(_STATUS.get(code, 400), code, str(e.get("message", ""))))))
                    continue
                try:
                    decided.append((i, Decision.from_reply(r)))
                except ValueError as e:
                    raise Unavailable("unreadable reply: %s" % e) from None
        except Unavailable as e:
            self._degrade(e, events=len(chunk))
            for i, body, _ in chunk:
                out[i] = Decision(granted=body["min_copies"], degraded=True)
            return
        except APIError as e:
            raise self._fail(e)
        for i, v in decided:
            out[i] = v
        for i, b, _ in chunk:
            v = out[i]
            if isinstance(v, Decision) and v.granted == 0 and b["copies"] > 0 and self.kill_switch:
                v.granted, v.retry_after_ms, v.killed = b["copies"], 0, True
                self._killed(b["resource"], b["domain"])

    # ---- copies ----

    def session(self, ttl_ms: Optional[int] = None) -> Session:
        """A new session of its own: ``with client.session() as s:
        s.reserve(...)``; leaving the block ends it, releasing every copy its
        holds still have."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        ttl = self._session_ttl_ms if ttl_ms is None else ttl_ms
        if isinstance(ttl, bool) or not isinstance(ttl, int) or not 3 <= ttl <= 86_400_000:
            raise self._fail(bad("ttl_ms: want an integer in [3, 86400000], got %r" % (ttl,)))
        return Session(self, ttl)

    def _default_session(self) -> Session:
        with self._lock:
            if self._default is None:
                self._default = Session(self, self._session_ttl_ms)
            return self._default

    def reserve(self, resource: str, domain: str, copies: int = 1, min_copies: Optional[int] = None,
                max_wait: Optional[float] = None) -> Hold:
        """Session.reserve in the client's own session (ended by close())."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        return self._default_session().reserve(resource, domain, copies, min_copies, max_wait)

    def seize(self, transfer_id: str) -> Hold:
        """Session.seize in the client's own session."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        return self._default_session().seize(transfer_id)

    def release(self, hold: Hold, copies: Optional[int] = None) -> None:
        """hold.release(copies)."""
        hold.release(copies)

    def transfer(self, hold: Hold, copies: Optional[int] = None, ttl_ms: int = 0) -> str:
        """hold.transfer(copies, ttl_ms)."""
        return hold.transfer(copies, ttl_ms)

    def _release(self, hold_id: str, n: int, session: Session) -> bool:
        try:
            self._t.call("POST", "/v1/release", {"hold": hold_id, "copies": n})
        except UnknownHold:
            return True  # gone already: released
        except APIError as e:
            raise self._fail(e)
        except Unavailable as e:
            self._degrade(e, what="queueing a release")
            with self._lock:
                self._pending.append((hold_id, n, session))
            return False
        return True

    def _start_loop(self) -> None:
        with self._lock:
            if self._loop is not None or self._closed:
                return
            self._loop = threading.Thread(target=self._run_loop, name="obol-keepalive", daemon=True)
            self._loop.start()

    def _run_loop(self) -> None:
        while True:
            with self._lock:
                sessions = list(self._sessions)
            ttl = min([s.ttl_ms for s in sessions] or [self._session_ttl_ms])
            if self._stop.wait(ttl / 3000):
                return
            for s in sessions:
                s._keepalive()
            self._retry_pending()

    def _retry_pending(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
        for i, (hid, n, s) in enumerate(pending):
            try:
                self._t.call("POST", "/v1/release", {"hold": hid, "copies": n})
            except Unavailable:
                with self._lock:
                    self._pending.extend(pending[i:])
                return
            except APIError:
                pass  # unknown_hold: its session ended; released

    # ---- adaptive windows and pacers ----

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
            a = Admission(self, resource, admitted, ticket if admitted else None,
                          _int(r, "position"), _int(r, "window"))
        except ValueError as e:
            self._degrade(Unavailable(str(e)), what="admitting")
            return Admission(self, resource, True, None, 0, 0, degraded=True)
        except Unavailable as e:
            self._degrade(e, what="admitting")
            return Admission(self, resource, True, None, 0, 0, degraded=True)
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


# The status the agent's API gives each error code (for a batch item's error).
_STATUS = {"bad_request": 400, "bad_limit": 400, "cost_over_burst": 400, "unknown_resource": 404,
           "wrong_kind": 409, "too_large": 413, "too_many": 429}
