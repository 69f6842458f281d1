"""The static export's precompressed copies (issue 24): <file>.gz and <file>.br beside each text file,
the same bytes once decoded, kept on a re-export while their file is unchanged, dropped with it."""

from __future__ import annotations

import gzip
import os

import brotli

from app.export import precompress


def test_text_files_get_gz_and_br_copies_that_decode_to_them(tmp_path):
    page = tmp_path / "embed" / "ddp" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text("<p>a widget</p>\n" * 100)
    (tmp_path / "small.js").write_text("x = 1;")
    (tmp_path / "font.woff2").write_bytes(b"\0" * 4096)
    precompress(tmp_path)
    assert gzip.decompress((tmp_path / "embed/ddp/index.html.gz").read_bytes()) == page.read_bytes()
    assert brotli.decompress((tmp_path / "embed/ddp/index.html.br").read_bytes()) == page.read_bytes()
    assert not (tmp_path / "small.js.gz").exists(), "too small to gain anything"
    assert not (tmp_path / "font.woff2.gz").exists(), "already compressed"


def test_a_reexport_keeps_unchanged_copies_redoes_changed_ones_and_drops_orphans(tmp_path):
    run = tmp_path / "runs" / "ddp" / "a.json"
    run.parent.mkdir(parents=True)
    run.write_text('{"frames": []}' * 100)
    kept = tmp_path / "static.css"
    kept.write_text("body { color: red }\n" * 100)
    precompress(tmp_path)
    (tmp_path / "static.css.gz").write_bytes(b"marker")  # would be rewritten if the copy were not kept
    os.utime(tmp_path / "static.css.gz", ns=(kept.stat().st_mtime_ns,) * 2)
    run.write_text('{"frames": [1]}' * 100)
    os.utime(run, ns=(run.stat().st_mtime_ns + 10**9,) * 2)
    (tmp_path / "runs" / "ddp" / "gone.json.gz").write_bytes(b"stale")
    precompress(tmp_path)
    assert (tmp_path / "static.css.gz").read_bytes() == b"marker"
    assert gzip.decompress((tmp_path / "runs/ddp/a.json.gz").read_bytes()) == run.read_bytes()
    assert not (tmp_path / "runs/ddp/gone.json.gz").exists()
