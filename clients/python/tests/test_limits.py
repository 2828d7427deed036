"""Limits set by the request (limit=): the Limit values and what the client
refuses before asking; the limit field as sent by request, batch, refund
and reset to a fake agent that records each call; the agent's bad_limit
and too_many errors as exceptions; and the limits against a real agent."""

from __future__ import annotations

import copy
import datetime
import json
import os
import pickle
import socket
import unittest
from typing import Any, Dict, List, Optional, Tuple

import obol
from obol import Client, Limit

from .support import PATIENCE, QUIET, TIMEOUT, Agent, FakeAgent, read_call, short_dir

G = Limit.gcra(2, 1, "1s")
T = Limit.tiers("5,1,1,0,50,5,5,15")


class LimitTest(unittest.TestCase):
    def test_gcra(self) -> None:
        self.assertEqual(G.wire(), {"kind": "gcra", "burst": 2, "count": 1, "period": "1s"})
        self.assertEqual((G.kind, G.burst, G.count, G.period, G.spec), ("gcra", 2, 1, "1s", ""))
        self.assertEqual(repr(G), "Limit.gcra(burst=2, count=1, period='1s')")
        self.assertEqual(Limit.gcra(burst=2, count=1, period="1s"), G)
        self.assertNotEqual(Limit.gcra(2, 1, "2s"), G)
        self.assertEqual(len({G, Limit.gcra(2, 1, "1s"), T}), 2)

    def test_timedelta_period(self) -> None:
        td = datetime.timedelta
        for period, want in ((td(seconds=1.5), "1500ms"), (td(seconds=1), "1s"), (td(minutes=90), "90m"),
                             (td(hours=2), "2h"), (td(days=1), "24h"), (td(microseconds=250), "250us"),
                             (td(seconds=1, microseconds=1), "1000001us"), (td(milliseconds=250), "250ms")):
            with self.subTest(period=period):
                self.assertEqual(Limit.gcra(1, 1, period).period, want)
                self.assertEqual(Limit.gcra(1, 1, period).wire()["period"], want)

    def test_tiers(self) -> None:
        self.assertEqual(T.wire(), {"kind": "tiers", "tiers": "5,1,1,0,50,5,5,15"})
        self.assertEqual((T.kind, T.spec, T.burst, T.period), ("tiers", "5,1,1,0,50,5,5,15", 0, ""))
        self.assertEqual(repr(T), "Limit.tiers('5,1,1,0,50,5,5,15')")
        self.assertNotEqual(T, Limit.tiers("5,1,1,0"))

    def test_a_value(self) -> None:
        with self.assertRaises(AttributeError):
            G.burst = 3  # type: ignore[misc]
        with self.assertRaises(TypeError):
            Limit()
        for v in (G, T):
            self.assertEqual(copy.deepcopy(v), v)
            self.assertEqual(pickle.loads(pickle.dumps(v)), v)
        w = G.wire()
        w["burst"] = 7
        self.assertEqual(G.wire()["burst"], 2)

    def test_local_mistakes(self) -> None:
        td = datetime.timedelta
        cases = [
            (lambda: Limit.gcra(0, 1, "1s"), "limit.burst"),
            (lambda: Limit.gcra(-1, 1, "1s"), "limit.burst"),
            (lambda: Limit.gcra(True, 1, "1s"), "limit.burst"),
            (lambda: Limit.gcra("2", 1, "1s"), "limit.burst"),  # type: ignore[arg-type]
            (lambda: Limit.gcra(2.0, 1, "1s"), "limit.burst"),  # type: ignore[arg-type]
            (lambda: Limit.gcra(2, 0, "1s"), "limit.count"),
            (lambda: Limit.gcra(2, None, "1s"), "limit.count"),  # type: ignore[arg-type]
            (lambda: Limit.gcra(2, 1, 1), "limit.period"),  # type: ignore[arg-type]
            (lambda: Limit.gcra(2, 1, 1.5), "limit.period"),  # type: ignore[arg-type]
            (lambda: Limit.gcra(2, 1, ""), "limit.period"),
            (lambda: Limit.gcra(2, 1, None), "limit.period"),  # type: ignore[arg-type]
            (lambda: Limit.gcra(2, 1, td(0)), "limit.period"),
            (lambda: Limit.gcra(2, 1, td(seconds=-1)), "limit.period"),
            (lambda: Limit.tiers(""), "limit.tiers"),
            (lambda: Limit.tiers(5), "limit.tiers"),  # type: ignore[arg-type]
            (lambda: Limit.tiers(["5,1,1,0"]), "limit.tiers"),  # type: ignore[arg-type]
        ]
        for call, name in cases:
            with self.subTest(name=name), self.assertRaises(obol.BadRequest) as e:
                call()
            self.assertIn(name, str(e.exception))
            self.assertEqual((e.exception.status, e.exception.code), (0, "bad_request"))

    def test_bad_limit_error(self) -> None:
        e = obol.errors.api_error(400, "bad_limit", "limit.burst: must be ≥ 1, got 0")
        self.assertIs(type(e), obol.BadLimit)
        self.assertIsInstance(e, obol.BadRequest)  # a 400 of a malformed call
        self.assertIsInstance(e, obol.APIError)
        self.assertEqual((e.status, e.code, e.message), (400, "bad_limit", "limit.burst: must be ≥ 1, got 0"))


GRANT = {"granted": 1, "remaining": 1, "retry_after_ms": 0, "reset_after_ms": 1000}


class Recorder:
    """A fake agent that records each call (method, path, JSON body) and
    answers as the agent would; error=(status, code, message) answers every
    call with that error instead, item_error every batch item."""

    def __init__(self, test: unittest.TestCase) -> None:
        self.calls: List[Tuple[str, str, Optional[Dict[str, Any]]]] = []
        self.error: Optional[Tuple[int, str, str]] = None
        self.item_error: Optional[Tuple[str, str]] = None
        self.rejections = 0  # requests answered with a rejection before the grants
        self.fake = FakeAgent(self._serve)
        test.addCleanup(self.fake.stop)

    def _serve(self, conn: socket.socket) -> None:
        while True:
            r = read_call(conn)
            if r is None:
                return
            head, body = r
            method, path = head.decode().split(" ")[:2]
            req = json.loads(body) if body else None
            self.calls.append((method, path, req))
            status, reply = self._reply(path, req)
            data = json.dumps(reply).encode()
            conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                         % (status, len(data), data))

    def _reply(self, path: str, req: Any) -> Tuple[int, Any]:
        if self.error is not None:
            status, code, message = self.error
            return status, {"error": {"code": code, "message": message}}
        if path == "/v1/batch":
            if self.item_error is not None:
                code, message = self.item_error
                return 200, {"responses": [{"error": {"code": code, "message": message}} for _ in req["requests"]]}
            return 200, {"responses": [GRANT for _ in req["requests"]]}
        if path == "/v1/refund":
            return 200, {"remaining": 2}
        if path == "/v1/reset":
            return 200, {"reset": True}
        if self.rejections > 0:
            self.rejections -= 1
            return 200, dict(GRANT, granted=0, remaining=0, retry_after_ms=1)
        return 200, GRANT

    def bodies(self, path: str) -> List[Dict[str, Any]]:
        return [b for _, p, b in self.calls if p == path and b is not None]


class WireTest(unittest.TestCase):
    def setUp(self) -> None:
        self.agent = Recorder(self)
        self.c = Client(socket=self.agent.fake.socket, timeout=PATIENCE, environ={}, logger=QUIET)
        self.addCleanup(self.c.close)

    def test_request(self) -> None:
        self.assertEqual(self.c.request("tenants/api", "d", limit=G).granted, 1)
        self.c.request("tenants/api", "d", copies=2, min_copies=1, limit=T, settle_later=True)
        self.c.request("tenants/api", "d")
        self.assertEqual(self.agent.bodies("/v1/request"), [
            {"resource": "tenants/api", "domain": "d", "copies": 1, "min_copies": 1,
             "limit": {"kind": "gcra", "burst": 2, "count": 1, "period": "1s"}},
            {"resource": "tenants/api", "domain": "d", "copies": 2, "min_copies": 1, "settle": True,
             "limit": {"kind": "tiers", "tiers": "5,1,1,0,50,5,5,15"}},
            {"resource": "tenants/api", "domain": "d", "copies": 1, "min_copies": 1},  # no limit: no field
        ])

    def test_request_with_max_wait_sends_the_limit_each_time(self) -> None:
        self.agent.rejections = 2
        d = self.c.request("tenants/api", "d", limit=G, max_wait=PATIENCE)
        self.assertEqual((d.granted, d.retries), (1, 2))
        self.assertEqual([b["limit"] for b in self.agent.bodies("/v1/request")], [G.wire()] * 3)

    def test_batch(self) -> None:
        out = self.c.batch([("tenants/api", "a", 1, None, G),
                            {"resource": "tenants/api", "domain": "b", "copies": 2, "limit": T},
                            ("tenants/api", "c", 3),
                            ("tenants/api", "d", 1, 1, None),
                            ("tenants/api", "e", 1, 1, {"kind": "gcra"}),  # not a Limit: refused here
                            {"resource": "tenants/api", "domain": "f", "limit": "1s"}])
        self.assertEqual([type(x) for x in out], [obol.Decision] * 4 + [obol.BadRequest] * 2)
        for x in out[4:]:
            self.assertEqual(x.status, 0)  # type: ignore[union-attr]
            self.assertIn("limit", str(x))
        [body] = self.agent.bodies("/v1/batch")
        self.assertEqual(body["requests"], [
            {"resource": "tenants/api", "domain": "a", "copies": 1, "min_copies": 1, "limit": G.wire()},
            {"resource": "tenants/api", "domain": "b", "copies": 2, "min_copies": 2, "limit": T.wire()},
            {"resource": "tenants/api", "domain": "c", "copies": 3, "min_copies": 3},
            {"resource": "tenants/api", "domain": "d", "copies": 1, "min_copies": 1},
        ])
        self.assertIn("limit", str(self.c.batch([("r", "d", 1, 1, G, 9)])[0]))  # six: too many

    def test_refund(self) -> None:
        self.assertEqual(self.c.refund("tenants/api", "d", 1, limit=G), 2)
        self.c.refund("tenants/api", "d", 1)
        self.assertEqual(self.agent.bodies("/v1/refund"), [
            {"resource": "tenants/api", "domain": "d", "copies": 1, "limit": G.wire()},
            {"resource": "tenants/api", "domain": "d", "copies": 1},
        ])

    def test_reset(self) -> None:
        self.assertIsNone(self.c.reset("tenants/api", "d", limit=T))
        self.c.reset("tenants/api", "d")
        self.assertEqual(self.agent.bodies("/v1/reset"), [
            {"resource": "tenants/api", "domain": "d", "limit": T.wire()},
            {"resource": "tenants/api", "domain": "d"},
        ])

    def test_not_a_limit_is_refused_before_asking(self) -> None:
        c = self.c
        for v in ({"kind": "gcra", "burst": 2, "count": 1, "period": "1s"}, "1s", 5, Limit, [G]):
            for name, call in (("request", lambda: c.request("tenants/api", "d", limit=v)),
                               ("refund", lambda: c.refund("tenants/api", "d", 1, limit=v)),
                               ("reset", lambda: c.reset("tenants/api", "d", limit=v))):
                with self.subTest(call=name, limit=v), self.assertRaises(obol.BadRequest) as e:
                    call()
                self.assertIn("limit: want an obol.Limit", str(e.exception))
                self.assertEqual(e.exception.status, 0)
        self.assertEqual(self.agent.calls, [])
        self.assertEqual(c.stats().errors, 15)
        with self.assertRaises(TypeError):
            c.check("tenants/api", "d", limit=G)  # type: ignore[call-arg]  # GET /v1/check takes none

    def test_bad_limit(self) -> None:
        self.agent.error = (400, "bad_limit", "limit.burst: must be ≥ 1, got 0")
        for name, call in (("request", lambda: self.c.request("tenants/api", "d", limit=G)),
                           ("refund", lambda: self.c.refund("tenants/api", "d", 1, limit=G)),
                           ("reset", lambda: self.c.reset("tenants/api", "d", limit=G))):
            with self.subTest(call=name), self.assertRaises(obol.BadLimit) as e:
                call()
            self.assertEqual((e.exception.status, e.exception.code), (400, "bad_limit"))
            self.assertEqual(e.exception.message, "limit.burst: must be ≥ 1, got 0")
            self.assertIn("limit.burst", str(e.exception))
        self.agent.error = (429, "too_many", 'namespace "tenants": 1000 limits set by requests, the most allowed')
        with self.assertRaises(obol.TooMany) as e2:
            self.c.request("tenants/api", "d", limit=G)
        self.assertEqual(e2.exception.status, 429)

    def test_bad_limit_of_a_batch_item(self) -> None:
        self.agent.item_error = ("bad_limit", "limit.period: must be positive")
        [x] = self.c.batch([("tenants/api", "d", 1, 1, G)])
        self.assertIsInstance(x, obol.BadLimit)
        self.assertEqual((x.status, x.code, x.message), (400, "bad_limit", "limit.period: must be positive"))  # type: ignore[union-attr]
        self.agent.item_error = ("too_many", "keys")
        [x] = self.c.batch([("tenants/api", "d", 1, 1, G)])
        self.assertIsInstance(x, obol.TooMany)
        self.assertEqual(x.status, 429)  # type: ignore[union-attr]


class FailOpenTest(unittest.TestCase):
    def test_a_limit_fails_open_as_any_call(self) -> None:
        c = Client(socket=os.path.join(short_dir(), "none.sock"), timeout=0.05, environ={}, logger=QUIET)
        self.addCleanup(c.close)
        d = c.request("tenants/api", "d", copies=3, min_copies=2, limit=G)
        self.assertEqual((d.granted, d.degraded), (2, True))
        self.assertEqual([(x.granted, x.degraded) for x in c.batch([("tenants/api", "d", 1, 1, T)])], [(1, True)])
        self.assertEqual(c.refund("tenants/api", "d", 1, limit=G), -1)
        with self.assertRaises(obol.AgentUnavailable):
            c.reset("tenants/api", "d", limit=G)


# A namespace that allows limits set by requests, one that allows a single
# one, one that allows none, and a resource of the first that the config
# defines.
LIMITS_CONFIG = """
namespaces:
  tenants: {request_limits: true}
  small: {request_limits: true, max_request_limits: 1}
  open: {allow_unconfigured: true}
resources:
  tenants/configured: {kind: gcra, burst: 1, count: 1, period: 1h}
"""


class AgentTest(unittest.TestCase):
    """Against a real agent (hour-long periods: no refill between calls,
    however slow the machine)."""

    agent: Agent

    @classmethod
    def setUpClass(cls) -> None:
        cls.agent = Agent(LIMITS_CONFIG)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.agent.stop()

    def setUp(self) -> None:
        self.c = Client(socket=self.agent.socket, timeout=TIMEOUT, environ={}, logger=QUIET)
        self.addCleanup(self.c.close)
        self.d = self.id().rsplit(".", 1)[-1]

    def granted(self, resource: str, limit: Optional[Limit], copies: int = 1) -> int:
        d = self.c.request(resource, self.d, copies=copies, limit=limit)
        self.assertFalse(d.degraded)
        return d.granted

    def test_gcra_grants_its_burst_then_rejects(self) -> None:
        lim = Limit.gcra(2, 1, "1h")
        self.assertEqual([self.granted("tenants/api", lim) for _ in range(3)], [1, 1, 0])
        d = self.c.request("tenants/api", self.d, limit=lim)
        self.assertEqual(d.granted, 0)
        self.assertGreater(d.retry_after_ms, 0)

    def test_two_limits_count_apart(self) -> None:
        one, two = Limit.gcra(1, 1, "1h"), Limit.gcra(2, 1, "1h")
        self.assertEqual([self.granted("tenants/api", one) for _ in range(2)], [1, 0])
        self.assertEqual([self.granted("tenants/api", two) for _ in range(3)], [1, 1, 0])
        # the same limit written otherwise shares the counts
        self.assertEqual(self.granted("tenants/api", Limit.gcra(1, 1, datetime.timedelta(hours=1))), 0)
        self.assertEqual(self.granted("tenants/api", Limit.gcra(2, 1, "60m")), 0)

    def test_tiers(self) -> None:
        lim = Limit.tiers("2,3600,1,0")
        self.assertEqual([self.granted("tenants/api", lim) for _ in range(3)], [1, 1, 0])

    def test_refund_reset_and_batch_reach_the_same_key(self) -> None:
        lim = Limit.gcra(3, 1, "1h")
        self.assertEqual(self.granted("tenants/api", lim, copies=3), 3)
        self.assertEqual(self.c.refund("tenants/api", self.d, 2, limit=lim), 2)
        out = self.c.batch([("tenants/api", self.d, 2, None, lim), {"resource": "tenants/api", "domain": self.d,
                                                                    "limit": lim}])
        self.assertEqual([x.granted for x in out], [2, 0])  # type: ignore[union-attr]
        self.c.reset("tenants/api", self.d, limit=lim)
        self.assertEqual(self.granted("tenants/api", lim, copies=3), 3)

    def test_settle_later(self) -> None:
        lim = Limit.gcra(10, 1, "1h")
        d = self.c.request("tenants/api", self.d, copies=5, limit=lim, settle_later=True)
        self.assertTrue(d.ticket)
        self.assertEqual(self.c.settle(d.ticket, 2).charged, -3)
        self.assertEqual(self.c.request("tenants/api", self.d, copies=0, limit=lim).remaining, 8)

    def test_a_configured_resource_keeps_its_config(self) -> None:
        lim = Limit.gcra(5, 5, "1s")
        self.assertEqual([self.granted("tenants/configured", lim) for _ in range(2)], [1, 0])

    def test_bad_limit(self) -> None:
        for lim, field in ((Limit.gcra(1, 1, "0s"), "limit.period"), (Limit.gcra(1, 1, "soon"), "limit.period"),
                           (Limit.tiers("5,x"), "limit.tiers")):
            with self.subTest(limit=lim):
                with self.assertRaises(obol.BadLimit) as e:
                    self.c.request("tenants/api", self.d, limit=lim)
                self.assertEqual((e.exception.status, e.exception.code), (400, "bad_limit"))
                self.assertIn(field, e.exception.message)
                [x] = self.c.batch([("tenants/api", self.d, 1, None, lim)])
                self.assertIsInstance(x, obol.BadLimit)
                self.assertIn(field, str(x))
        with self.assertRaises(obol.BadLimit):
            self.c.refund("tenants/api", self.d, 1, limit=Limit.gcra(1, 1, "0s"))
        with self.assertRaises(obol.BadLimit):
            self.c.reset("tenants/api", self.d, limit=Limit.gcra(1, 1, "0s"))
        # The config wins: a limit sent for a configured resource is not even read.
        d = self.c.request("tenants/configured", "another-" + self.d, limit=Limit.gcra(1, 1, "0s"))
        self.assertEqual(d.granted, 1)

    def test_a_full_namespace_raises_too_many(self) -> None:
        self.assertEqual(self.granted("small/api", Limit.gcra(5, 1, "1h")), 1)
        with self.assertRaises(obol.TooMany) as e:
            self.c.request("small/api", self.d, limit=Limit.gcra(6, 1, "1h"))
        self.assertEqual((e.exception.status, e.exception.code), (429, "too_many"))
        self.assertIn("small", e.exception.message)

    def test_a_namespace_without_request_limits_refuses(self) -> None:
        for resource in ("open/api", "other/api"):
            with self.subTest(resource=resource), self.assertRaises(obol.BadLimit) as e:
                self.c.request(resource, self.d, limit=G)
            self.assertIn("limit", e.exception.message)
            self.assertIn("does not allow limits set by requests", e.exception.message)
        with self.assertRaises(obol.UnknownResource):  # no limit: as before
            self.c.request("tenants/api", self.d)
