#!/usr/bin/env python3
"""Measures the Python client (run from the repository root or anywhere):

    python3 clients/python/bench.py [--agent PATH] [--n 20000] [--threads 4]

* decisions per second from one process (one thread, then --threads threads
  sharing one Client), against a real agent on a Unix socket;
* the client's time per decision against a bare http.client call over the
  same socket (what a hand-written call does: a kept-alive connection, the
  same JSON body encoded per call, json.loads of the reply): the ratio
  client / bare (target: at most 1.2);
* the time a degraded grant takes with the socket missing (target: under
  2 ms) and with an agent that accepts and never answers, at the default
  20 ms timeout (target: within timeout + 1 ms).

Without --agent it builds the agent with `go build ./cmd/agent`. Figures are
printed as a table; the exit status is 0 whatever they are (targets are
reported, not enforced).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from obol import Client  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CONFIG = """
resources:
  bench/gcra: {kind: gcra, burst: 1000000000, count: 1000000000, period: 1s}
"""


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=5)
        self.path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


def start_agent(binary: str, d: str) -> "tuple[subprocess.Popen, str]":
    sock = os.path.join(d, "a.sock")
    cfg = os.path.join(d, "bench.yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG)
    log = open(os.path.join(d, "agent.log"), "wb")
    p = subprocess.Popen([binary, "--config", cfg, "--socket", sock, "--http", "127.0.0.1:0"],
                         stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not os.path.exists(sock):
        if p.poll() is not None or time.monotonic() > deadline:
            sys.exit("the agent did not start; see " + log.name)
        time.sleep(0.01)
    # one call through, so that the agent is ready
    c = Client(socket=sock, timeout=5)
    while c.request("bench/gcra", "warm").degraded:
        if time.monotonic() > deadline:
            sys.exit("the agent does not answer")
        time.sleep(0.01)
    c.close()
    return p, sock


def per_call(fn, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def bare(sock: str):
    conn = UnixHTTPConnection(sock)
    headers = {"Content-Type": "application/json"}

    def call() -> None:
        body = json.dumps({"resource": "bench/gcra", "domain": "d", "copies": 1, "min_copies": 1}).encode()
        conn.request("POST", "/v1/request", body=body, headers=headers)
        r = conn.getresponse()
        json.loads(r.read())
    return call


def quantiles(xs: "list[float]") -> str:
    xs = sorted(xs)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))] * 1000  # noqa: E731
    return "p50 %.3f ms, p99 %.3f ms, max %.3f ms" % (q(0.5), q(0.99), xs[-1] * 1000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", help="the agent's binary (default: go build ./cmd/agent)")
    ap.add_argument("--n", type=int, default=20000, help="calls per measurement (default 20000)")
    ap.add_argument("--threads", type=int, default=4, help="threads of the concurrent run (default 4)")
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds of client and bare calls (default 5)")
    a = ap.parse_args()
    if a.n < 100 or a.threads < 1 or a.rounds < 1:
        sys.exit("--n must be at least 100, --threads and --rounds at least 1")
    d = tempfile.mkdtemp(prefix="obolbench")
    try:
        binary = a.agent
        if not binary:
            binary = os.path.join(d, "agent")
            subprocess.run(["go", "build", "-o", binary, "./cmd/agent"], cwd=ROOT, check=True)
        agent, sock = start_agent(binary, d)
        try:
            run(a, sock, d)
        finally:
            agent.terminate()
            agent.wait(10)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run(a: argparse.Namespace, sock: str, d: str) -> None:
    print("python %s, %d calls per measurement" % (sys.version.split()[0], a.n))
    c = Client(socket=sock, timeout=1)
    call_client = lambda: c.request("bench/gcra", "d")  # noqa: E731
    call_bare = bare(sock)
    per_call(call_client, 1000)
    per_call(call_bare, 1000)
    tc, tb = [], []
    for _ in range(a.rounds):  # alternated, so that a burst of other load hits both
        tc.append(per_call(call_client, a.n))
        tb.append(per_call(call_bare, a.n))
    mc, mb = statistics.median(tc), statistics.median(tb)
    print("client request        %8.1f µs/decision  %8.0f decisions/s (median of %d rounds)" % (mc * 1e6, 1 / mc, a.rounds))
    print("bare http.client      %8.1f µs/call      %8.0f calls/s" % (mb * 1e6, 1 / mb))
    print("client / bare         %8.2fx  (target ≤ 1.2x); per round: %s" % (
        mc / mb, ", ".join("%.2f" % (x / y) for x, y in zip(tc, tb))))
    print("client check          %8.1f µs/decision" % (per_call(lambda: c.check("bench/gcra", "d"), a.n) * 1e6))

    n_each = a.n // a.threads
    start = threading.Barrier(a.threads + 1)

    def worker() -> None:
        start.wait()
        for _ in range(n_each):
            c.request("bench/gcra", "d")
    ts = [threading.Thread(target=worker) for _ in range(a.threads)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    el = time.perf_counter() - t0
    print("%d threads, one Client %8.0f decisions/s" % (a.threads, n_each * a.threads / el))
    c.close()

    missing = Client(socket=os.path.join(d, "missing.sock"), logger=_quiet())
    xs = []
    for _ in range(min(a.n, 5000)):
        t = time.perf_counter()
        dd = missing.request("bench/gcra", "d")
        xs.append(time.perf_counter() - t)
        assert dd.degraded
    print("degraded, socket missing:  %s  (target < 2 ms)" % quantiles(xs))

    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hang_path = os.path.join(d, "hang.sock")
    srv.bind(hang_path)
    srv.listen(1024)  # accepted by the kernel, never answered
    hung = Client(socket=hang_path, timeout_pause=0, logger=_quiet())  # the default 20 ms timeout
    xs = []
    for _ in range(200):
        t = time.perf_counter()
        dd = hung.request("bench/gcra", "d")
        xs.append(time.perf_counter() - t)
        assert dd.degraded
    print("degraded, agent hangs (timeout 20 ms, no pause): %s  (target ≤ 21 ms)" % quantiles(xs))
    hung.close()
    srv.close()


def _quiet():
    import logging
    lg = logging.getLogger("obol.bench")
    lg.addHandler(logging.NullHandler())
    lg.propagate = False
    return lg


if __name__ == "__main__":
    main()
