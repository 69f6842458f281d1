"""HEAD answers wherever GET does (RFC 9110 §9.3.2): the GET's status and headers, no body.

One plain ASGI middleware instead of a HEAD beside each GET route: the request goes through as a GET
(so the routes, their validation and their errors are the GET's own, and the OpenAPI schema lists only
GET), the body is dropped, and the GET is stopped as soon as its response has started, so a stream (an
SSE run) does not keep a HEAD open. A route whose GET has a side effect a HEAD must not cause (starting
a simulation run) asks `is_head(request)` and answers its headers without doing it.
"""

from __future__ import annotations

import anyio
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEAD_KEY = "distdeck.head"  # set in the scope of a HEAD passed on as a GET


def is_head(request: Request) -> bool:
    """True when this GET is really a HEAD: answer the headers, do nothing the body would need."""
    return bool(request.scope.get(HEAD_KEY))


class HeadAsGet:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        scope = {**scope, "method": "GET", HEAD_KEY: True}
        ended = False
        with anyio.CancelScope() as body_unwanted:

            async def headers_only(message: Message) -> None:
                nonlocal ended
                if ended:
                    return
                if message["type"] == "http.response.start":
                    await send(message)
                elif message["type"] == "http.response.body":
                    ended = True
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    body_unwanted.cancel()  # stop producing the rest of the body

            await self.app(scope, receive, headers_only)
