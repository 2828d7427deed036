"""HTTP/1.1 to the agent over its Unix socket or loopback TCP, with kept-alive
connections shared by threads, one deadline per call, and the sorting of
failures into client errors (raised) and agent failures (Unavailable)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from .errors import api_error

# Idle connections older than this are closed rather than reused (the agent
# keeps them two minutes).
IDLE_TIMEOUT = 10.0
# At most this many idle connections are kept for reuse.
MAX_IDLE = 64
# Replies longer than this are an agent failure (no reply of the API comes close).
MAX_REPLY = 4 << 20


class Unavailable(Exception):
    """The agent could not answer: the call fails open. timeout says whether it
    was a timeout (which pauses asking)."""

    def __init__(self, cause: str, timeout: bool = False) -> None:
        super().__init__(cause)
        self.timeout = timeout


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


def _snippet(b: bytes) -> str:
    s = b[:120].decode("utf-8", "replace")
    return s + ("…" if len(b) > 120 else "")


class Transport:
    """One agent's address and a pool of kept-alive connections."""

    def __init__(self, socket_path: Optional[str], url: Optional[str], timeout: float) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._idle: List[Tuple[http.client.HTTPConnection, float]] = []
        self._closed = False
        self.paused_until = 0.0
        self.pause = 0.1
        if url is not None:
            u = urlsplit(url)
            if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment:
                raise ValueError("obol: url %r: want http://host:port[/prefix] (or https), with no query" % (url,))
            try:
                port = u.port
            except ValueError:
                raise ValueError("obol: url %r: the port is not a number in [0, 65535]" % (url,)) from None
            self._https = u.scheme == "https"
            self._host = u.hostname
            self._port = port or (443 if self._https else 80)
            self.prefix = u.path.rstrip("/")
            self.socket_path: Optional[str] = None
            self.address = url
        else:
            assert socket_path is not None
            self.socket_path = socket_path
            self.prefix = ""
            self.address = socket_path

    def _new(self) -> http.client.HTTPConnection:
        if self.socket_path is not None:
            return _UnixConnection(self.socket_path, self.timeout)
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)

    def _take(self) -> Tuple[http.client.HTTPConnection, bool]:
        now = time.monotonic()
        stale = []
        conn = None
        with self._lock:
            while self._idle:
                c, since = self._idle.pop()
                if now - since < IDLE_TIMEOUT:
                    conn = c
                    break
                stale.append(c)
        for c in stale:
            c.close()
        if conn is not None:
            return conn, True
        return self._new(), False

    def _put(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c, _ in idle:
            c.close()

    def call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None,
             accept_429: bool = False, timeout: Optional[float] = None
             ) -> Tuple[int, http.client.HTTPResponse, bytes]:
        """Sends one call; returns (status, response, body) for a 2xx (and a 429
        when accept_429). Raises an APIError for a 4xx, Unavailable when the
        agent cannot answer (refused, missing, past the deadline, 1xx/3xx/5xx,
        a reply it cannot read)."""
        if timeout is None:
            timeout = self.timeout
        now = time.monotonic()
        if now < self.paused_until:
            raise Unavailable("not asked: a call timed out less than %g ms ago" % (self.pause * 1000))
        deadline = now + timeout
        data = None
        headers = {}
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        target = self.prefix + path
        for attempt in (0, 1):
            conn, reused = self._take()
            sent = False
            try:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout("deadline passed")
                conn.timeout = left
                if conn.sock is None:
                    conn.connect()
                else:
                    conn.sock.settimeout(left)
                conn.request(method, target, body=data, headers=headers)
                sent = True
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout("deadline passed")
                conn.sock.settimeout(left)  # type: ignore[union-attr]
                resp = conn.getresponse()
                raw = resp.read(MAX_REPLY + 1)
            except socket.timeout as e:
                conn.close()
                if self.pause > 0:
                    self.paused_until = time.monotonic() + self.pause
                raise Unavailable("timed out after %g ms: %s" % (timeout * 1000, e), timeout=True) from None
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as e:
                conn.close()
                # A kept-alive connection the agent closed fails before any
                # reply byte: send once more on a new one.
                if reused and attempt == 0:
                    continue
                raise Unavailable("connection %s: %s" % ("lost" if sent else "failed", e)) from None
            except (OSError, http.client.HTTPException, ValueError) as e:
                conn.close()
                raise Unavailable("%s: %s" % (type(e).__name__, e)) from None
            except BaseException:
                conn.close()
                raise
            if len(raw) > MAX_REPLY:
                conn.close()
                raise Unavailable("reply over %d bytes" % MAX_REPLY)
            if resp.will_close:
                conn.close()
            else:
                self._put(conn)
            status = resp.status
            if 200 <= status < 300 or (status == 429 and accept_429):
                return status, resp, raw
            if 400 <= status < 500:
                code, msg = "", _snippet(raw)
                try:
                    e = json.loads(raw)["error"]
                    if isinstance(e, dict) and isinstance(e.get("code"), str):
                        code, msg = e["code"], str(e.get("message", ""))
                except (ValueError, KeyError, TypeError):
                    pass
                raise api_error(status, code, msg)
            raise Unavailable("status %d: %s" % (status, _snippet(raw)))
        raise AssertionError("unreachable")
