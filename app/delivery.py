"""How the server delivers its bytes: compressed where the client accepts it, cached by fingerprint.

- `Compression`: brotli (with the `brotli` package) or gzip for text responses (HTML, JS, CSS, JSON,
  SVG and the SSE runs), whichever the request's Accept-Encoding prefers, with `Vary: Accept-Encoding`.
  A stream is flushed after every message, so each SSE event reaches the browser when it is sent.
- `Static`: the /static files. A URL that carries the file's own fingerprint (`?v=<hash>`, written by
  `Fingerprints`) is cached for a year as immutable: a new version of the file has a new URL. Any other
  URL is revalidated on every use (`no-cache`, against the ETag that StaticFiles sends).
- `Fingerprints`: each static file's `?v=`, and the import map that carries them to ES module imports
  (`import './steps.js'` has no query; the map sends it to `steps.js?v=<hash>`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from starlette.datastructures import Headers, MutableHeaders, QueryParams
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES, GZipResponder, IdentityResponder
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

try:
    import brotli
except ImportError:  # gzip alone still compresses; brotli only saves another ~15 %
    brotli = None

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
# SSE runs are compressed too: flushed per message, they still arrive event by event.
NOT_COMPRESSED = tuple(t for t in DEFAULT_EXCLUDED_CONTENT_TYPES if t != "text/event-stream")
# Level 6 / quality 5: most of the saving at a fraction of the CPU of the maximum (every run's viewers
# share one encoding of its events, but each stream is compressed on its own).
GZIP_LEVEL = 6
BROTLI_QUALITY = 5
# A static import with a relative specifier: `import x from './a.js'`, `export { y } from '../b.js'`,
# `import './c.js'` (at the start of a line, as the modules write them; not the dynamic import()).
STATIC_IMPORT = re.compile(r"""^\s*(?:(?:import|export)\b[^'";]*?\bfrom\s*['"](?P<from>\.{1,2}/[^'"]+)['"]|import\s*['"](?P<bare>\.{1,2}/[^'"]+)['"])""",
                           re.MULTILINE)
# A url() in a stylesheet that is relative to it (not data:, not absolute): rewritten when the CSS is inlined.
CSS_URL = re.compile(r"""url\(\s*(?P<quote>["']?)(?!data:|[a-z]+:|/|#)(?P<path>[^"')]+)(?P=quote)\s*\)""")
# A plain link to a static file in a slide's HTML: src="/static/<path>" (no query yet).
STATIC_LINK = re.compile(r"""(?P<attr>(?:src|href)=(?P<quote>["']))/static/(?P<path>[^"'?#]+)(?P=quote)""")


def accepted_encodings(header: str) -> set[str]:
    """The content codings an Accept-Encoding header accepts (q > 0), lower-cased."""
    accepted = set()
    for item in header.split(","):
        name, _, params = item.partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if name.strip() and q > 0:
            accepted.add(name.strip().lower())
    return accepted


class BrotliResponder(IdentityResponder):
    content_encoding = "br"

    def __init__(self, app: ASGIApp, minimum_size: int, quality: int) -> None:
        super().__init__(app, minimum_size, exclude_content_types=NOT_COMPRESSED)
        self.quality = quality
        self._compressor = None

    async def apply_compression(self, body: bytes, *, more_body: bool) -> bytes:
        if self._compressor is None:
            self._compressor = brotli.Compressor(quality=self.quality, mode=brotli.MODE_TEXT)
        out = self._compressor.process(body)
        return out + (self._compressor.flush() if more_body else self._compressor.finish())


class Compression:
    """Brotli where accepted (and installed), else gzip where accepted, else the body as it is. Starlette's
    responders decide what to compress (not small bodies, not images or fonts, not already encoded ones)
    and add `Vary: Accept-Encoding`; this adds brotli, the SSE stream, and a weak ETag on a compressed body
    (its bytes are not the file's, RFC 9110 §8.8.1; StaticFiles still matches it for a 304)."""

    def __init__(self, app: ASGIApp, minimum_size: int = 500) -> None:
        self.app = app
        self.minimum_size = minimum_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        accepted = accepted_encodings(Headers(scope=scope).get("accept-encoding", ""))
        if brotli is not None and "br" in accepted:
            responder = BrotliResponder(self.app, self.minimum_size, BROTLI_QUALITY)
        elif "gzip" in accepted:
            responder = GZipResponder(self.app, self.minimum_size, compresslevel=GZIP_LEVEL,
                                      exclude_content_types=NOT_COMPRESSED)
        else:  # still says Vary: Accept-Encoding, so a cache does not hand this body to a client that accepts more
            responder = IdentityResponder(self.app, self.minimum_size, exclude_content_types=NOT_COMPRESSED)

        async def mark_encoded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(raw=message["headers"])
                etag = headers.get("etag")
                if etag and "content-encoding" in headers and not etag.startswith("W/"):
                    headers["etag"] = f"W/{etag}"
                if message["status"] == 304:  # no body to compress, but the 200 it stands for varies
                    headers.add_vary_header("Accept-Encoding")
            await send(message)

        await responder(scope, receive, mark_encoded)


class Fingerprints:
    """The content hash of each file under `static_dir`, recomputed only when a file's size or mtime
    changes, and the URLs and import map that carry it."""

    def __init__(self, static_dir: Path) -> None:
        self.static_dir = Path(static_dir).resolve()
        self._cache: dict[str, tuple[tuple[int, int], str]] = {}
        self._inlined: dict[str, tuple[str, str]] = {}

    def of(self, path: str) -> str | None:
        """The fingerprint of static/<path>, or None if there is no such file."""
        try:
            stat = os.stat(self.static_dir / path)
        except OSError:
            return None
        key = (stat.st_size, stat.st_mtime_ns)
        cached = self._cache.get(path)
        if cached and cached[0] == key:
            return cached[1]
        digest = hashlib.sha256((self.static_dir / path).read_bytes()).hexdigest()[:12]
        self._cache[path] = (key, digest)
        return digest

    def url(self, root: str, path: str) -> str:
        """`root` + static/<path>?v=<fingerprint> (without `?v=` for a file that is not there)."""
        digest = self.of(path)
        return f"{root}static/{path}" + (f"?v={digest}" if digest else "")

    def in_html(self, html: str) -> str:
        """Slides that link a static file by its plain URL (`src="/static/js/calculator.js"`) get its
        fingerprinted URL instead."""
        return STATIC_LINK.sub(lambda m: m["attr"] + self.url("/", m["path"]) + m["quote"], html)

    def static_imports(self, entries: list[str]) -> list[str]:
        """`entries` and every module they import statically (relative specifiers), transitively: what a
        page can `modulepreload` so the browser fetches the whole graph at once, not one level per trip."""
        seen: list[str] = []
        todo = list(entries)
        while todo:
            path = todo.pop(0)
            if path in seen or self.of(path) is None:
                continue
            seen.append(path)
            source = (self.static_dir / path).read_text(encoding="utf-8")
            base = Path(path).parent
            for match in STATIC_IMPORT.finditer(source):
                todo.append(os.path.normpath((base / (match["from"] or match["bare"])).as_posix()))
        return seen

    def inline_css(self, root: str, paths: list[str]) -> str:
        """The stylesheets static/<path>, in order, as the text of one <style> element for a page under `root`:
        a page's first paint then waits for its HTML alone, not for a stylesheet request each (each costs
        round trips on a phone's network before anything shows). A url() relative to its stylesheet
        (fonts.css's font files) is rewritten relative to the page, to the plain URL the preloads name."""
        parts = []
        for path in paths:
            digest = self.of(path)
            if digest is None:
                continue
            key = f"inline:{root}:{path}"
            cached = self._inlined.get(key)
            if cached is None or cached[0] != digest:
                base = Path(path).parent
                text = (self.static_dir / path).read_text(encoding="utf-8")
                text = CSS_URL.sub(lambda m: f'url("{root}static/{os.path.normpath((base / m["path"]).as_posix())}")', text)
                if "</" in text:  # cannot end the <style> element it goes in
                    text = text.replace("</", "<\\/")
                cached = self._inlined[key] = (digest, f"/* {path} */\n{text.strip()}")
            parts.append(cached[1])
        return "\n".join(parts)

    def modules(self) -> list[str]:
        """Every ES module a page may import: our js/ and the vendor modules."""
        found = []
        for pattern in ("js/**/*.js", "vendor/**/*.mjs"):
            found += [p.relative_to(self.static_dir).as_posix() for p in self.static_dir.glob(pattern)
                      if not p.name.startswith("_")]
        return sorted(found)

    def import_map(self, root: str) -> str:
        """The page's import map: each module's plain URL -> its fingerprinted URL. The keys are URLs
        relative to the page (root "/" on the server, "../../" in an export), as the imports resolve."""
        imports = {f"{root}static/{path}": self.url(root, path) for path in self.modules()}
        # "</" cannot end the <script> element this goes in.
        return json.dumps({"imports": imports}, separators=(",", ":")).replace("</", "<\\/")


_fingerprints: dict[Path, Fingerprints] = {}


def fingerprints(static_dir: Path) -> Fingerprints:
    """One Fingerprints per static folder, shared by every page and the Static app that checks `?v=`."""
    key = Path(static_dir).resolve()
    if key not in _fingerprints:
        _fingerprints[key] = Fingerprints(key)
    return _fingerprints[key]


class Static(StaticFiles):
    """StaticFiles with Cache-Control: a year, immutable, for a URL with the file's current fingerprint;
    revalidation (ETag) for any other, so a changed file is never served stale."""

    def __init__(self, *, directory: Path) -> None:
        super().__init__(directory=directory)
        self.fingerprints = fingerprints(directory)

    async def get_response(self, path: str, scope: Scope):
        response = await super().get_response(path, scope)
        if response.status_code in (200, 304):
            version = QueryParams(scope.get("query_string", b"")).get("v")
            current = self.fingerprints.of(path)
            fresh = version is not None and current is not None and version == current
            response.headers["cache-control"] = IMMUTABLE if fresh else REVALIDATE
        return response
