"""The conformance vectors of the agent's contract, run through the client:
each case's requests go to the agent's simulation (Client.simulate, on
virtual time) and every expected field is compared with the Decision the
client read. The vectors live beside the repository, in
../shared/conformance/vectors.json from its root; without them this test
skips."""

from __future__ import annotations

import json
import os
import unittest

from obol import Client

from .support import PATIENCE, QUIET, Agent

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VECTORS = os.path.join(ROOT, "..", "shared", "conformance", "vectors.json")
# The Decision attributes named as the reply's fields.
ATTRS = ("granted", "remaining", "retry_after_ms", "reset_after_ms")


class ConformanceTest(unittest.TestCase):
    def test_vectors(self) -> None:
        if not os.path.exists(VECTORS):
            self.skipTest("the conformance vectors are not beside the repository "
                          "(../shared/conformance/vectors.json from its root)")
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
