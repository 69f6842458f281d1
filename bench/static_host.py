"""A static host that compresses, for measuring the static export as a reader gets it (issue 24).

Hosts such as Netlify, Cloudflare Pages or nginx with `gzip_static`/`brotli_static` send a file's
precompressed copy (`distdeck export` writes <file>.br and <file>.gz beside each text file) when the
browser accepts it, with `Content-Encoding` and `Vary: Accept-Encoding`, and revalidate HTML. This is that
behaviour over Python's own file server, nothing distdeck-specific: the bench measures the export through it.

    python -m bench.static_host DIR [--port 8000]
"""

from __future__ import annotations

import argparse
import contextlib
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

# Precompressed copies, best first, by the Accept-Encoding token that asks for them.
ENCODINGS = (("br", ".br"), ("gzip", ".gz"))


class CompressingHandler(SimpleHTTPRequestHandler):
    def send_head(self):  # noqa: ANN201 (the base class's signature)
        path = Path(self.translate_path(self.path))
        if path.is_dir() and self.path.split("?")[0].endswith("/"):
            path = path / "index.html"  # (a folder without its slash: the base class redirects)
        accepted = {token.split(";")[0].strip() for token in self.headers.get("Accept-Encoding", "").split(",")}
        for encoding, suffix in ENCODINGS:
            copy = path.with_name(path.name + suffix)
            if encoding in accepted and path.is_file() and copy.is_file():
                body = copy.open("rb")
                self.send_response(200)
                self.send_header("Content-Type", self.guess_type(str(path)))
                self.send_header("Content-Encoding", encoding)
                self.send_header("Content-Length", str(copy.stat().st_size))
                self.send_header("Vary", "Accept-Encoding")
                self.send_header("Cache-Control", "no-cache")  # revalidate, as a host does for files it cannot version
                self.end_headers()
                return body
        return super().send_head()

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def serving(directory: Path, port: int = 0) -> Iterator[str]:
    """`directory` served on 127.0.0.1 by the compressing host in a thread; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", port), partial(CompressingHandler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="static-host")
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    with serving(args.directory, args.port) as url:
        print(f"serving {args.directory} at {url}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
