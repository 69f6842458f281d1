"""Every setting of the server, in one place, read from DISTDECK_* environment variables."""

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DISTDECK_", env_nested_delimiter="__")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)

    # Embedding: who may put the deck in an iframe (CSP frame-ancestors), and which
    # parent origins the postMessage API answers. "*" means any site.
    frame_ancestors: list[str] = ["*"]
    postmessage_origins: list[str] = ["*"]

    @field_validator("frame_ancestors", "postmessage_origins")
    @classmethod
    def _one_source_per_entry(cls, sources: list[str]) -> list[str]:
        # These go into a response header and a page: a space, ';' or ',' would smuggle in more policy.
        for source in sources:
            if not source or re.search(r"[\s;,]", source):
                raise ValueError(f"not a single origin or CSP source: {source!r}")
        return sources

    slides_dir: Path = ROOT / "slides"
    # A presenter's own talk (a Markdown talk file, app/content/talkfile.py) served instead of the whole deck.
    talk_file: Path | None = None
    static_dir: Path = ROOT / "static"
    # Recorded runs (torchrun or `distdeck simulate --out`) that the deck can replay.
    runs_dir: Path | None = None

    # The warm pool of rank processes behind the live simulations.
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    pool_size: int = Field(8, ge=1, le=8)
    start_pool_on_startup: bool = True
    # A run with no progress (no frame from any rank) for this long is hung: the pool is rebuilt.
    job_timeout_s: float = Field(60.0, gt=0)
    # A run still going after this long, or past this many MiB of frames, is stopped at a frame
    # boundary as too large to show (the pool is kept); retrying it answers at once.
    max_run_s: float = Field(120.0, gt=0)
    max_run_mb: int = Field(128, ge=1)
    max_queued_runs: int = Field(8, ge=1)
    # Distinct runs one client (address) may have waiting or running; the deck's own runs are free.
    runs_per_client: int = Field(3, ge=1)
    # A run whose last viewer left is cancelled after this long, unless it is one of the deck's own.
    abandoned_run_grace_s: float = Field(0.5, ge=0)
    # Finished runs kept for replay, by the bytes of their encoded events (least recently used out first).
    cache_mb: int = Field(512, ge=1)


@lru_cache
def get_settings() -> Settings:
    return Settings()
