"""What the tests share: a real agent built from this repository (its binary
named by OBOL_AGENT_BIN), and a fake agent that misbehaves on purpose."""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
from typing import Callable, List, Optional, Tuple

AGENT_CONFIG = """
namespaces:
  open: {allow_unconfigured: true}
resources:
  t/tiers: {kind: tiers, tiers: "5,1,1,0,50,5,5,15", hard_limit: 100}
  t/gcra: {kind: gcra, burst: 20, count: 20, period: 1s}
  t/one: {kind: gcra, burst: 1, count: 1, period: 1s}
  t/slow: {kind: gcra, burst: 1, count: 1, period: 1h}
  t/bucket: {kind: gcra, burst: 20, count: 20, period: 1h}
  t/none: {kind: tiers, tiers: []}
  t/copies:
    kind: copies
    domain_limit: 5
    global_limit: 100
  t/two: {kind: copies, domain_limit: 2}
  t/adaptive: {kind: adaptive, min_window: 1, max_window: 2}
  t/pacer: {kind: pacer, quota: 3600, period: 1h}
  # the resources of the examples in docs/client-python.md
  api/search: {kind: tiers, tiers: "5,1,1,0,50,5,5,15"}
  api/export: {kind: gcra, burst: 10, count: 10, period: 1m}
  jobs/sandbox: {kind: copies, domain_limit: 5}
  auth/login: {kind: adaptive, min_window: 5, max_window: 250}
  github/api: {kind: pacer, quota: 5000, period: 1h}
"""

# How long the tests wait for something that takes microseconds when the
# machine is idle: generous, for a loaded CI machine. Tests wait on events;
# this only bounds a wait that would otherwise hang.
PATIENCE = 30.0
# The client timeout of tests against the real agent (the default, 20 ms,
# is for production; a loaded machine can take longer to answer).
TIMEOUT = 5.0


def short_dir() -> str:
    """A temp dir whose socket paths fit the 108-byte limit."""
    return tempfile.mkdtemp(prefix="obolpy")


class Agent:
    """A real agent on a Unix socket in a temp dir, until stop()."""

    def __init__(self, config: str = AGENT_CONFIG) -> None:
        binary = os.environ.get("OBOL_AGENT_BIN", "")
        if not binary or not os.access(binary, os.X_OK):
            raise unittest.SkipTest("OBOL_AGENT_BIN does not name the agent's binary "
                                    "(go build -o agent ./cmd/agent, then OBOL_AGENT_BIN=$PWD/agent); "
                                    "go test ./clients/clienttest does both")
        self.dir = short_dir()
        self.socket = os.path.join(self.dir, "a.sock")
        cfg = os.path.join(self.dir, "obol.yaml")
        with open(cfg, "w") as f:
            f.write(config)
        self.log = os.path.join(self.dir, "agent.log")
        self._logf = open(self.log, "wb")
        self.proc = subprocess.Popen([binary, "--config", cfg, "--socket", self.socket, "--http", "127.0.0.1:0"],
                                     stdout=self._logf, stderr=subprocess.STDOUT)
        # The agent logs "obol agent started" once its listeners are up: wait
        # for that line (or the process's end).
        deadline = time.monotonic() + PATIENCE
        while True:
            with open(self.log, "rb") as f:
                text = f.read()
            if b"obol agent started" in text and os.path.exists(self.socket):
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the agent did not start; its log:\n" + text.decode(errors="replace"))
            time.sleep(0.01)
        line = [ln for ln in text.decode().splitlines() if "obol agent started" in ln][0]
        self.http = str(json.loads(line).get("http", ""))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(PATIENCE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._logf.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class FakeAgent:
    """A Unix socket that answers each connection with handler(conn), one
    thread per connection. accepted counts connections, set when one comes."""

    def __init__(self, handler: Callable[[socket.socket], None]) -> None:
        self.dir = short_dir()
        self.socket = os.path.join(self.dir, "f.sock")
        self._srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._srv.bind(self.socket)
        self._srv.listen(64)
        self._handler = handler
        self._conns: List[socket.socket] = []
        self._lock = threading.Lock()
        self.accepted = threading.Event()
        self.release = threading.Event()  # hangs end when set
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._srv.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            self.accepted.set()
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            self._handler(conn)
        except OSError:
            pass

    def stop(self) -> None:
        self.release.set()
        self._srv.close()
        with self._lock:
            for c in self._conns:
                try:
                    c.close()
                except OSError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)


def read_request(conn: socket.socket) -> Optional[bytes]:
    """Reads one HTTP request (head and Content-Length body); None at EOF."""
    r = read_call(conn)
    return None if r is None else r[0]


def read_call(conn: socket.socket) -> Optional[Tuple[bytes, bytes]]:
    """Reads one HTTP request: its head and its Content-Length body; None at EOF."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            n = int(v.strip())
    while len(body) < n:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head, body


def answer(status: int, body: bytes, ctype: str = "application/json") -> Callable[[socket.socket], None]:
    """A handler answering every request on a connection with status and body."""
    def h(conn: socket.socket) -> None:
        while read_request(conn) is not None:
            conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
                         % (status, ctype.encode(), len(body), body))
    return h


# The logger of clients whose log lines the tests do not read.
QUIET = logging.getLogger("obol.test.quiet")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False
