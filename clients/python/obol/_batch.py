"""Client.batch: many rate decisions in as few calls as the agent's limits
allow; Need is one item of a batch."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ._base import _ClientBase
from ._common import _STATUS, BATCH_MAX_BYTES, BATCH_MAX_ITEMS, _check_names, _counts, _json
from ._transport import Unavailable
from ._types import Decision
from .errors import APIError, ClientClosed, api_error, bad
from .limits import Limit, wire_limit

Need = Union[Tuple[str, str], Tuple[str, str, int], Tuple[str, str, int, Optional[int]],
             Tuple[str, str, int, Optional[int], Optional[Limit]], Mapping[str, Any]]


class _BatchCalls(_ClientBase):
    """Client.batch."""

    def batch(self, needs: Sequence[Need]) -> List[Union[Decision, APIError]]:
        """Many rate decisions in as few calls as the agent's limits allow
        (1000 items and 64 KiB a call). Each need is (resource, domain[,
        copies[, min_copies[, limit]]]) or a mapping with those keys. The result has,
        per need in order, a Decision or the APIError of that item (refused
        by the client before sending, or by the agent). A call the agent
        cannot answer degrades its items. No max_wait."""
        if self._closed:
            raise ClientClosed("obol: the client is closed")
        if not isinstance(needs, (list, tuple)):
            raise self._fail(bad("needs: want a list of (resource, domain[, copies[, min_copies]]), got %r"
                                 % (type(needs).__name__,)))
        out: List[Union[Decision, APIError, None]] = [None] * len(needs)
        items: List[Tuple[int, Dict[str, Any], bytes]] = []
        for i, n in enumerate(needs):
            self._add("calls")
            try:
                if isinstance(n, Mapping):
                    unknown = set(n) - {"resource", "domain", "copies", "min_copies", "limit"}
                    if unknown:
                        raise bad("batch item %d: unknown keys %s; want resource, domain, copies, min_copies, limit"
                                  % (i, sorted(unknown)))
                    r, d, c, m, lim = (n.get("resource"), n.get("domain"), n.get("copies", 1), n.get("min_copies"),
                                       n.get("limit"))
                elif isinstance(n, (tuple, list)) and 2 <= len(n) <= 5:
                    r, d, c, m, lim = list(n) + [1, None, None][len(n) - 2:]
                else:
                    raise bad("batch item %d: want (resource, domain[, copies[, min_copies[, limit]]]) or a mapping, "
                              "got %r" % (i, n))
                _check_names(r, d)
                c, m = _counts(c, m)
                lim = wire_limit(lim)
            except APIError as e:
                out[i] = self._fail(e)  # type: ignore[assignment]
                continue
            body: Dict[str, Any] = {"resource": r, "domain": d, "copies": c, "min_copies": m}
            if lim is not None:
                body["limit"] = lim
            items.append((i, body, json.dumps(body, separators=(",", ":")).encode()))
        chunk: List[Tuple[int, Dict[str, Any], bytes]] = []
        size = 0
        for it in items + [None]:  # type: ignore[list-item]
            if it is not None and (len(chunk) < BATCH_MAX_ITEMS and size + len(it[2]) + 1 < BATCH_MAX_BYTES - 64):
                chunk.append(it)
                size += len(it[2]) + 1
                continue
            if chunk:
                self._batch_call(chunk, out)
            chunk, size = ([it], len(it[2]) + 1) if it is not None else ([], 0)
        return out  # type: ignore[return-value]

    def _batch_call(self, chunk: List[Tuple[int, Dict[str, Any], bytes]], out: List[Any]) -> None:
        try:
            _, _, raw = self._t.call("POST", "/v1/batch", {"requests": [b for _, b, _ in chunk]})
            replies = _json(raw).get("responses")
            if not isinstance(replies, list) or len(replies) != len(chunk):
                raise Unavailable("unreadable reply: want %d responses" % len(chunk))
            decided = []
            for (i, body, _), r in zip(chunk, replies):
                if not isinstance(r, dict):
                    raise Unavailable("unreadable reply: a response is not an object")
                if isinstance(r.get("error"), dict):
                    e = r["error"]
                    code = str(e.get("code", ""))
                    decided.append((i, self._fail(api_error(_STATUS.get(code, 400), code, str(e.get("message", ""))))))
                    continue
                try:
                    decided.append((i, Decision.from_reply(r)))
                except ValueError as e:
                    raise Unavailable("unreadable reply: %s" % e) from None
        except Unavailable as e:
            self._degrade(e, events=len(chunk))
            for i, body, _ in chunk:
                out[i] = Decision(granted=body["min_copies"], degraded=True)
            return
        except APIError as e:
            raise self._fail(e)
        for i, v in decided:
            out[i] = v
        for i, b, _ in chunk:
            v = out[i]
            if isinstance(v, Decision) and v.granted == 0 and b["copies"] > 0 and self.kill_switch:
                v.granted, v.retry_after_ms, v.killed = b["copies"], 0, True
                self._killed(b["resource"], b["domain"])
