"""Copies of copy-limited resources: Hold, Session, and the client's calls
on them (its own session, releases queued while the agent is away, the
background loop that keeps sessions alive)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple
from urllib.parse import quote

from ._base import _ClientBase
from ._common import MAX_COPIES, _check_count, _check_names, _counts, _int, _json
from ._transport import Unavailable
from .errors import APIError, ClientClosed, UnknownHold, UnknownSession, bad

if TYPE_CHECKING:
    from ._client import Client


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


class _CopyCalls(_ClientBase):
    """Client.session, reserve, seize, release and transfer, and the
    background loop of keepalives and queued releases. self is always a
    Client (hence the type: ignore where a Session is made)."""

    def session(self, ttl_ms: Optional[int] = None) -> Session:
        """A new session of its own: ``with client.session() as s:
        s.reserve(...)``; leaving the block ends it, releasing every copy its
        holds still have."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        ttl = self._session_ttl_ms if ttl_ms is None else ttl_ms
        if isinstance(ttl, bool) or not isinstance(ttl, int) or not 3 <= ttl <= 86_400_000:
            raise self._fail(bad("ttl_ms: want an integer in [3, 86400000], got %r" % (ttl,)))
        return Session(self, ttl)  # type: ignore[arg-type]

    def _default_session(self) -> Session:
        with self._lock:
            if self._default is None:
                self._default = Session(self, self._session_ttl_ms)  # type: ignore[arg-type]
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
