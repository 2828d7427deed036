"""What the client's modules share: the agent's bounds and the client's
defaults, the socket rule, the checks of a call's arguments, the reading of
a reply, and the limiter of log lines."""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from typing import Any, Dict, Mapping, Optional, Tuple

from ._transport import Unavailable
from .errors import bad

log = logging.getLogger("obol")

MAX_COPIES = 1_000_000_000
#: The agent's bounds on one batch call.
BATCH_MAX_ITEMS = 1000
BATCH_MAX_BYTES = 64 << 10
DEFAULT_TIMEOUT = 0.02
DEFAULT_SESSION_TTL_MS = 30_000
DEFAULT_RETRY_BASE = 0.01
DEFAULT_TIMEOUT_PAUSE = 0.1
DEFAULT_LOG_INTERVAL = 60.0

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def default_socket(environ: Optional[Mapping[str, str]] = None) -> str:
    """The socket a client dials when given none, by the agent's own rule:
    $OBOL_SOCKET, else $XDG_RUNTIME_DIR/obol.sock (an absolute path only),
    else /run/obol/obol.sock when /run/obol is a directory, else
    /tmp/obol-UID/obol.sock."""
    env = os.environ if environ is None else environ
    p = env.get("OBOL_SOCKET", "")
    if p == "off":
        raise ValueError('obol: OBOL_SOCKET is "off": the agent serves no Unix socket; give its url instead')
    if p:
        return p
    d = env.get("XDG_RUNTIME_DIR", "")
    if d and os.path.isabs(d):
        return os.path.join(d, "obol.sock")
    if os.path.isdir("/run/obol"):
        return "/run/obol/obol.sock"
    return os.path.join("/tmp", "obol-%d" % os.getuid(), "obol.sock")


def _kill_switch_env(v: str) -> bool:
    if v == "" or v in _FALSE:
        return False
    if v in _TRUE:
        return True
    raise ValueError("obol: OBOL_KILL_SWITCH: want 1, true, 0 or false (or t, f, TRUE, FALSE), got %r" % (v,))


def _check_names(resource: Any, domain: Any) -> None:
    if not isinstance(resource, str) or resource == "":
        raise bad("resource: a non-empty string is required, got %r" % (resource,))
    if not isinstance(domain, str) or domain == "":
        raise bad("domain: a non-empty string is required, got %r" % (domain,))


def _check_count(name: str, v: Any, hi: int = MAX_COPIES) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > hi:
        raise bad("%s: must be an integer in [0, %d], got %r" % (name, hi, v))
    return v


def _counts(copies: Any, min_copies: Any) -> Tuple[int, int]:
    copies = _check_count("copies", copies)
    if min_copies is None:
        return copies, copies
    min_copies = _check_count("min_copies", min_copies)
    if min_copies > copies:
        raise bad("min_copies: must be in [0, copies=%d], got %d" % (copies, min_copies))
    return copies, min_copies


def _seconds(name: str, v: Any, allow_zero: bool = True) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v) \
            or v < 0 or (v == 0 and not allow_zero):
        raise bad("%s: must be a finite number of seconds %s 0, got %r" % (name, "≥" if allow_zero else ">", v))
    return float(v)


def _int(reply: Mapping[str, Any], name: str, default: int = 0) -> int:
    v = reply.get(name, default)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("%s: not an integer: %r" % (name, v))
    return v


def _json(raw: bytes) -> Dict[str, Any]:
    try:
        v = json.loads(raw)
    except ValueError as e:
        raise Unavailable("unreadable reply: %s" % e) from None
    if not isinstance(v, dict):
        raise Unavailable("unreadable reply: not a JSON object: %r" % (raw[:80],))
    return v


class _LogLimiter:
    """One log line per interval; counts the events in between."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: Optional[float] = None
        self._count = 0

    def allow(self, now: float, every: float, events: int = 1) -> int:
        with self._lock:
            self._count += events
            if self._last is not None and now - self._last < every:
                return 0
            n, self._count, self._last = self._count, 0, now
            return n


# The status the agent's API gives each error code (for a batch item's error).
_STATUS = {"bad_request": 400, "bad_limit": 400, "cost_over_burst": 400, "unknown_resource": 404,
           "wrong_kind": 409, "too_large": 413, "too_many": 429}
