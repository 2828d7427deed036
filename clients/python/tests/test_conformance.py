"""The conformance vectors of the agent's contract, run through the client:
each case's requests go to the agent's simulation (Client.simulate, on
virtual time) and every expected field is compared with the Decision the
client read. The suite gets the vectors' file in OBOL_CONFORMANCE_VECTORS
(go test ./clients/... sets it when the vectors are present); without it
this test skips, saying so."""

from __future__ import annotations

import json
import os
import unittest

from obol import Client

from .support import PATIENCE, QUIET, Agent

VECTORS = os.environ.get("OBOL_CONFORMANCE_VECTORS", "")
# The Decision attributes named as the reply's fields.
ATTRS = ("granted", "remaining", "retry_after_ms", "reset_after_ms")


class ConformanceTest(unittest.TestCase):
    def test_vectors(self) -> None:
        if not VECTORS or not os.path.exists(VECTORS):
            self.skipTest("no conformance vectors: OBOL_CONFORMANCE_VECTORS names no file "
                          "(go test ./clients/... sets it when the vectors are present)")
        with open(VECTORS) as f:
            cases = json.load(f)["cases"]
        agent = Agent()
        self.addCleanup(agent.stop)
        c = Client(socket=agent.socket, environ={}, logger=QUIET)
        self.addCleanup(c.close)
        self.assertGreater(len(cases), 0)
        for case in cases:
            with self.subTest(case=case["name"]):
                got = c.simulate(case["resource"], case["requests"], timeout=PATIENCE)
                self.assertEqual(len(got), len(case["expect"]))
                for i, (want, d) in enumerate(zip(case["expect"], got)):
                    diff = {k: (v, d.reply.get(k)) for k, v in want.items() if d.reply.get(k) != v}
                    diff.update({k: (want[k], getattr(d, k)) for k in ATTRS if k in want and getattr(d, k) != want[k]})
                    if "shadow" in want and d.shadow != want["shadow"]:
                        diff["shadow attr"] = (want["shadow"], d.shadow)
                    self.assertEqual(diff, {}, "request %d: %s (want, got)" % (i, json.dumps(case["requests"][i])))
