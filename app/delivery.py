"""How the server delivers its bytes: compressed where the client accepts it, cached by fingerprint.

- `Compression`: brotli (with the `brotli` package) or gzip for text responses (HTML, JS, CSS, JSON,
  SVG and the SSE runs), whichever the request's Accept-Encoding prefers, with `Vary: Accept-Encoding`.
  A stream is flushed after every message, so each SSE event reaches the browser when it is sent.
- `finished_run_body`: a finished run's SSE stream, compressed once per encoding and kept with the run, so
  that a crowd of viewers costs no compression at all (issue 32). gzip is kept as independently deflated
  segments that any resume point (`Last-Event-ID`) can be cut from; brotli as one stream, for viewers
  from the start.
- `Static`: the /static files. A URL that carries the file's own fingerprint (`?v=<hash>`, written by
  `Fingerprints`) is cached for a year as immutable: a new version of the file has a new URL. Any other
  URL is revalidated on every use (`no-cache`, against the ETag that StaticFiles sends).
- `Fingerprints`: each static file's `?v=`, and the import map that carries them to ES module imports
  (`import './steps.js'` has no query; the map sends it to `steps.js?v=<hash>`).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import re
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import anyio

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
# Level 6 / quality 5: most of the saving at a fraction of the CPU of the maximum (a run in progress is
# compressed per viewer; a finished one once per encoding, see finished_run_body).
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


def preferred_encoding(accepted: frozenset[str]) -> str | None:
    """The coding to send a client that accepts `accepted`: brotli (if installed), else gzip, else none."""
    if brotli is not None and "br" in accepted:
        return "br"
    return "gzip" if "gzip" in accepted else None


@lru_cache(maxsize=64)  # a crowd's browsers send a handful of distinct headers, each read once per request
def accepted_encodings(header: str) -> frozenset[str]:
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
    return frozenset(accepted)


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
        encoding = preferred_encoding(accepted_encodings(Headers(scope=scope).get("accept-encoding", "")))
        responder: IdentityResponder | None = None
        encoded_already = False

        async def mark_encoded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(raw=message["headers"])
                etag = headers.get("etag")
                if etag and "content-encoding" in headers and not etag.startswith("W/"):
                    headers["etag"] = f"W/{etag}"
                if message["status"] == 304:  # no body to compress, but the 200 it stands for varies
                    headers.add_vary_header("Accept-Encoding")
            await send(message)

        async def compress(message: Message) -> None:
            # The responder is made when the response starts, and only for a body not encoded already: a
            # finished run's stream, compressed once for all its viewers, costs a crowd nothing here.
            nonlocal responder, encoded_already
            if responder is None and not encoded_already:
                headers = message.get("headers", []) if message["type"] == "http.response.start" else []
                encoded_already = any(name.lower() == b"content-encoding" for name, _ in headers)
                if not encoded_already:
                    responder = self._responder(encoding)
                    responder.send = mark_encoded  # what its __call__ would set before calling the app
            if encoded_already:
                await mark_encoded(message)
            else:
                await responder.send_with_compression(message)

        await self.app(scope, receive, compress)

    def _responder(self, encoding: str | None) -> IdentityResponder:
        """Starlette's responder for `encoding`, fed the app's messages by `compress`."""
        if encoding == "br":
            return BrotliResponder(self.app, self.minimum_size, BROTLI_QUALITY)
        if encoding == "gzip":
            return GZipResponder(self.app, self.minimum_size, compresslevel=GZIP_LEVEL,
                                 exclude_content_types=NOT_COMPRESSED)
        # still says Vary: Accept-Encoding, so a cache does not hand this body to a client that accepts more
        return IdentityResponder(self.app, self.minimum_size, exclude_content_types=NOT_COMPRESSED)


# -- a finished run, compressed once per encoding --------------------------------------------------------
#
# Chromium reads only the first member of a gzip body and silently drops the rest (GzipSourceStream's
# STATE_IGNORING_EXTRA_BYTES, "matches the behavior of other browsers"), so a resumed stream cannot be
# members compressed apart and concatenated. It is one member cut from segments instead: each segment is
# raw deflate from a fresh compressor (nothing in it refers back into another) ended by a sync flush
# (byte-aligned, not final), so segments in order between a gzip header and a final empty block are a
# valid deflate stream; the trailer's CRC-32 of what they decode to is combined from theirs.

GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, no mtime, OS unknown
FINAL_BLOCK = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS).flush()  # an empty final block
# Frames are deflated in segments of about this many bytes of events: a resume point every segment. Each
# starts without the history of the one before: at 128 KiB the pipeline run of issue 32 (465 KiB of events)
# gzips to 4 % more than as one stream, at 64 KiB 8 %, one segment per frame 65 %. A resume inside a
# segment compresses the rest of that segment for its viewer: at most this much.
GZIP_SEGMENT_BYTES = 128 << 10
CRC32_POLY = 0xEDB88320  # reflected, as zlib's crc32


def _multmodp(a: int, b: int) -> int:
    """a · b modulo the CRC-32 polynomial (zlib's crc32.c, multmodp)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if a & (m - 1) == 0:
                return p
        m >>= 1
        b = (b >> 1) ^ CRC32_POLY if b & 1 else b >> 1


_X2N = [1 << 30]  # x^(2^k) modulo the polynomial, k = 0..31
for _ in range(31):
    _X2N.append(_multmodp(_X2N[-1], _X2N[-1]))


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of A + B from A's CRC, B's CRC and B's length (zlib's crc32_combine, which Python's
    zlib does not offer): A's CRC shifted by len2 zero bytes, then B's added in."""
    p, k, n = 1 << 31, 3, len2  # x^(8·len2): one factor x^(2^k) per set bit of len2, from k = 3
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return _multmodp(p, crc1) ^ crc2


@dataclass(frozen=True)
class Segment:
    deflated: bytes
    crc: int  # of the bytes it decodes to
    size: int  # how many


def deflated_segment(data: bytes) -> Segment:
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    return Segment(compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH), zlib.crc32(data), len(data))


def _joined_segments(segments: Sequence[Segment]) -> Segment:
    """The CRC and size of the segments' bytes one after another (their deflated bytes left out)."""
    crc, size = 0, 0
    for segment in segments:
        crc, size = crc32_combine(crc, segment.crc, segment.size), size + segment.size
    return Segment(b"", crc, size)


def _trailer(decoded: Segment) -> bytes:
    return struct.pack("<II", decoded.crc, decoded.size & 0xFFFFFFFF)


@dataclass(frozen=True)
class GzipRun:
    """A finished run's events deflated in segments: meta, the frames in blocks of about GZIP_SEGMENT_BYTES,
    and the tail (summary and done, or the error). `whole` is the gzip body a viewer from the start gets;
    a resume from a block's first frame is cut from it (header, meta, the blocks from there on, tail)."""
    whole: bytes
    meta: Segment
    first_frames: list[int]  # the index of each block's first frame
    offsets: list[int]  # where each block, and then the tail, starts in `whole`
    suffixes: list[Segment]  # CRC and size of blocks[b:] + tail as decoded, for each b (the last: tail alone)
    frames: list[bytes]  # the run's own frame events (not copies): what a resume inside a block compresses

    @classmethod
    def of(cls, run: Any) -> tuple[GzipRun, int]:
        meta, frames, tail = run.encoded_events()
        blocks, first_frames, start, size = [], [], 0, 0
        for i, event in enumerate(frames):
            size += len(event)
            if size >= GZIP_SEGMENT_BYTES or i == len(frames) - 1:
                blocks.append(deflated_segment(b"".join(frames[start:i + 1])))
                first_frames.append(start)
                start, size = i + 1, 0
        meta_segment = deflated_segment(meta)
        parts = [meta_segment, *blocks, deflated_segment(tail)]
        suffixes = [parts[-1]]
        for block in reversed(blocks):
            suffixes.insert(0, _joined_segments([block, suffixes[0]]))
        offsets = [len(GZIP_HEADER) + len(meta_segment.deflated)]
        for part in parts[1:-1]:
            offsets.append(offsets[-1] + len(part.deflated))
        whole = b"".join([GZIP_HEADER, *(p.deflated for p in parts), FINAL_BLOCK,
                          _trailer(_joined_segments([meta_segment, suffixes[0]]))])
        form = cls(whole, meta_segment, first_frames, offsets, suffixes, frames)
        # its bytes (meta's segment is kept apart as well), and about what the lists and small objects take
        return form, len(whole) + len(meta_segment.deflated) + 100 * len(blocks) + 8 * len(frames)

    def body(self, after: int) -> list[bytes]:
        """The gzip body of meta, the frames after index `after`, and the tail. From the start, or from the
        first frame of a block, nothing is compressed; from inside a block, the rest of that block is."""
        if after < 0:
            return [self.whole]
        first = after + 1
        block = bisect.bisect_right(self.first_frames, first) - 1
        head = [self.meta]
        if first >= len(self.frames):
            block = len(self.first_frames)
        elif self.first_frames[block] != first:
            end = self.first_frames[block + 1] if block + 1 < len(self.first_frames) else len(self.frames)
            head.append(deflated_segment(b"".join(self.frames[first:end])))
            block += 1
        rest = self.whole[self.offsets[block]:-len(FINAL_BLOCK) - 8]  # blocks[block:] and the tail, deflated
        decoded = _joined_segments([*head, self.suffixes[block]])
        return [GZIP_HEADER, *(h.deflated for h in head), rest, FINAL_BLOCK, _trailer(decoded)]


def _brotli_run(run: Any) -> tuple[bytes, int]:
    meta, frames, tail = run.encoded_events()
    compressed = brotli.compress(b"".join([meta, *frames, tail]), quality=BROTLI_QUALITY, mode=brotli.MODE_TEXT)
    return compressed, len(compressed)


async def _derived(run: Any, name: str, make) -> Any:
    """The run's form `name`: at once if made, else made (or waited for) off the event loop."""
    form = run.derived_if_made(name)
    if form is None:
        form = await anyio.to_thread.run_sync(run.derived, name, make)
    return form


async def finished_run_body(run: Any, accept_encoding: str, after: int) -> tuple[list[bytes], str | None]:
    """(the writes, their Content-Encoding) for a finished run's events after frame `after`, as the client's
    Accept-Encoding allows. Every viewer from the start gets the same bytes object, compressed once.

    brotli (about 15 % smaller than gzip here) is one stream: a brotli stream cannot be cut at a resume
    point and spliced to another's head (no format-level concatenation), so a resume goes out as gzip,
    which every browser accepts; a client that takes brotli but not gzip gets the events as they are and
    the Compression middleware compresses them for it (a resume from such a client is rare)."""
    accepted = accepted_encodings(accept_encoding)
    encoding = preferred_encoding(accepted)
    if encoding == "br" and after < 0:
        return [await _derived(run, "br", _brotli_run)], "br"
    if "gzip" in accepted:
        gzipped: GzipRun = await _derived(run, "gzip", GzipRun.of)
        if after < 0:
            return gzipped.body(after), "gzip"
        return await anyio.to_thread.run_sync(gzipped.body, after), "gzip"  # may compress up to a block
    return run.encoded(after), None


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
