"""Lighthouse (npm, pinned in package.json) against a real `distdeck serve`: a widget and the deck.

Lighthouse 12's mobile preset (simulated slow 4G, 4x slower CPU) on the widget and the deck, and its
desktop preset on the deck, each the median of REPEATS runs: the performance score, largest contentful
paint, the bytes transferred, and the accessibility / best-practices / SEO scores that must not drop.
Targets (issue 24): a widget >= 90, LCP <= 2.5 s, <= 600 KB; the deck >= 75 (desktop >= 95).

The static export is measured the same way, served by a host that sends its precompressed copies
(bench/static_host.py): its widget page and its deck.

    python -m bench.lighthouse                      # starts a server of this checkout, exports it too
    python -m bench.lighthouse --url http://host:port   # measures a server already running
    python -m bench.lighthouse --export DIR         # measures (and updates) the export in DIR, not a new one
    python -m bench.lighthouse --no-export          # the server only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.served import served_with_warm_pool


ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
LIGHTHOUSE = ROOT / "node_modules" / ".bin" / "lighthouse"
CHROME = os.environ.get("CHROME_PATH", "/usr/bin/chromium")
CHROME_FLAGS = "--headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
REPEATS = int(os.environ.get("DISTDECK_BENCH_LIGHTHOUSE_REPEATS", "3"))
# (label, path, preset): preset None is Lighthouse's default, the mobile one.
PAGES = [
    ("widget, mobile", "/embed/ddp?world_size=4", None),
    ("deck, mobile", "/", None),
    ("deck, desktop", "/", "desktop"),
]
# The static export's pages (paths under its root), measured through a compressing host.
EXPORT_PAGES = [
    ("export widget, mobile", "/embed/ddp/?world_size=4", None),
    ("export deck, mobile", "/", None),
    ("export deck, desktop", "/", "desktop"),
]
CATEGORIES = ("performance", "accessibility", "best-practices", "seo")


@contextlib.contextmanager
def served(pool_size: int = 4, ready_within_s: float = 600) -> Iterator[str]:
    """`distdeck serve` of this checkout on a free port, its rank pool warm (the tests' own launcher); yields its URL."""
    with served_with_warm_pool(pool_size, ready_within_s) as (_, port, health):
        if health.get("simulator") != "ready":
            raise RuntimeError(f"the server on port {port} did not get ready within {ready_within_s:.0f} s")
        yield f"http://127.0.0.1:{port}"


def lighthouse(url: str, preset: str | None) -> dict:
    """One Lighthouse run: its scores (0-100) and the figures this benchmark reports."""
    command = [str(LIGHTHOUSE), url, "--output=json", "--output-path=stdout", "--quiet",
               f"--chrome-flags={CHROME_FLAGS}", f"--only-categories={','.join(CATEGORIES)}"]
    if preset:
        command.append(f"--preset={preset}")
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ, "CHROME_PATH": CHROME},
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"lighthouse failed on {url}: {done.stderr.strip()[-800:]}")
    report = json.loads(done.stdout)
    if report.get("runtimeError"):
        raise RuntimeError(f"lighthouse on {url}: {report['runtimeError']}")
    audits = report["audits"]
    return {
        **{name: round(100 * (report["categories"][name]["score"] or 0)) for name in CATEGORIES},
        "lcp_s": audits["largest-contentful-paint"]["numericValue"] / 1000,
        "tbt_ms": audits["total-blocking-time"]["numericValue"],
        "bytes_kb": audits["total-byte-weight"]["numericValue"] / 1000,
        "dom_elements": audits["dom-size"]["numericValue"],
    }


def lighthouse_retried(url: str, preset: str | None, tries: int = 3) -> dict:
    """A loaded machine sometimes makes Lighthouse time out on the DevTools protocol: try again."""
    for attempt in range(tries):
        try:
            return lighthouse(url, preset)
        except RuntimeError as exc:
            if attempt == tries - 1:
                raise
            print(f"lighthouse: again after: {str(exc)[:200]}", flush=True)
    raise AssertionError("unreachable")


def measure(base_url: str, repeats: int = REPEATS, pages: list[tuple[str, str, str | None]] = PAGES) -> dict[str, dict]:
    """Every page, `repeats` runs each: the medians and every run."""
    figures: dict[str, dict] = {}
    for label, path, preset in pages:
        runs = [lighthouse_retried(base_url + path, preset) for _ in range(repeats)]
        medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        figures[label] = {"url": path, "preset": preset or "mobile", "median": medians, "runs": runs}
        print(f"lighthouse: {label:15} {path:26} performance {medians['performance']:.0f}, "
              f"LCP {medians['lcp_s']:.1f} s, TBT {medians['tbt_ms']:.0f} ms, {medians['bytes_kb']:.0f} KB, "
              f"{medians['dom_elements']:.0f} DOM elements; accessibility {medians['accessibility']:.0f}, "
              f"best practices {medians['best-practices']:.0f}, SEO {medians['seo']:.0f} "
              f"(median of {repeats})", flush=True)
    return figures


def measure_export(directory: Path | None, repeats: int) -> dict[str, dict]:
    """`distdeck export` of this checkout (default runs; a folder given is updated, reusing its recorded runs),
    served by a compressing static host, measured like the server."""
    from app.export import export_site
    from bench.static_host import serving

    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="distdeck-lighthouse-")))
        print(f"lighthouse: exporting the deck to {directory}", flush=True)
        export_site(directory, variants="default")
        url = stack.enter_context(serving(directory))
        return measure(url, repeats, EXPORT_PAGES)


def missing() -> str | None:
    """Why this benchmark cannot run here, or None."""
    if not LIGHTHOUSE.exists():
        return f"{LIGHTHOUSE} is missing: run `npm ci` (lighthouse is a devDependency)"
    if not shutil.which(CHROME) and not Path(CHROME).exists():
        return f"no Chromium at {CHROME} (set CHROME_PATH)"
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running server to measure (default: start one of this checkout)")
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--out", type=Path, default=RESULTS / "lighthouse-latest.json")
    parser.add_argument("--export", type=Path, help="the static export's folder (made or updated with the "
                        "default runs; default: a temporary folder)")
    parser.add_argument("--no-export", action="store_true", help="do not measure the static export")
    args = parser.parse_args(argv)
    why = missing()
    if why:
        print(f"lighthouse: skipped, {why}", flush=True)
        return
    if args.url:
        figures = measure(args.url.rstrip("/"), args.repeats)
    else:
        with served() as url:
            figures = measure(url, args.repeats)
    if not args.no_export:
        figures.update(measure_export(args.export, args.repeats))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2))
    print(f"figures written to {args.out}")


if __name__ == "__main__":
    main()
