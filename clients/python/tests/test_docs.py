"""The examples of docs/client-python.md and of the README's Python
section, run against a real agent: every block fenced as python, in order, each in a namespace of its own, with
OBOL_SOCKET naming the agent's socket (blocks fenced as py are shown only)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import unittest
from unittest import mock

import obol

from .support import TIMEOUT, Agent

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "client-python.md")
README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")


def blocks() -> "list[str]":
    out = []
    for path in (DOC, README):
        with open(path) as f:
            out += re.findall(r"^```python\n(.*?)^```$", f.read(), re.S | re.M)
    return out


class DocsTest(unittest.TestCase):
    def test_examples(self) -> None:
        bs = blocks()
        self.assertGreaterEqual(len(bs), 5)
        agent = Agent()
        self.addCleanup(agent.stop)
        env = {"OBOL_SOCKET": agent.socket, "OBOL_KILL_SWITCH": ""}
        for i, code in enumerate(bs):
            with self.subTest(block=i, first_line=code.splitlines()[0]):
                out = io.StringIO()
                ns: dict = {"__name__": "docs_example_%d" % i}
                # The examples use the production timeout (20 ms), which a
                # loaded machine can miss: the test gives Client() its own.
                defaults = obol.Client.__init__.__defaults__
                assert defaults is not None and defaults[2] == obol.DEFAULT_TIMEOUT
                patched = defaults[:2] + (TIMEOUT,) + defaults[3:]
                with mock.patch.dict(os.environ, env), contextlib.redirect_stdout(out), \
                        mock.patch.object(obol.Client.__init__, "__defaults__", patched):
                    exec(compile(code, "%s block %d" % (DOC, i), "exec"), ns)
                client = ns.get("client")
                if client is not None:
                    self.assertEqual(client.stats().degraded, 0, out.getvalue())
                    client.close()
