"""Shared helpers of the validation/capture tests (test_validate_*.py, test_capture.py).

Every repository mutation in those tests is a real git operation (GitRepo: write, commit,
mv, rm, delete, checkout); these helpers only index, capture and read verdicts.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitutil import GIT_ENV, GitRepo

from citegraph.graph.current import CurrentState, ScanSource
from citegraph.graph.handles import symbol_handle
from citegraph.graph.snapshot_builder import BuildResult, build_snapshot
from citegraph.graph.store import Home
from citegraph.memory import api

# A small Python module used by most scenarios. Line numbers matter:
#  1 import time            5     def next_delay(...)    9         self.attempts = 0
#  4 class RetryPolicy:     6         return 2 ** ...   12 def helper():
#  8     def reset(self):                                13     return 42
RETRY = """\
import time


class RetryPolicy:
    def next_delay(self, attempt):
        return 2 ** attempt

    def reset(self):
        self.attempts = 0


def helper():
    return 42
"""

# The bytes of RETRY lines 4-6 (a span used by the span tests).
SPAN_4_6 = """\
class RetryPolicy:
    def next_delay(self, attempt):
        return 2 ** attempt
"""

HELPER = "def helper():\n    return 42\n"


class ChangeBeforeRecheck(ScanSource):
    """An injected state source: the first racing re-check (``moved``) runs ``change``
    first — a commit or an edit landing between the work and its re-check — then answers
    as the one-shot scan does. Later checks wait until the change is done."""

    def __init__(self, change: Callable[[], None]) -> None:
        self.change = change
        self.calls = 0
        self._lock = threading.Lock()

    def moved(self, cur: CurrentState) -> bool:
        with self._lock:
            self.calls += 1
            if self.calls == 1:
                self.change()
        return super().moved(cur)


class CountingSource(ScanSource):
    """An injected state source that counts reads and re-checks per repository path."""

    def __init__(self) -> None:
        self.reads: Counter[str] = Counter()
        self.checks: Counter[str] = Counter()
        self._lock = threading.Lock()

    def read(self, repo_path, home, at=None):  # type: ignore[no-untyped-def]
        with self._lock:
            self.reads[os.path.realpath(os.fspath(repo_path))] += 1
        return super().read(repo_path, home, at)

    def moved(self, cur: CurrentState) -> bool:
        with self._lock:
            self.checks[os.path.realpath(cur.path)] += 1
        return super().moved(cur)


def handle(path: str, qname: str, kind: str = "function", ordinal: int = 0) -> str:
    """The cgs_ handle a Python symbol must have (computed independently of any snapshot)."""
    return symbol_handle(path, "python", kind, qname, ordinal)


def index(repo: GitRepo, home: Home, rev: str | None = None) -> BuildResult:
    res = build_snapshot(repo.root, home, rev=rev, jobs=1)
    assert res.state == "ready"
    return res


def cite(home: Home, repo: GitRepo | Path, *refs: str, text: str = "a claim about the code",
         topic: str | None = None, **kw: Any) -> dict[str, Any]:
    root = repo.root if isinstance(repo, GitRepo) else repo
    return api.remember(home, text, repo=root, refs=list(refs), topic=topic, **kw)


def verdicts(home: Home, *repos: GitRepo | Path, memory_ids: list[str] | None = None,
             at: str | None = None, **kw: Any) -> dict[str, Any]:
    paths = [str(r.root if isinstance(r, GitRepo) else r) for r in repos]
    report = api.validate_memories(home, memory_ids=memory_ids, repo_paths=paths, at=at, **kw)
    return report.to_json()


def memory_verdict(home: Home, repo: GitRepo | Path, mem: dict[str, Any], **kw: Any) -> dict[str, Any]:
    data = verdicts(home, repo, memory_ids=[mem["id"]], **kw)
    assert len(data["memories"]) == 1
    return data["memories"][0]


def observe(home: Home, repo: GitRepo | Path, mem: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """The single citation's observation of a one-citation memory."""
    m = memory_verdict(home, repo, mem, **kw)
    assert len(m["citations"]) == 1, m
    return m["citations"][0]


def loc(path: str, start: int | None = None, end: int | None = None,
        handle: str | None = None) -> dict[str, Any]:
    return {"path": path, "start_line": start, "end_line": end, "handle": handle}


def assert_obs(c: dict[str, Any], outcome: str, reason: str | None = None,
               observed: dict[str, Any] | None = None) -> None:
    """Outcome, reason and observed location must all match exactly."""
    got = (c["outcome"], c["reason"], c["observed"])
    assert got == (outcome, reason, observed), f"{c['ref']}: got {got}"


def git_env() -> dict[str, str]:
    return {**os.environ, **GIT_ENV}


def git(cwd: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=cwd, env=git_env(), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {res.stderr}")
    return res.stdout.strip()


def drop_commit_from_odb(repo: GitRepo) -> None:
    """Expire reflogs and prune: commits no longer reachable leave the object database."""
    repo.git("reflog", "expire", "--expire=now", "--all")
    repo.git("gc", "-q", "--prune=now")


def cli(home: Home, *args: str, cwd: Path | str | None = None):
    """Run the CLI in this process (no interpreter start-up); exit codes are the real ones
    (SystemExit). Subprocess runs (the ``run_cli`` fixture) are kept for a few end-to-end
    checks per command."""
    from click.testing import CliRunner

    from citegraph.cli.main import cli as main

    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return CliRunner().invoke(main, ["--home", str(home.root), *args])
    finally:
        os.chdir(old)
