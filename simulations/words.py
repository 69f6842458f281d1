"""Counts in captions and messages that agree with their number: "1 rank", "both ranks", "all 4 ranks"."""

from __future__ import annotations


def plural(n: int, noun: str, many: str | None = None) -> str:
    """The noun for n of it: "rank" for 1, "ranks" otherwise (`many` when the plural is not noun + "s")."""
    return noun if n == 1 else (many or f"{noun}s")


def counted(n: int, noun: str, many: str | None = None) -> str:
    """ "1 rank", "0 GPUs", "4 ranks"."""
    return f"{n} {plural(n, noun, many)}"


def every(n: int, noun: str, many: str | None = None) -> str:
    """Every one of n, as a caption says it: "the 1 rank", "both ranks", "all 4 ranks"."""
    if n == 1:
        return f"the 1 {noun}"
    if n == 2:
        return f"both {plural(n, noun, many)}"
    return f"all {counted(n, noun, many)}"


def each_of(n: int, noun: str, many: str | None = None) -> str:
    """ "the 1 sync", "each of the 3 syncs"."""
    return f"the 1 {noun}" if n == 1 else f"each of the {counted(n, noun, many)}"


def once_every(n: int, noun: str, many: str | None = None) -> str:
    """ "every step", "every 4 steps"."""
    return f"every {noun}" if n == 1 else f"every {counted(n, noun, many)}"
