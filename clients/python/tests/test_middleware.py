"""The WSGI middleware driven by wsgiref, the ASGI middleware by a minimal
ASGI harness, both against a real agent (and a missing one)."""

from __future__ import annotations

import asyncio
import http.client
import os
import threading
import unittest
from typing import Any, Dict, List, Optional
from wsgiref.simple_server import WSGIRequestHandler, make_server
from wsgiref.util import setup_testing_defaults
from wsgiref.validate import validator

from obol import ASGIMiddleware, Client, WSGIMiddleware

from .support import PATIENCE, QUIET, TIMEOUT, Agent, short_dir

agent: Agent


def setUpModule() -> None:
    global agent
    agent = Agent()


def tearDownModule() -> None:
    agent.stop()


def hello(environ: Dict[str, Any], start_response: Any) -> List[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"hello"]


def by_user(environ: Dict[str, Any]) -> Optional[str]:
    return environ.get("HTTP_X_USER")


class Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class WSGITest(unittest.TestCase):
    def client(self, sock: Optional[str] = None) -> Client:
        c = Client(socket=sock or agent.socket, timeout=TIMEOUT, environ={},
                   logger=QUIET)
        self.addCleanup(c.close)
        return c

    def call(self, app: Any, user: Optional[str]) -> Any:
        env: Dict[str, Any] = {}
        env["QUERY_STRING"] = ""
        setup_testing_defaults(env)
        if user:
            env["HTTP_X_USER"] = user
        got: Dict[str, Any] = {}

        def start_response(status: str, headers: List[Any], exc_info: Any = None) -> Any:
            got["status"], got["headers"] = status, dict(headers)
            return lambda b: None
        it = validator(app)(env, start_response)
        got["body"] = b"".join(it)
        if hasattr(it, "close"):
            it.close()
        return got

    def test_grant_then_429(self) -> None:
        app = WSGIMiddleware(hello, self.client(), "t/slow", by_user)
        r = self.call(app, "wsgi-a")
        self.assertEqual((r["status"], r["body"]), ("200 OK", b"hello"))
        self.assertIn("RateLimit-Policy", r["headers"])
        self.assertIn("RateLimit", r["headers"])
        r = self.call(app, "wsgi-a")
        self.assertEqual(r["status"], "429 Too Many Requests")
        self.assertEqual(r["body"], b"429 too many requests\n")
        self.assertTrue(3000 < int(r["headers"]["Retry-After"]) <= 3600, r["headers"])  # t/slow: 1 an hour
        self.assertIn("RateLimit", r["headers"])

    def test_no_domain_passes_unasked(self) -> None:
        c = self.client()
        app = WSGIMiddleware(hello, c, "t/slow", by_user)
        for _ in range(3):
            self.assertEqual(self.call(app, None)["status"], "200 OK")
        self.assertEqual(c.stats().calls, 0)

    def test_degraded_and_client_errors_pass(self) -> None:
        missing = self.client(os.path.join(short_dir(), "none.sock"))
        app = WSGIMiddleware(hello, missing, "t/slow", by_user)
        for _ in range(3):
            self.assertEqual(self.call(app, "wsgi-b")["status"], "200 OK")
        self.assertEqual(missing.stats().degraded, 3)
        app = WSGIMiddleware(hello, self.client(), "nope/x", by_user)
        self.assertEqual(self.call(app, "wsgi-b")["status"], "200 OK")

    def test_over_http_with_wsgiref_server(self) -> None:
        app = WSGIMiddleware(hello, self.client(), lambda env: "t/slow", by_user)
        srv = make_server("127.0.0.1", 0, app, handler_class=Quiet)
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        statuses = []
        for _ in range(2):
            conn = http.client.HTTPConnection("127.0.0.1", srv.server_port, timeout=PATIENCE)
            conn.request("GET", "/", headers={"X-User": "wsgi-c"})
            r = conn.getresponse()
            r.read()
            statuses.append((r.status, r.getheader("Retry-After")))
            conn.close()
        self.assertEqual([s for s, _ in statuses], [200, 429])
        self.assertIsNone(statuses[0][1])
        self.assertTrue(3000 < int(statuses[1][1] or 0) <= 3600, statuses)


async def asgi_hello(scope: Dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


def asgi_user(scope: Dict[str, Any]) -> Optional[str]:
    for k, v in scope.get("headers", []):
        if k == b"x-user":
            return v.decode()
    return None


def asgi_call(app: Any, user: Optional[str], kind: str = "http") -> Dict[str, Any]:
    """A minimal ASGI server: one request, its messages collected."""
    scope = {"type": kind, "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "path": "/",
             "raw_path": b"/", "query_string": b"", "headers": [(b"x-user", user.encode())] if user else [],
             "client": ("127.0.0.1", 1234), "server": ("127.0.0.1", 80)}
    sent: List[Dict[str, Any]] = []

    async def receive() -> Dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(msg: Dict[str, Any]) -> None:
        sent.append(msg)

    asyncio.run(app(scope, receive, send))
    start = sent[0] if sent else {}
    return {"status": start.get("status"), "headers": dict(start.get("headers", [])),
            "body": b"".join(m.get("body", b"") for m in sent[1:])}


class ASGITest(unittest.TestCase):
    def client(self, sock: Optional[str] = None) -> Client:
        c = Client(socket=sock or agent.socket, timeout=TIMEOUT, environ={},
                   logger=QUIET)
        self.addCleanup(c.close)
        return c

    def test_grant_then_429(self) -> None:
        app = ASGIMiddleware(asgi_hello, self.client(), "t/slow", asgi_user)
        r = asgi_call(app, "asgi-a")
        self.assertEqual((r["status"], r["body"]), (200, b"hello"))
        self.assertIn(b"ratelimit-policy", r["headers"])
        r = asgi_call(app, "asgi-a")
        self.assertEqual((r["status"], r["body"]), (429, b"429 too many requests\n"))
        self.assertTrue(3000 < int(r["headers"][b"retry-after"]) <= 3600, r["headers"])
        self.assertIn(b"ratelimit", r["headers"])

    def test_passes(self) -> None:
        c = self.client()
        app = ASGIMiddleware(asgi_hello, c, "t/slow", asgi_user)
        self.assertEqual(asgi_call(app, None)["status"], 200)
        self.assertEqual(c.stats().calls, 0)
        missing = self.client(os.path.join(short_dir(), "none.sock"))
        app = ASGIMiddleware(asgi_hello, missing, "t/slow", asgi_user)
        for _ in range(2):
            self.assertEqual(asgi_call(app, "asgi-b")["status"], 200)
        self.assertEqual(missing.stats().degraded, 2)
        app = ASGIMiddleware(asgi_hello, self.client(), "nope/x", asgi_user)
        self.assertEqual(asgi_call(app, "asgi-b")["status"], 200)

    def test_lifespan_and_websocket_scopes_pass(self) -> None:
        seen = []

        async def app(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            seen.append(scope["type"])
        asgi_call(ASGIMiddleware(app, self.client(), "t/slow", asgi_user), "x", kind="lifespan")
        self.assertEqual(seen, ["lifespan"])

    def test_bad_arguments(self) -> None:
        with self.assertRaises(TypeError):
            ASGIMiddleware(asgi_hello, "not a client", "t/slow", asgi_user)  # type: ignore[arg-type]
        with self.assertRaises(TypeError):
            WSGIMiddleware(hello, self.client(), "", by_user)
        with self.assertRaises(TypeError):
            WSGIMiddleware(hello, self.client(), "t/slow", "user")  # type: ignore[arg-type]


class ASGIHungAgentTest(unittest.TestCase):
    def test_a_hung_agent_does_not_block_the_event_loop(self) -> None:
        from .support import FakeAgent, read_request

        def hang(conn: Any) -> None:
            read_request(conn)
            f.release.wait(PATIENCE)
        f = FakeAgent(hang)
        self.addCleanup(f.stop)
        c = Client(socket=f.socket, timeout=2, environ={}, logger=QUIET)
        self.addCleanup(c.close)
        app = ASGIMiddleware(asgi_hello, c, "t/slow", asgi_user)
        scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"x-user", b"u")]}
        sent: List[Dict[str, Any]] = []

        async def receive() -> Dict[str, Any]:
            return {"type": "http.request", "body": b""}

        async def send(msg: Dict[str, Any]) -> None:
            sent.append(msg)

        async def main() -> bool:
            call = asyncio.ensure_future(app(scope, receive, send))
            await asyncio.sleep(0)  # the loop runs other tasks while the call waits for the agent
            await asyncio.sleep(0)
            waiting = not call.done()
            await call
            return waiting
        self.assertTrue(asyncio.run(main()))
        self.assertEqual(sent[0]["status"], 200)  # degraded: passed
        self.assertEqual(c.stats().degraded, 1)
