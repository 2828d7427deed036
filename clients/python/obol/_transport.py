"""HTTP/1.1 (written and read by hand: the API's replies are small) to the agent over its Unix socket or loopback TCP, with kept-alive
connections shared by threads, one deadline per call, and the sorting of
failures into client errors (raised) and agent failures (Unavailable)."""

from __future__ import annotations

import json
import socket
import os
import threading
import time
import weakref
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
# A reply's status line and headers longer than this are an agent failure.
MAX_HEAD = 64 << 10


class Unavailable(Exception):
    """The agent could not answer: the call fails open. timeout says whether it
    was a timeout (which pauses asking)."""

    def __init__(self, cause: str, timeout: bool = False) -> None:
        super().__init__(cause)
        self.timeout = timeout


class Response:
    """A reply: status, headers (lower-case names) and body."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def getheader(self, name: str, default: Optional[str] = None) -> Optional[str]:
        return self.headers.get(name.lower(), default)


class _Conn:
    """A connection to the agent and the bytes read past the last reply."""

    __slots__ = ("sock", "buf")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class _Stale(Exception):
    """A kept-alive connection ended before any byte of the reply."""


class _Bad(Exception):
    """A reply that is not HTTP/1.x as the client reads it."""


def _snippet(b: bytes) -> str:
    s = b[:120].decode("utf-8", "replace")
    return s + ("…" if len(b) > 120 else "")


# Every transport, so that a forked child (a pre-forking web server's
# worker) drops the connections it inherited instead of sharing them with
# its parent.
_transports: "weakref.WeakSet[Transport]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for t in list(_transports):
        t._lock = threading.Lock()
        idle, t._idle = t._idle, []
        for c, _ in idle:
            c.close()  # the child's copy of the descriptor: the parent's connection lives on


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Transport:
    """One agent's address and a pool of kept-alive connections."""

    def __init__(self, socket_path: Optional[str], url: Optional[str], timeout: float) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._idle: List[Tuple[_Conn, float]] = []
        self._closed = False
        self.paused_until = 0.0
        self.pause = 0.1
        _transports.add(self)
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
            self._hosthdr = u.netloc.encode("idna" if not u.netloc.isascii() else "ascii")
            self.socket_path: Optional[str] = None
            self.address = url
        else:
            assert socket_path is not None
            self.socket_path = socket_path
            self.prefix = ""
            self._hosthdr = b"localhost"
            self.address = socket_path

    def _new(self, timeout: float) -> _Conn:
        if self.socket_path is not None:
            sk = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sk.settimeout(timeout)
                sk.connect(self.socket_path)
            except BaseException:
                sk.close()
                raise
            return _Conn(sk)
        sk = socket.create_connection((self._host, self._port), timeout=timeout)
        try:
            sk.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._https:
                import ssl
                sk = ssl.create_default_context().wrap_socket(sk, server_hostname=self._host)
        except BaseException:
            sk.close()
            raise
        return _Conn(sk)

    def _take(self) -> Optional[_Conn]:
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
        return conn

    def _put(self, conn: _Conn) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def close_idle(self) -> None:
        """Closes the kept-alive connections (later calls connect anew)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for c, _ in idle:
            c.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for c, _ in idle:
            c.close()

    def call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None,
             accept_429: bool = False, timeout: Optional[float] = None) -> Tuple[int, Response, bytes]:
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
        target = (self.prefix + path).encode()
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            msg = b"%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
                method.encode(), target, self._hosthdr, len(data), data)
        else:
            msg = b"%s %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (method.encode(), target, self._hosthdr)
        for attempt in (0, 1):
            conn = self._take() if attempt == 0 else None
            reused = conn is not None
            try:
                if conn is None:
                    conn = self._new(deadline - now if attempt == 0 else max(deadline - time.monotonic(), 1e-6))
                conn.sock.settimeout(max(deadline - time.monotonic(), 1e-6))
                conn.sock.sendall(msg)
                resp, keep = self._read(conn, deadline, reused, method == "HEAD")
            except _Stale as e:
                conn.close()  # type: ignore[union-attr]
                if attempt == 0:
                    continue  # a kept-alive connection the agent closed: once more on a new one
                raise Unavailable("connection lost: %s" % e) from None
            except socket.timeout as e:
                if conn is not None:
                    conn.close()
                if self.pause > 0:
                    self.paused_until = time.monotonic() + self.pause
                raise Unavailable("timed out after %g ms: %s" % (timeout * 1000, e), timeout=True) from None
            except (ConnectionResetError, BrokenPipeError) as e:
                if conn is not None:
                    conn.close()
                if reused and attempt == 0:
                    continue
                raise Unavailable("connection lost: %s" % e) from None
            except (OSError, _Bad, ValueError) as e:
                if conn is not None:
                    conn.close()
                raise Unavailable("%s: %s" % (type(e).__name__, e)) from None
            except BaseException:
                if conn is not None:
                    conn.close()
                raise
            if keep:
                self._put(conn)
            else:
                conn.close()
            status, raw = resp.status, resp.body
            if 200 <= status < 300 or (status == 429 and accept_429):
                return status, resp, raw
            if 400 <= status < 500:
                code, text = "", _snippet(raw)
                try:
                    e = json.loads(raw)["error"]
                    if isinstance(e, dict) and isinstance(e.get("code"), str):
                        code, text = e["code"], str(e.get("message", ""))
                except (ValueError, KeyError, TypeError):
                    pass
                raise api_error(status, code, text)
            raise Unavailable("status %d: %s" % (status, _snippet(raw)))
        raise AssertionError("unreachable")

    @staticmethod
    def _recv(conn: _Conn, deadline: float) -> bytes:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("deadline passed")
        conn.sock.settimeout(left)
        return conn.sock.recv(65536)

    def _read(self, conn: _Conn, deadline: float, reused: bool, head_only: bool) -> Tuple[Response, bool]:
        """Reads one reply from conn; returns it and whether the connection may be kept."""
        buf = conn.buf
        conn.buf = b""
        while True:
            i = buf.find(b"\r\n\r\n")
            if i >= 0:
                break
            if len(buf) > MAX_HEAD:
                raise _Bad("reply head over %d bytes" % MAX_HEAD)
            chunk = self._recv(conn, deadline)
            if not chunk:
                if not buf and reused:
                    raise _Stale("closed before the reply")
                raise _Bad("connection closed %s" % ("before the reply" if not buf else "in the reply's head"))
            buf += chunk
        lines = buf[:i].split(b"\r\n")
        rest = buf[i + 4:]
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3 or not parts[1].isdigit():
            raise _Bad("not an HTTP/1.x status line: %r" % (lines[0][:60],))
        status = int(parts[1])
        headers: Dict[str, str] = {}
        for line in lines[1:]:
            k, sep, v = line.partition(b":")
            if not sep or not k or k != k.strip():
                raise _Bad("malformed header line: %r" % (line[:60],))
            headers[k.decode("latin-1").lower()] = v.strip().decode("latin-1")
        keep = headers.get("connection", "").lower() != "close" and parts[0] == b"HTTP/1.1"
        te = headers.get("transfer-encoding", "").lower()
        if head_only or status in (204, 304) or 100 <= status < 200:
            body = b""
            conn.buf = rest
        elif te and te != "identity":
            if te != "chunked":
                raise _Bad("transfer-encoding %r" % te)
            body, conn.buf = self._chunked(conn, rest, deadline)
        elif "content-length" in headers:
            cl = headers["content-length"]
            if not cl.isdigit() or int(cl) > MAX_REPLY:
                raise _Bad("content-length %r: want a number of at most %d" % (cl, MAX_REPLY))
            n = int(cl)
            while len(rest) < n:
                chunk = self._recv(conn, deadline)
                if not chunk:
                    raise _Bad("connection closed in the reply's body")
                rest += chunk
            body, conn.buf = rest[:n], rest[n:]
        else:  # the body ends with the connection
            keep = False
            while True:
                if len(rest) > MAX_REPLY:
                    raise _Bad("reply over %d bytes" % MAX_REPLY)
                chunk = self._recv(conn, deadline)
                if not chunk:
                    break
                rest += chunk
            body = rest
        return Response(status, headers, body), keep

    def _chunked(self, conn: _Conn, buf: bytes, deadline: float) -> Tuple[bytes, bytes]:
        out = []
        total = 0
        while True:
            while b"\r\n" not in buf:
                chunk = self._recv(conn, deadline)
                if not chunk or len(buf) > 1024:
                    raise _Bad("malformed chunked body")
                buf += chunk
            line, _, buf = buf.partition(b"\r\n")
            size = int(line.split(b";")[0].strip() or b"x", 16)
            total += size
            if total > MAX_REPLY:
                raise _Bad("reply over %d bytes" % MAX_REPLY)
            if size == 0:
                while not (buf.startswith(b"\r\n") or b"\r\n\r\n" in buf):
                    chunk = self._recv(conn, deadline)
                    if not chunk or len(buf) > MAX_HEAD:
                        raise _Bad("malformed chunked trailer")
                    buf += chunk
                end = 2 if buf.startswith(b"\r\n") else buf.index(b"\r\n\r\n") + 4
                return b"".join(out), buf[end:]
            while len(buf) < size + 2:
                chunk = self._recv(conn, deadline)
                if not chunk:
                    raise _Bad("connection closed in a chunk")
                buf += chunk
            out.append(buf[:size])
            buf = buf[size + 2:]
