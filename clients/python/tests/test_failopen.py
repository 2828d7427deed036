"""Failing open: the fail-open matrix against a fake agent that is missing,
refuses, hangs, resets, answers 5xx, 3xx or garbage; the once-a-minute log;
the timeout pause; max_wait's schedule; the kill switch's environment."""

from __future__ import annotations

import logging
import os
import random
import socket
import struct
import unittest
from typing import Any, Callable, List, Tuple

import obol
from obol import Client

from .support import PATIENCE, QUIET, FakeAgent, answer, read_request, short_dir


def hang(agent_ref: List[FakeAgent]) -> Callable[[socket.socket], None]:
    def h(conn: socket.socket) -> None:
        read_request(conn)
        agent_ref[0].release.wait(PATIENCE)
    return h


def reset(conn: socket.socket) -> None:
    read_request(conn)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def close_at_once(conn: socket.socket) -> None:
    read_request(conn)
    conn.close()


class ListLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: List[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def every_call(c: Client, answers_2xx: bool = False) -> List[Tuple[str, Callable[[], Any], Callable[[Any], bool]]]:
    """Each call the client makes, and what its degraded result looks like.
    answers_2xx: the agent answers 2xx with a body the client cannot read;
    check (whose grant is a 204 with no body) and observe (whose reply is
    not read) then take it as the agent's answer."""
    if answers_2xx:
        return [
            ("check", lambda: c.check("r", "d", copies=2), lambda d: d.granted == 2 and not d.degraded),
            ("observe", lambda: c.observe("r", 200, remaining=3), lambda r: r is None),
        ] + [x for x in every_call(c) if x[0] not in ("check", "observe")]
    return [
        ("request", lambda: c.request("r", "d", copies=3, min_copies=2),
         lambda d: d.granted == 2 and d.degraded and not d.killed and d.reply == {}),
        ("request settle_later", lambda: c.request("r", "d", copies=3, min_copies=2, settle_later=True),
         lambda d: d.granted == 2 and d.degraded and d.ticket is None),
        ("settle", lambda: c.settle("c-real", 2), lambda st: st == obol.Settlement(0, 0, True)),
        ("check", lambda: c.check("r", "d", copies=2), lambda d: d.granted == 2 and d.degraded),
        ("batch", lambda: c.batch([("r", "d"), ("r", "e", 4, 1)]),
         lambda out: [(x.granted, x.degraded) for x in out] == [(1, True), (1, True)]),
        ("refund", lambda: c.refund("r", "d", 1), lambda n: n == -1),
        ("reserve", lambda: c.reserve("r", "d", copies=3, min_copies=1),
         lambda h: h.granted == 1 and h.degraded and h.id is None and h.transfer() == "degraded:1"),
        ("seize", lambda: c.seize("x-real"), lambda h: h.granted == 0 and h.degraded),
        ("admit", lambda: c.admit("r"), lambda a: a.admitted and a.degraded and a.complete() is None),
        ("complete", lambda: c.complete("t#1"), lambda w: w is None),
        ("pace", lambda: c.pace("r"), lambda w: w == 0),
        ("observe", lambda: c.observe("r", 200, remaining=3), lambda r: r is None),
    ]


class MatrixTest(unittest.TestCase):
    def client(self, sock: str, **kw: Any) -> Client:
        kw.setdefault("timeout", 0.05)
        kw.setdefault("environ", {})
        kw.setdefault("logger", QUIET)
        c = Client(socket=sock, **kw)
        self.addCleanup(c.close)
        return c

    def fake(self, handler: Callable[[socket.socket], None]) -> FakeAgent:
        f = FakeAgent(handler)
        self.addCleanup(f.stop)
        return f

    def matrix(self, sock: str, answers_2xx: bool = False, **kw: Any) -> Client:
        if answers_2xx:
            # Some calls must get the agent's answer: a loaded machine must
            # not turn it into a timeout.
            kw.setdefault("timeout", PATIENCE)
        c = self.client(sock, **kw)
        calls = every_call(c, answers_2xx)
        for name, call, ok in calls:
            with self.subTest(call=name):
                self.assertTrue(ok(call()), name)
        st = c.stats()
        # The batch's two items count twice; with answers_2xx, check and
        # observe are not degraded.
        self.assertEqual(st.degraded, len(calls) + 1 - (2 if answers_2xx else 0))
        self.assertEqual(st.errors, 0)
        # A reset does not fail open: the agent could not be asked, or its
        # reply was not {"reset": true}.
        with self.assertRaises(obol.AgentUnavailable) as e:
            c.reset("r", "d")
        self.assertIn("not made", str(e.exception))
        self.assertEqual(c.stats(), st)
        return c

    def test_missing_socket(self) -> None:
        c = self.matrix(os.path.join(short_dir(), "none.sock"))
        # A settle of no ticket (a degraded, killed or rejected decision's)
        # does nothing, without asking.
        st = c.stats()
        self.assertEqual(c.settle(None, 5), obol.Settlement(0, 0, False))
        self.assertEqual(c.settle("", 5), obol.Settlement())
        self.assertEqual(c.stats(), st)

    def test_refused(self) -> None:
        path = os.path.join(short_dir(), "dead.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)  # bound, never listening: connections are refused
        self.addCleanup(s.close)
        self.matrix(path)

    def test_hang(self) -> None:
        ref: List[FakeAgent] = []
        f = self.fake(hang(ref))
        ref.append(f)
        self.matrix(f.socket, timeout_pause=0)
        self.assertTrue(f.accepted.is_set())

    def test_reset(self) -> None:
        self.matrix(self.fake(reset).socket)

    def test_closed_without_reply(self) -> None:
        self.matrix(self.fake(close_at_once).socket)

    def test_500(self) -> None:
        self.matrix(self.fake(answer(500, b'{"error":{"code":"internal","message":"bug"}}')).socket)

    def test_503(self) -> None:
        self.matrix(self.fake(answer(503, b'{"error":{"code":"not_ready","message":"stopping"}}')).socket)

    def test_502_of_a_proxy(self) -> None:
        self.matrix(self.fake(answer(502, b"<html>bad gateway</html>", "text/html")).socket)

    def test_redirect(self) -> None:
        self.matrix(self.fake(answer(302, b"")).socket)

    def test_garbage(self) -> None:
        self.matrix(self.fake(answer(200, b"\x00\xffnot json at all")).socket, answers_2xx=True)

    def test_wrong_shapes(self) -> None:
        self.matrix(self.fake(answer(200, b'{"granted":"many","window":"x","wait_ms":null,"responses":3}')).socket, answers_2xx=True)

    def test_not_http(self) -> None:
        def h(conn: socket.socket) -> None:
            read_request(conn)
            conn.sendall(b"SSH-2.0-OpenSSH\r\n\r\n")
            conn.close()
        self.matrix(self.fake(h).socket)

    def test_a_4xx_not_in_the_agents_format_is_a_client_error(self) -> None:
        c = self.client(self.fake(answer(404, b"404 page not found", "text/plain")).socket, timeout=PATIENCE)
        with self.assertRaises(obol.APIError) as e:
            c.request("r", "d")
        self.assertEqual((e.exception.status, e.exception.code), (404, ""))
        self.assertEqual(c.stats().errors, 1)

    def test_timeout_pauses_asking(self) -> None:
        ref: List[FakeAgent] = []
        f = self.fake(hang(ref))
        ref.append(f)
        c = self.client(f.socket, timeout_pause=3600)
        self.assertTrue(c.request("r", "d").degraded)
        f.accepted.clear()
        for _ in range(5):
            self.assertTrue(c.request("r", "d").degraded)
        self.assertFalse(f.accepted.is_set())  # not asked during the pause

    def test_kept_alive_connection_closed_by_the_agent_is_retried(self) -> None:
        def once_then_close(conn: socket.socket) -> None:
            if read_request(conn) is None:
                return
            body = b'{"granted":1,"remaining":0,"retry_after_ms":0,"reset_after_ms":1}'
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))
            read_request(conn)  # the next request on this connection: closed unanswered
            conn.close()
        c = self.client(self.fake(once_then_close).socket, timeout=PATIENCE)
        for _ in range(4):
            d = c.request("r", "d")
            self.assertEqual((d.granted, d.degraded), (1, False))

    def test_log_once_a_minute(self) -> None:
        log = ListLog()
        logger = logging.getLogger("obol.test.minute")
        logger.addHandler(log)
        logger.propagate = False
        clock = FakeClock()
        c = self.client(os.path.join(short_dir(), "none.sock"), logger=logger, clock=clock)
        for _ in range(10):
            c.request("r", "d")
        self.assertEqual(len(log.lines), 1)
        self.assertIn("failing open", log.lines[0])
        clock.now += 59
        c.request("r", "d")
        self.assertEqual(len(log.lines), 1)
        clock.now += 1
        c.request("r", "d")
        self.assertEqual(len(log.lines), 2)
        self.assertIn("degraded: 11", log.lines[1])  # the count since the last line
        self.assertEqual(c.stats().degraded, 12)

    def test_kill_switch_log_once_a_minute(self) -> None:
        log = ListLog()
        logger = logging.getLogger("obol.test.killed")
        logger.addHandler(log)
        logger.propagate = False
        body = b'{"granted":0,"remaining":0,"retry_after_ms":500,"reset_after_ms":1}'
        c = self.client(self.fake(answer(200, body)).socket, logger=logger, kill_switch=True, timeout=PATIENCE)
        for _ in range(3):
            d = c.request("r", "d", copies=2, min_copies=1)
            self.assertEqual((d.granted, d.killed, d.degraded), (2, True, False))
        self.assertEqual(len(log.lines), 1)
        self.assertEqual(c.stats().killed, 3)


class MaxWaitTest(unittest.TestCase):
    def rejecting(self, retry_after_ms: int) -> str:
        body = b'{"granted":0,"remaining":0,"retry_after_ms":%d,"reset_after_ms":1}' % retry_after_ms
        f = FakeAgent(answer(200, body))
        self.addCleanup(f.stop)
        return f.socket

    def client(self, sock: str, clock: FakeClock, **kw: Any) -> Client:
        c = Client(socket=sock, timeout=PATIENCE, environ={}, clock=clock, sleep=clock.sleep,
                   rand=random.Random(1), **kw)
        self.addCleanup(c.close)
        return c

    def test_backoff_schedule(self) -> None:
        clock = FakeClock()
        c = self.client(self.rejecting(0), clock)
        d = c.request("r", "d", max_wait=1.0)
        self.assertEqual(d.granted, 0)
        self.assertEqual(d.retries, len(clock.slept))
        self.assertAlmostEqual(sum(clock.slept), 1.0, places=6)  # the last sleep is what is left
        for i, s in enumerate(clock.slept[:-1]):
            base = 0.01 * 2 ** i
            self.assertTrue(base * 0.75 <= s < base * 1.25, (i, s))

    def test_never_before_retry_after(self) -> None:
        clock = FakeClock()
        c = self.client(self.rejecting(300), clock)
        d = c.request("r", "d", max_wait=1.0)
        self.assertGreaterEqual(d.retries, 1)
        self.assertTrue(all(s >= 0.3 for s in clock.slept), clock.slept)

    def test_no_retry_when_none_fits(self) -> None:
        for ra in (-1, 5000):
            clock = FakeClock()
            c = self.client(self.rejecting(ra), clock)
            d = c.request("r", "d", max_wait=1.0)
            self.assertEqual((d.retries, clock.slept), (0, []))

    def test_client_default(self) -> None:
        clock = FakeClock()
        c = self.client(self.rejecting(0), clock, max_wait=0.1)
        self.assertGreater(c.request("r", "d").retries, 0)
        self.assertEqual(c.request("r", "d", max_wait=0).retries, 0)


class ConfigTest(unittest.TestCase):
    def test_kill_switch_env(self) -> None:
        for v, want in (("1", True), ("true", True), ("T", True), ("0", False), ("false", False), ("", False)):
            c = Client(socket="/nonexistent/obol.sock", environ={"OBOL_KILL_SWITCH": v})
            self.assertEqual(c.kill_switch, want, v)
        with self.assertRaises(ValueError) as e:
            Client(socket="/nonexistent/obol.sock", environ={"OBOL_KILL_SWITCH": "yes"})
        self.assertIn("OBOL_KILL_SWITCH", str(e.exception))
        self.assertIn("yes", str(e.exception))

    def test_default_socket(self) -> None:
        self.assertEqual(obol.default_socket({"OBOL_SOCKET": "/a/b.sock"}), "/a/b.sock")
        self.assertEqual(obol.default_socket({"XDG_RUNTIME_DIR": "/run/user/7"}), "/run/user/7/obol.sock")
        rest = obol.default_socket({"XDG_RUNTIME_DIR": "relative"})
        if os.path.isdir("/run/obol"):
            self.assertEqual(rest, "/run/obol/obol.sock")
        else:
            self.assertEqual(rest, "/tmp/obol-%d/obol.sock" % os.getuid())
        with self.assertRaises(ValueError):
            obol.default_socket({"OBOL_SOCKET": "off"})

    def test_bad_config(self) -> None:
        bad = [dict(timeout=0), dict(timeout=-1), dict(timeout=float("inf")), dict(max_wait=-1),
               dict(socket="a", url="http://x"), dict(url="ftp://x"), dict(url="http://x:99999"),
               dict(session_ttl_ms=1), dict(timeout="20ms"), dict(socket="")]
        for kw in bad:
            kw.setdefault("environ", {})
            with self.subTest(kw=kw), self.assertRaises(ValueError):
                Client(**kw)


class WireTest(unittest.TestCase):
    """Replies in the forms HTTP/1.1 allows beside the agent's own (a proxy's)."""

    def grant_with(self, reply: bytes) -> obol.Decision:
        def h(conn: socket.socket) -> None:
            while read_request(conn) is not None:
                conn.sendall(reply)
                if b"close" in reply or b"Content-Length" not in reply and b"chunked" not in reply:
                    conn.close()
                    return
        f = FakeAgent(h)
        self.addCleanup(f.stop)
        c = Client(socket=f.socket, timeout=PATIENCE, environ={}, logger=QUIET)
        self.addCleanup(c.close)
        d = c.request("r", "d")
        self.assertEqual(c.request("r", "d").granted, d.granted)  # a second call, on a new or kept connection
        return d

    body = b'{"granted":1,"remaining":7,"retry_after_ms":0,"reset_after_ms":1}'

    def test_chunked(self) -> None:
        b = self.body
        reply = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n"
                 % (10, b[:10], len(b) - 10, b[10:]))
        d = self.grant_with(reply)
        self.assertEqual((d.granted, d.remaining, d.degraded), (1, 7, False))

    def test_connection_close(self) -> None:
        d = self.grant_with(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
                            % (len(self.body), self.body))
        self.assertEqual((d.remaining, d.degraded), (7, False))

    def test_body_until_close(self) -> None:
        d = self.grant_with(b"HTTP/1.0 200 OK\r\n\r\n" + self.body)
        self.assertEqual((d.remaining, d.degraded), (7, False))

    def test_malformed_heads_degrade(self) -> None:
        for reply in (b"HTTP/1.1 2000 OK\r\n\r\n", b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
                      b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                      b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
                      b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n"):
            with self.subTest(reply=reply[:40]):
                def h(conn: socket.socket, reply: bytes = reply) -> None:
                    read_request(conn)
                    conn.sendall(reply)
                    conn.close()
                f = FakeAgent(h)
                self.addCleanup(f.stop)
                c = Client(socket=f.socket, timeout=PATIENCE, environ={}, logger=QUIET)
                self.addCleanup(c.close)
                self.assertTrue(c.request("r", "d").degraded)
