"""What a build reports and what a caller may inject into it.

``BuildStats`` counts the real work a build did (blobs read and parsed, rows written per
table, files read through from the base): the O(change) test and the benchmarks read it.
``BuildHooks`` is what a test injects: ``stall(stage)`` is called at each stage boundary
(the crash tests' launcher, tests/stall_launcher.py, stalls there so it can kill -9 the
build at a known point); ``statement`` sees each statement of a delta's edge resolution.
Production code reads no environment variable for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

# The stage boundaries of a build, in order (tests/test_crash_concurrency.py kills a build
# stalled at each of them).
STAGES = ("inventory", "extract", "write", "publish", "published")


@dataclass
class BuildStats:
    """Counters a test or benchmark can read: how much real work a build did."""

    extracted_blobs: int = 0
    cached_blobs: int = 0
    copied_files: int = 0
    blob_reads: int = 0  # blobs read from the object database (or the worktree bytes used)
    parses: int = 0  # blobs handed to a parser
    rows_written: Counter[str] = field(default_factory=Counter)  # per table of the new snapshot
    base_rows_read: int = 0  # rows of the base's files table read while planning the delta
    stages: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BuildHooks:
    stall: Callable[[str], None] | None = None
    # called after each statement of a delta's edge resolution with its label and DuckDB's
    # profile of it (graph/delta_resolution.py; tests/test_o_change.py counts rows scanned)
    statement: Callable[[str, dict], None] | None = None


NO_HOOKS = BuildHooks()


def checkpoint(stage: str, stats: BuildStats, hooks: BuildHooks) -> None:
    stats.stages.append(stage)
    if hooks.stall is not None:
        hooks.stall(stage)
