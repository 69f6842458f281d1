"""Chromium reads a finished run's gzip stream, compressed once for every viewer (issue 32), from the start
and from any Last-Event-ID: each resume is one gzip member cut from the kept segments (Chromium would drop
any member after the first)."""

from __future__ import annotations

import pytest

from app.main import create_app
from app.settings import Settings
from simulations.runtime import RankPool
from tests.api.test_serving import live_server
from tests.finished_runs import finished_run

pytestmark = [pytest.mark.browser]

READ_FROM = """async (ids) => {
    const seen = [];
    for (const id of ids) {
        const response = await fetch('/api/runs/talk/frames', {headers: id === null ? {} : {'Last-Event-ID': String(id)}});
        const text = await response.text();
        seen.push({frames: [...text.matchAll(/^id: (\\d+)$/gm)].map(m => Number(m[1])), done: text.endsWith('event: done\\r\\ndata: {"frames": 200}\\r\\n\\r\\n')});
    }
    seen.push(await new Promise(resolve => {  // and as the player reads it
        const source = new EventSource('/api/runs/talk/frames');
        const frames = [];
        source.addEventListener('frame', event => frames.push(Number(event.lastEventId)));
        source.addEventListener('done', () => { source.close(); resolve({frames, done: true}); });
    }));
    return seen;
}"""


def test_chromium_reads_every_frame_of_a_precompressed_run_from_any_resume_point(browser, tmp_path):
    (tmp_path / "talk.json").write_text(finished_run(frames=200).to_file().model_dump_json())
    resume_after = [None, 0, 77, 130, 198, 199]
    with live_server(create_app(Settings(runs_dir=tmp_path), pool=RankPool(size=2))) as url:
        page = browser.new_page()
        encodings = []
        page.on("response", lambda r: encodings.append(r.headers.get("content-encoding")) if "/frames" in r.url else None)
        page.goto(f"{url}/healthz")
        seen = page.evaluate(READ_FROM, resume_after)
        page.close()
    for after, got in zip([*resume_after, None], seen):
        first = 0 if after is None else after + 1
        assert got == {"frames": list(range(first, 200)), "done": True}, after
    # From the start brotli where the browser offers it (this Chromium does on 127.0.0.1), else gzip; a resume gzip.
    assert len(encodings) == len(seen) and encodings[1:len(resume_after)] == ["gzip"] * (len(resume_after) - 1)
    assert {encodings[0], encodings[-1]} <= {"br", "gzip"}
