"""Rate limiting for WSGI (Flask, Django...) and ASGI (FastAPI, Starlette...)
applications, with no framework dependency. Each request is asked through
Client.check (GET /v1/check), whose reply carries the IETF RateLimit fields:

* a grant goes on, with RateLimit-Policy and RateLimit added to the response;
* a rejection is answered 429 with Retry-After (whole seconds, rounded up, at
  least 1; left out when no wait would help), the RateLimit fields and the
  body "429 too many requests";
* degraded and killed grants go on; a client error (an unknown resource: a
  config mistake) lets the request through and is logged at most once per the
  client's log interval, since a limiter must not take the service down;
* a domain function that returns None lets the request through unasked.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Awaitable, Callable, Iterable, List, Optional, Tuple, Union

from ._client import Client, Decision
from .errors import APIError

BODY_429 = b"429 too many requests\n"


def _headers(d: Decision) -> List[Tuple[str, str]]:
    h = []
    if d.ratelimit_policy:
        h.append(("RateLimit-Policy", d.ratelimit_policy))
    if d.ratelimit:
        h.append(("RateLimit", d.ratelimit))
    return h


def rejection_headers(d: Decision) -> List[Tuple[str, str]]:
    """The headers of a 429 answering the rejection d."""
    h = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(BODY_429)))]
    if d.retry_after_ms >= 0:
        h.append(("Retry-After", str(max(1, -(-d.retry_after_ms // 1000)))))
    return h + _headers(d)


class _Limiter:
    def __init__(self, client: Client, resource: Union[str, Callable[[Any], str]],
                 domain: Callable[[Any], Optional[str]], copies: int = 1) -> None:
        if not isinstance(client, Client):
            raise TypeError("obol: middleware: client: want an obol.Client, got %r" % (client,))
        if not (isinstance(resource, str) and resource) and not callable(resource):
            raise TypeError("obol: middleware: resource: want a non-empty string or a function of the request, got %r"
                            % (resource,))
        if not callable(domain):
            raise TypeError("obol: middleware: domain: want a function of the request, got %r" % (domain,))
        self.client, self.resource, self.domain, self.copies = client, resource, domain, copies

    def decide(self, req: Any) -> Optional[Decision]:
        """The decision for req; None to let it through unasked (no domain, or a client error)."""
        dom = self.domain(req)
        if dom is None:
            return None
        res = self.resource if isinstance(self.resource, str) else self.resource(req)
        try:
            return self.client.check(res, dom, self.copies)
        except APIError as e:
            c = self.client
            n = c.middleware_log.allow(c._clock(), c.log_interval)
            if n:
                c._log.warning("obol: middleware: letting requests through after a client error: %s (errors: %d)", e, n)
            return None


class WSGIMiddleware(_Limiter):
    """Wraps a WSGI app: ``app.wsgi_app = WSGIMiddleware(app.wsgi_app,
    client, "api/search", lambda environ: environ.get("REMOTE_ADDR"))``.
    resource is a name or a function of the WSGI environ; domain a function
    of the environ returning the domain, or None to let the request through."""

    def __init__(self, app: Callable[..., Iterable[bytes]], client: Client,
                 resource: Union[str, Callable[[dict], str]], domain: Callable[[dict], Optional[str]],
                 copies: int = 1) -> None:
        super().__init__(client, resource, domain, copies)
        self.app = app

    def __call__(self, environ: dict, start_response: Callable[..., Any]) -> Iterable[bytes]:
        d = self.decide(environ)
        if d is None:
            return self.app(environ, start_response)
        if d.granted == 0 and self.copies > 0:
            start_response("429 Too Many Requests", rejection_headers(d))
            return [BODY_429]
        extra = _headers(d)
        if not extra:
            return self.app(environ, start_response)

        def sr(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> Any:
            return start_response(status, list(headers) + extra, exc_info)
        return self.app(environ, sr)


class ASGIMiddleware(_Limiter):
    """Wraps an ASGI app: ``app = ASGIMiddleware(app, client, "api/search",
    lambda scope: scope["client"][0])``. resource is a name or a function of
    the ASGI scope; domain a function of the scope returning the domain, or
    None to let the request through. Only "http" scopes are limited. The
    client's call (blocking, at most its timeout) runs in the event loop's
    default executor, so a hung agent never blocks the loop."""

    def __init__(self, app: Callable[..., Awaitable[None]], client: Client,
                 resource: Union[str, Callable[[dict], str]], domain: Callable[[dict], Optional[str]],
                 copies: int = 1) -> None:
        super().__init__(client, resource, domain, copies)
        self.app = app

    async def __call__(self, scope: dict, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        d = await loop.run_in_executor(None, functools.partial(self.decide, scope))
        if d is None:
            await self.app(scope, receive, send)
            return
        if d.granted == 0 and self.copies > 0:
            await send({"type": "http.response.start", "status": 429,
                        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in rejection_headers(d)]})
            await send({"type": "http.response.body", "body": BODY_429})
            return
        extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in _headers(d)]
        if not extra:
            await self.app(scope, receive, send)
            return

        async def send_with(msg: dict) -> None:
            if msg.get("type") == "http.response.start":
                msg = dict(msg)
                msg["headers"] = list(msg.get("headers", [])) + extra
            await send(msg)
        await self.app(scope, receive, send_with)
