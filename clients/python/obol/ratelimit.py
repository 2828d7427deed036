"""The IETF RateLimit fields (RateLimit-Policy and RateLimit, structured-field
lists of RFC 9651) read into Python values."""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple, Union

Params = Dict[str, Union[int, str]]

_KEY = re.compile(r"[a-z*][a-z0-9_.*-]*")
_TOKEN = re.compile(r"[A-Za-z*][A-Za-z0-9!#$%&'*+.^_`|~:/-]*")
_INT = re.compile(r"-?[0-9]{1,15}(?![0-9.])")


def _string(v: str, i: int) -> Tuple[Optional[str], int]:
    """An sf-string or sf-token at v[i:]: (value, end), or (None, i) when malformed."""
    if i < len(v) and v[i] == '"':
        out = []
        i += 1
        while i < len(v):
            c = v[i]
            if c == "\\":
                if i + 1 < len(v) and v[i + 1] in '"\\':
                    out.append(v[i + 1])
                    i += 2
                    continue
                return None, i
            if c == '"':
                return "".join(out), i + 1
            if not " " <= c <= "~":
                return None, i
            out.append(c)
            i += 1
        return None, i
    m = _TOKEN.match(v, i)
    if m:
        return m.group(), m.end()
    return None, i


def parse_list(value: str) -> List[Tuple[str, Params]]:
    """Reads a RateLimit-Policy or RateLimit value such as
    '"t1";q=5;w=1, "t2";q=50;w=5' into [("t1", {"q": 5, "w": 1}), ...]. A
    malformed value gives [] (the draft says to ignore a malformed field)."""
    out: List[Tuple[str, Params]] = []
    v, i = value or "", 0
    while True:
        while i < len(v) and v[i] in " \t":
            i += 1
        if i >= len(v):
            return out
        name, i = _string(v, i)
        if name is None:
            return []
        params: Params = {}
        while i < len(v) and v[i] == ";":
            i += 1
            while i < len(v) and v[i] == " ":
                i += 1
            m = _KEY.match(v, i)
            if not m or not v.startswith("=", m.end()):
                return []
            key, i = m.group(), m.end() + 1
            n = _INT.match(v, i)
            if n:
                params[key], i = int(n.group()), n.end()
                continue
            s, i = _string(v, i)
            if s is None:
                return []
            params[key] = s
        out.append((name, params))
        while i < len(v) and v[i] in " \t":
            i += 1
        if i >= len(v):
            return out
        if v[i] != ",":
            return []
        i += 1


def first_param(value: str, key: str) -> Optional[Union[int, str]]:
    """The parameter key of the field's first member (None when absent or malformed)."""
    items = parse_list(value)
    return items[0][1].get(key) if items else None
