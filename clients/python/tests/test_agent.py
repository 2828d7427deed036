"""The client against a real agent built from this repository."""

from __future__ import annotations

import os
import threading
import time
import unittest

import obol
from obol import Client

from .support import PATIENCE, QUIET, TIMEOUT, Agent

agent: Agent


def setUpModule() -> None:
    global agent
    agent = Agent()


def tearDownModule() -> None:
    agent.stop()


class AgentTest(unittest.TestCase):
    def client(self, **kw) -> Client:
        kw.setdefault("timeout", TIMEOUT)
        kw.setdefault("environ", {})
        kw.setdefault("logger", QUIET)
        c = Client(socket=agent.socket, **kw)
        self.addCleanup(c.close)
        return c

    def domain(self) -> str:
        return self.id().rsplit(".", 1)[-1]


class RateTest(AgentTest):
    def test_request_grants_then_rejects(self) -> None:
        c = self.client()
        d = c.request("t/slow", self.domain())
        self.assertEqual((d.granted, d.degraded, d.killed), (1, False, False))
        self.assertTrue(d)
        d = c.request("t/slow", self.domain())
        self.assertEqual(d.granted, 0)
        self.assertFalse(d)
        self.assertGreater(d.retry_after_ms, 0)
        self.assertEqual(d.reply["granted"], 0)

    def test_tiers_reply_fields(self) -> None:
        d = self.client().request("t/tiers", self.domain(), copies=3)
        self.assertEqual((d.granted, d.remaining, d.reset_after_ms), (3, 52, 1000))
        for k in ("tier", "tier_limit", "tier_hits", "burst", "hard_limit", "limited_by_hard"):
            self.assertIn(k, d.reply)

    def test_min_copies_and_peek(self) -> None:
        c = self.client()
        d = c.request("t/bucket", self.domain(), copies=15)
        d = c.request("t/bucket", self.domain(), copies=10, min_copies=0)
        self.assertEqual(d.granted, 5)
        d = c.request("t/bucket", self.domain(), copies=0)
        self.assertEqual((d.granted, d.killed), (0, False))

    def test_check_ratelimit_fields(self) -> None:
        c = self.client()
        d = c.check("t/tiers", self.domain())
        self.assertEqual(d.granted, 1)
        self.assertEqual(d.policies[0], ("t1", {"q": 5, "w": 1}))
        self.assertTrue(d.ratelimit.startswith('"'), d.ratelimit)
        c.request("t/slow", self.domain())
        d = c.check("t/slow", self.domain())
        self.assertEqual(d.granted, 0)
        self.assertGreater(d.retry_after_ms, 0)
        self.assertTrue(d.ratelimit_policy)
        with self.assertRaises(obol.BadRequest):
            c.check("t/slow", self.domain(), copies=2, max_wait=-1)

    def test_client_errors_are_typed(self) -> None:
        c = self.client()
        with self.assertRaises(obol.UnknownResource) as e:
            c.request("nope/x", "d")
        self.assertEqual((e.exception.status, e.exception.code), (404, "unknown_resource"))
        self.assertIn("nope/x", e.exception.message)
        with self.assertRaises(obol.WrongKind):
            c.request("t/copies", "d")
        with self.assertRaises(obol.CostOverBurst):
            c.request("t/gcra", "d", copies=21)
        with self.assertRaises(obol.WrongKind):
            c.reserve("t/gcra", "d")
        self.assertEqual(c.stats().errors, 4)

    def test_bad_arguments_are_refused_before_asking(self) -> None:
        c = self.client()
        cases = [
            (lambda: c.request("", "d"), "resource"),
            (lambda: c.request("t/gcra", ""), "domain"),
            (lambda: c.request("t/gcra", "d", copies=-1), "copies"),
            (lambda: c.request("t/gcra", "d", copies=True), "copies"),
            (lambda: c.request("t/gcra", "d", copies=2, min_copies=3), "min_copies"),
            (lambda: c.request("t/gcra", "d", max_wait=float("nan")), "max_wait"),
            (lambda: c.request("t/gcra", "d", copies=10 ** 10), "copies"),
            (lambda: c.refund("t/gcra", "d", -2), "copies"),
            (lambda: c.complete("t", "maybe"), "outcome"),
            (lambda: c.observe("t/pacer", 42), "status"),
            (lambda: c.seize("degraded:x"), "transfer"),
            (lambda: c.batch(None), "needs"),  # type: ignore[arg-type]
            (lambda: c.observe("t/pacer", 200, headers=[("RateLimit", "x")]), "headers"),  # type: ignore[arg-type]
            (lambda: c.session(ttl_ms=0), "ttl_ms"),
            (lambda: c.reserve("t/two", "d").transfer(ttl_ms=-1), "ttl_ms"),
        ]
        for call, name in cases:
            with self.assertRaises(obol.BadRequest, msg=name) as e:
                call()
            self.assertIn(name, str(e.exception))
            self.assertEqual(e.exception.status, 0)
        out = c.batch([("t/gcra",), ("t/gcra", "d", -1)])  # an item's error is returned, not raised
        self.assertIsInstance(out[0], obol.BadRequest)
        self.assertIn("batch item 0", str(out[0]))
        self.assertIn("copies", str(out[1]))

    def test_refund(self) -> None:
        c = self.client()
        c.request("t/bucket", self.domain(), copies=5)
        self.assertEqual(c.refund("t/bucket", self.domain(), 2), 17)

    def test_batch(self) -> None:
        c = self.client()
        out = c.batch([("t/gcra", self.domain()), ("t/gcra", self.domain(), 30), ("nope/x", "d"), ("", "d"),
                       {"resource": "t/gcra", "domain": self.domain(), "copies": 2, "min_copies": 1},
                       ("t/gcra", self.domain(), 100, 0)])
        self.assertIsInstance(out[0], obol.Decision)
        self.assertEqual(out[0].granted, 1)
        self.assertIsInstance(out[1], obol.CostOverBurst)
        self.assertEqual(out[1].status, 400)
        self.assertIsInstance(out[2], obol.UnknownResource)
        self.assertIsInstance(out[3], obol.BadRequest)
        self.assertEqual(out[4].granted, 2)
        self.assertIsInstance(out[5], obol.CostOverBurst)

    def test_batch_min_copies_defaults_to_copies(self) -> None:
        c = self.client()
        c.request("t/bucket", self.domain(), copies=15)  # 5 left
        out = c.batch([("t/bucket", self.domain(), 10), {"resource": "t/bucket", "domain": self.domain(), "copies": 10}])
        self.assertEqual([d.granted for d in out], [0, 0])  # all or nothing, as request's default
        self.assertEqual(c.batch([("t/bucket", self.domain(), 10, 1)])[0].granted, 5)

    def test_batch_splits_past_the_agents_limits(self) -> None:
        c = self.client()
        needs = [("open/x", "d%d" % i) for i in range(2500)]
        out = c.batch(needs)
        self.assertEqual(len(out), 2500)
        self.assertTrue(all(isinstance(d, obol.Decision) and d.granted == 1 for d in out))
        long = "d" * 200
        out = c.batch([("open/y", long + str(i)) for i in range(600)])  # over 64 KiB in one call
        self.assertTrue(all(d.granted == 1 for d in out))

    def test_kill_switch_turns_rejections_into_grants(self) -> None:
        c = self.client(environ={"OBOL_KILL_SWITCH": "1"})
        self.assertTrue(c.kill_switch)
        c.request("t/slow", self.domain())
        d = c.request("t/slow", self.domain(), copies=1, max_wait=5)
        self.assertEqual((d.granted, d.killed, d.retry_after_ms, d.retries), (1, True, 0, 0))
        self.assertEqual(d.reply["granted"], 0)
        self.assertEqual(c.request("t/slow", self.domain(), copies=0).killed, False)
        c.set_kill_switch(False)
        self.assertEqual(c.request("t/slow", self.domain()).granted, 0)
        self.assertEqual(c.stats().killed, 1)

    def test_max_wait_retries_until_granted(self) -> None:
        c = self.client()
        c.request("t/gcra", self.domain(), copies=20)
        d = c.request("t/gcra", self.domain(), max_wait=30)
        self.assertEqual(d.granted, 1)
        self.assertGreaterEqual(d.retries, 1)
        self.assertEqual(c.stats().retries, d.retries)

    def test_max_wait_returns_at_once_when_no_retry_fits(self) -> None:
        slept = []
        c = self.client(sleep=slept.append)
        c.request("t/slow", self.domain())
        d = c.request("t/slow", self.domain(), max_wait=1)  # retry_after is about an hour
        self.assertEqual((d.granted, d.retries), (0, 0))
        self.assertEqual(slept, [])

    def test_url(self) -> None:
        c = Client(url="http://" + agent.http, timeout=TIMEOUT, environ={})
        self.addCleanup(c.close)
        self.assertEqual(c.request("t/gcra", self.domain()).granted, 1)

    def test_threads(self) -> None:
        c = self.client()
        errors = []

        def work() -> None:
            try:
                for _ in range(50):
                    if c.request("open/threads", "d").granted != 1:
                        errors.append("not granted")
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
        ts = [threading.Thread(target=work) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(c.stats().calls, 400)

    def test_closed(self) -> None:
        c = self.client()
        c.close()
        with self.assertRaises(obol.ClientClosed):
            c.request("t/gcra", "d")
        c.close()


class SettleAndResetTest(AgentTest):
    def test_settle_later(self) -> None:
        c = self.client()
        d = c.request("t/gcra", self.domain(), copies=15, settle_later=True)
        self.assertEqual((d.granted, d.degraded), (15, False))
        self.assertTrue(d.ticket)
        self.assertEqual(d.reply["ticket"], d.ticket)
        st = c.settle(d.ticket, 4)  # 11 of the estimate given back
        self.assertEqual((st.charged, st.degraded), (-11, False))
        self.assertEqual(st.remaining, c.request("t/gcra", self.domain(), copies=0).remaining)
        with self.assertRaises(obol.AlreadySettled) as e:
            c.settle(d.ticket, 4)
        self.assertEqual((e.exception.status, e.exception.code), (409, "already_settled"))
        with self.assertRaises(obol.UnknownTicket) as e:
            c.settle("c-none", 4)
        self.assertEqual((e.exception.status, e.exception.code), (404, "unknown_ticket"))
        self.assertIsNone(c.request("t/gcra", self.domain(), copies=0).ticket)  # without settle_later

    def test_settle_more_than_the_estimate(self) -> None:
        c = self.client()
        d = c.request("t/bucket", self.domain(), copies=2, settle_later=True)
        st = c.settle(d.ticket, 25)  # past the burst: charged at once, past the limit
        self.assertEqual(st.charged, 23)
        self.assertEqual(c.request("t/bucket", self.domain()).granted, 0)

    def test_no_ticket_without_a_grant(self) -> None:
        c = self.client()
        c.request("t/slow", self.domain())
        d = c.request("t/slow", self.domain(), settle_later=True)
        self.assertEqual((d.granted, d.ticket), (0, None))
        self.assertEqual(c.settle(d.ticket, 3), obol.Settlement())
        k = self.client(kill_switch=True).request("t/slow", self.domain(), settle_later=True)
        self.assertEqual((k.granted, k.killed, k.ticket), (1, True, None))

    def test_bad_arguments(self) -> None:
        c = self.client()
        for call, name in ((lambda: c.settle("c-x", -1), "copies"), (lambda: c.settle("c-x", 10 ** 10), "copies"),
                           (lambda: c.settle(7, 1), "ticket"),  # type: ignore[arg-type]
                           (lambda: c.request("t/gcra", "d", settle_later=1), "settle_later"),  # type: ignore[arg-type]
                           (lambda: c.reset("", "d"), "resource"), (lambda: c.reset("t/one", ""), "domain")):
            with self.assertRaises(obol.BadRequest, msg=name) as e:
                call()
            self.assertIn(name, str(e.exception))
            self.assertEqual(e.exception.status, 0)
        self.assertEqual(c.stats().errors, 6)

    def test_reset(self) -> None:
        c = self.client()
        self.assertEqual(c.request("t/slow", self.domain()).granted, 1)
        self.assertEqual(c.request("t/slow", self.domain()).granted, 0)
        self.assertIsNone(c.reset("t/slow", self.domain()))
        self.assertEqual(c.request("t/slow", self.domain()).granted, 1)
        c.reset("t/slow", self.domain())
        c.reset("t/slow", self.domain())  # again: harmless
        with self.assertRaises(obol.UnknownResource):
            c.reset("nope/x", "d")
        with self.assertRaises(obol.WrongKind):
            c.reset("t/copies", "d")
        c.close()
        with self.assertRaises(obol.ClientClosed):
            c.reset("t/slow", self.domain())
        with self.assertRaises(obol.ClientClosed):
            c.settle("c-x", 1)


class CopiesTest(AgentTest):
    def test_reserve_release(self) -> None:
        c = self.client()
        h = c.reserve("t/two", self.domain(), copies=2)
        self.assertEqual((h.granted, h.held), (2, 2))
        self.assertTrue(h.id)
        self.assertEqual(c.reserve("t/two", self.domain()).granted, 0)
        h.release(1)
        h2 = c.reserve("t/two", self.domain())
        self.assertEqual(h2.granted, 1)
        with self.assertRaises(obol.BadRequest):
            h.release(5)
        h.release()
        h.release()  # idempotent
        with h2:
            pass
        self.assertEqual(c.reserve("t/two", self.domain(), copies=2).granted, 2)
        self.assertEqual(c.stats().sessions, 1)

    def test_session_context_releases_on_exit(self) -> None:
        c = self.client()
        with c.session() as s:
            self.assertEqual(s.reserve("t/two", self.domain(), copies=2).granted, 2)
            self.assertEqual(c.reserve("t/two", self.domain()).granted, 0)
        self.assertEqual(c.reserve("t/two", self.domain(), copies=2).granted, 2)

    def test_transfer_and_seize(self) -> None:
        c, other = self.client(), self.client()
        h = c.reserve("t/copies", self.domain(), copies=3)
        tid = h.transfer(2)
        self.assertEqual(h.held, 1)
        h2 = other.seize(tid)
        self.assertEqual((h2.granted, h2.resource, h2.domain), (2, "t/copies", self.domain()))
        with self.assertRaises(obol.UnknownTransfer):
            other.seize(tid)
        h.release()
        h2.release()
        self.assertEqual(c.reserve("t/copies", self.domain(), copies=5).granted, 5)

    def test_close_ends_the_session(self) -> None:
        c = self.client()
        c.reserve("t/two", self.domain(), copies=2)
        c.close()
        self.assertEqual(self.client().reserve("t/two", self.domain(), copies=2).granted, 2)

    def test_keepalive_keeps_the_session(self) -> None:
        c = self.client(session_ttl_ms=1500)
        done = threading.Event()
        n = [0]
        orig = obol.Session._keepalive

        def counting(s: obol.Session) -> None:
            orig(s)
            n[0] += 1
            if n[0] >= 5:  # 5 renewals, a third of the TTL apart: past the TTL
                done.set()
        obol.Session._keepalive = counting  # type: ignore[assignment]
        self.addCleanup(setattr, obol.Session, "_keepalive", orig)
        c.reserve("t/two", self.domain(), copies=2)
        self.assertTrue(done.wait(60))
        self.assertEqual(self.client().reserve("t/two", self.domain()).granted, 0)

    def test_killed_reserve(self) -> None:
        c = self.client(kill_switch=True)
        c.reserve("t/two", self.domain(), copies=2)
        h = c.reserve("t/two", self.domain(), copies=2)
        self.assertEqual((h.granted, h.killed, h.id), (2, True, None))
        self.assertEqual(h.transfer(1), "killed:1")
        self.assertEqual(c.seize("killed:1").granted, 1)


class AdaptiveAndPacerTest(AgentTest):
    def test_admit_complete(self) -> None:
        c = self.client()
        with c.admit("t/adaptive") as a:
            self.assertTrue(a.admitted)
            self.assertTrue(a.ticket)
            b = c.admit("t/adaptive")
            self.assertTrue(b.admitted)
            self.assertFalse(c.admit("t/adaptive").admitted)
        self.assertIsInstance(b.complete("backoff"), int)
        self.assertIsNone(b.complete())  # once only
        with self.assertRaises(obol.UnknownTicket):
            c.complete(a.ticket)  # type: ignore[arg-type]

    def test_pace_observe(self) -> None:
        c = self.client()
        self.assertGreaterEqual(c.pace("t/pacer"), 0)
        c.observe("t/pacer", 200, remaining=100)
        c.observe("t/pacer", 200, headers={"RateLimit-Remaining": "99"})
        c.observe("t/pacer", 429)
        with self.assertRaises(obol.BadRequest):
            c.observe("t/pacer", 200, remaining=1, headers={"RateLimit-Remaining": "1"})
        with self.assertRaises(obol.WrongKind):
            c.pace("t/gcra")


class SessionRecoveryTest(AgentTest):
    def test_release_while_the_agent_is_gone_is_queued_and_retried(self) -> None:
        c = self.client(session_ttl_ms=3000)
        h = c.reserve("t/two", self.domain(), copies=2)
        away = agent.socket + ".away"
        os.rename(agent.socket, away)  # the agent is gone, as far as new connections go
        try:
            c._t.close_idle()
            h.release()
            self.assertEqual(c.stats().pending_releases, 1)
        finally:
            os.rename(away, agent.socket)
        deadline = time.monotonic() + PATIENCE
        while c.stats().pending_releases:  # the background loop retries it
            self.assertLess(time.monotonic(), deadline, "the queued release was not retried")
            time.sleep(0.01)
        self.assertEqual(self.client().reserve("t/two", self.domain(), copies=2).granted, 2)

    def test_a_lost_session_is_reopened(self) -> None:
        c = self.client()
        h = c.reserve("t/two", self.domain())
        sid = c._default_session().id
        self.client()._t.call("DELETE", "/v1/sessions/" + str(sid))  # the agent forgets it
        h2 = c.reserve("t/two", self.domain())
        self.assertEqual(h2.granted, 1)
        self.assertNotEqual(c._default_session().id, sid)
        h.release()  # its session is gone: nothing to do
        self.assertEqual(c.stats().sessions, 2)


@unittest.skipUnless(hasattr(os, "fork"), "no os.fork here")
class ForkTest(AgentTest):
    def test_a_forked_child_uses_connections_of_its_own(self) -> None:
        c = self.client()
        self.assertEqual(c.request("open/fork", "parent").granted, 1)  # a kept-alive connection
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report its decision through the pipe, then leave at once
            code = 1
            try:
                d = c.request("open/fork", "child")
                h = c.reserve("t/two", self.domain())
                os.write(w, b"%d %d %d %d" % (d.granted, int(d.degraded), h.granted, len(c._t._idle)))
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            got = f.read()
        _, status = os.waitpid(pid, 0)
        self.assertEqual(status, 0)
        self.assertEqual(got, b"1 0 1 1")
        self.assertEqual(c.request("open/fork", "parent").granted, 1)
