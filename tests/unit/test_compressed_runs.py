"""A finished run's SSE stream compressed once per encoding and kept with the run (issue 32): every resume
point of the gzip form decodes to the events as they are, one gzip member as browsers read it; viewers after
the first cost no compression and get the same bytes object."""

from __future__ import annotations

import gzip
import random
import zlib

import pytest

from app import delivery
from app.delivery import GzipRun, crc32_combine, finished_run_body
from tests.finished_runs import finished_run, gunzip_one_member, run_async


def test_crc32_combine_is_zlibs():
    rng = random.Random(1)
    for size_a, size_b in [(0, 0), (1, 0), (0, 5), (100, 1), (7, 100_000), (65_537, 3)]:
        a, b = rng.randbytes(size_a), rng.randbytes(size_b)
        assert crc32_combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b), (size_a, size_b)


@pytest.mark.parametrize("frames, blocks", [(40, 5), (1, 1), (0, 0)])
def test_every_resume_point_of_a_gzipped_run_decodes_to_the_events_as_they_are(monkeypatch, frames, blocks):
    """From the start, from each block's first frame, from inside a block and past the last frame: one gzip
    member (with the right CRC and length, which gzip.decompress checks) of the very bytes sent uncompressed."""
    monkeypatch.setattr(delivery, "GZIP_SEGMENT_BYTES", 8 << 10)  # many blocks from a small run
    run = finished_run(frames)
    gzipped, size = GzipRun.of(run)
    assert len(gzipped.first_frames) >= blocks and size >= len(gzipped.whole)
    for after in range(-1, run.frame_count + 2):
        body = b"".join(gzipped.body(after))
        plain = b"".join(run.encoded(after))
        assert gunzip_one_member(body) == plain == gzip.decompress(body), after


def test_a_block_boundary_resume_compresses_nothing_and_one_inside_a_block_at_most_the_rest_of_it(monkeypatch):
    monkeypatch.setattr(delivery, "GZIP_SEGMENT_BYTES", 8 << 10)
    gzipped, _ = GzipRun.of(finished_run())
    made = []
    real = delivery.deflated_segment
    monkeypatch.setattr(delivery, "deflated_segment", lambda data: made.append(len(data)) or real(data))
    second_block = gzipped.first_frames[1]
    gzipped.body(second_block - 1)  # resumes at the block's first frame
    assert made == []
    gzipped.body(second_block)  # resumes one frame into it
    block_bytes = sum(len(e) for e in gzipped.frames[second_block:gzipped.first_frames[2]])
    assert len(made) == 1 and 0 < made[0] < block_bytes


@pytest.mark.parametrize("accept, encoding", [("gzip, deflate, br", "br"), ("gzip, deflate", "gzip"), ("identity", None)])
def test_a_finished_run_is_compressed_once_per_encoding_and_every_viewer_gets_those_bytes(monkeypatch, accept, encoding):
    compressors = []
    monkeypatch.setattr(zlib, "compressobj", lambda *a, real=zlib.compressobj: compressors.append(a) or real(*a))
    monkeypatch.setattr(delivery.brotli, "compress", lambda *a, real=delivery.brotli.compress, **kw:
                        compressors.append(a) or real(*a, **kw))
    run = finished_run()
    before = run.nbytes
    bodies = [run_async(finished_run_body, run, accept, -1) for _ in range(5)]
    assert all(got == encoding for _, got in bodies)
    if encoding is None:
        assert compressors == [] and run.nbytes == before
        return
    first = bodies[0][0]
    made = len(compressors)
    assert made >= 1
    assert all(len(parts) == 1 and parts[0] is first[0] for parts, _ in bodies), "the same bytes object, reused"
    assert len(compressors) == made, "nothing compressed for the viewers after the first"
    plain = b"".join(run.encoded())
    assert (delivery.brotli.decompress(first[0]) if encoding == "br" else gunzip_one_member(first[0])) == plain
    assert run.nbytes >= before + len(first[0]), "kept with the run, and counted in its size"


def test_a_resume_is_sent_as_gzip_even_to_a_client_that_prefers_brotli():
    """A brotli stream cannot be cut at a resume point; gzip's segments can."""
    run = finished_run()
    parts, encoding = run_async(finished_run_body, run, "gzip, deflate, br", 9)
    assert encoding == "gzip" and gunzip_one_member(b"".join(parts)) == b"".join(run.encoded(9))
    parts, encoding = run_async(finished_run_body, run, "br", 9)  # no gzip: the middleware's to compress
    assert encoding is None and parts == run.encoded(9)
