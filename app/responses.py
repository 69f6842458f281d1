"""What every response shares: security headers, and HTML error pages instead of tracebacks; and the small
HTTP helpers the routers share (an HTML error response, a link back to the page asked for).

Owns: the SecurityHeaders middleware, the exception handlers (install), html_error, relative_href. Imports
app.pages.errors (the error page) and app.settings; imported by app.main and the routers.
"""

import logging
from urllib.parse import quote, urlencode

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.pages.errors import render_error
from app.settings import Settings

log = logging.getLogger("distdeck")

ERROR_TEXT = {
    404: ("Page not found", "There is no page at"),
    500: ("Something went wrong", "The server could not render"),
}


def security_headers(frame_ancestors: list[str]) -> list[tuple[bytes, bytes]]:
    return [
        (b"content-security-policy", f"frame-ancestors {' '.join(frame_ancestors)}".encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"strict-origin-when-cross-origin"),
    ]


class SecurityHeaders:
    """Adds CSP frame-ancestors (who may embed us) and a few safe defaults to every response.

    A plain ASGI middleware rather than BaseHTTPMiddleware, so Server-Sent Event streams pass
    through untouched. No X-Frame-Options: it would forbid the cross-site embedding we allow.
    """

    def __init__(self, app: ASGIApp, frame_ancestors: list[str]) -> None:
        self.app = app
        self.headers = security_headers(frame_ancestors)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in self.headers}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names and k.lower() != b"x-frame-options"]
                message["headers"] = kept + self.headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def error_page(request: Request, status_code: int) -> HTMLResponse:
    heading, message = ERROR_TEXT.get(status_code, ("Error", "The server could not answer"))
    settings: Settings = request.app.state.settings
    return HTMLResponse(render_error(settings, status_code, heading, message, path=request.url.path),
                        status_code=status_code)


def html_error(request: Request, status_code: int, heading: str, message: str) -> HTMLResponse:
    """An error page that says what was wrong with the request (a 422 naming the field and its bound)."""
    return HTMLResponse(render_error(request.app.state.settings, status_code, heading, message),
                        status_code=status_code)


def relative_href(last_segment: str, request: Request) -> str:
    """"Open in a new tab": this same page, with its query, as a link relative to it. Never built from
    the Host header, which the client chooses (a reflected host would point the link at any site)."""
    query = urlencode(list(request.query_params.multi_items()), safe=",")
    return "./" + quote(last_segment, safe="") + (f"?{query}" if query else "")


BODY_NOT_PARSED = "There was an error parsing the body"  # fastapi.routing's detail for a body it cannot decode


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app answers on the request's path (asked method by method: included
    routers hide their routes' own method sets)."""
    from starlette.routing import Match

    return [method for method in ("GET", "POST", "PUT", "PATCH", "DELETE")
            if any(route.matches({**request.scope, "method": method})[0] == Match.FULL for route in request.app.routes)]


def install(app: FastAPI, settings: Settings) -> None:
    app.add_middleware(SecurityHeaders, frame_ancestors=settings.frame_ancestors)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404 and not _wants_json(request):
            return error_page(request, 404)
        if exc.status_code == 400 and exc.detail == BODY_NOT_PARSED:
            # FastAPI's answer to a body that is not JSON text (bytes that are not UTF-8): a 422 naming the body,
            # as every other bad input of the API is answered.
            return JSONResponse({"detail": [{"loc": ["body"], "type": "json_invalid",
                                             "msg": "the body is not JSON text (UTF-8)"}]}, status_code=422)
        if exc.status_code == 405:
            # Starlette's 405 names the methods of the first route on the path; a path served by two routes
            # (GET /api/estimate with a query, POST with a hardware profile in its body) allows both.
            exc.headers = {**(exc.headers or {}), "Allow": ", ".join(_allowed_methods(request))}
        return await http_exception_handler(request, exc)

    # Starlette answers unhandled errors outermost, outside every middleware: this handler's
    # response would miss SecurityHeaders, so it carries them itself.
    headers = {name.decode(): value.decode() for name, value in security_headers(settings.frame_ancestors)}

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s", request.url.path)
        if _wants_json(request):
            response: Response = JSONResponse({"detail": "Internal server error"}, status_code=500)
        else:
            response = error_page(request, 500)
        response.headers.update(headers)
        return response
