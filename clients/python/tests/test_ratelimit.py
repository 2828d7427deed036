"""Reading the IETF RateLimit fields."""

from __future__ import annotations

import unittest

from obol import Decision, parse_ratelimit


class RateLimitTest(unittest.TestCase):
    def test_lists(self) -> None:
        self.assertEqual(parse_ratelimit('"t1";q=5;w=1, "t2";q=50;w=5'),
                         [("t1", {"q": 5, "w": 1}), ("t2", {"q": 50, "w": 5})])
        self.assertEqual(parse_ratelimit('"gcra";r=0;t=2'), [("gcra", {"r": 0, "t": 2})])
        self.assertEqual(parse_ratelimit('tok;pk="a\\"b";x=tk'), [("tok", {"pk": 'a"b', "x": "tk"})])
        self.assertEqual(parse_ratelimit(""), [])

    def test_malformed_is_ignored(self) -> None:
        for v in ('"t1";q=1.5', '"t1";Q=1', '"t1" "t2"', '"open', '"t1";q=1234567890123456', '1x;q=1', '"t1";=1',
                  '"t1",,', '"t1";q'):
            with self.subTest(v=v):
                self.assertEqual(parse_ratelimit(v), [])

    def test_decision_fields(self) -> None:
        d = Decision(ratelimit='"t2";r=45;t=20', ratelimit_policy='"t1";q=5;w=1')
        self.assertEqual(d.ratelimit_window_ms, 20000)
        self.assertEqual(d.policies, [("t1", {"q": 5, "w": 1})])
        self.assertEqual(Decision(ratelimit='"t";r=1').ratelimit_window_ms, 0)
