"""Which snapshot describes a repository right now (exact-current), decided from the catalog,
and the state sources that answer it.

Every read of "the current state" by capture and validation goes through a ``StateSource``:
``read`` once before the work, ``moved`` once after it (the racing re-check, SPEC §5, §6).
``ScanSource`` is the one-shot path: ``current_state`` — one ``git status`` and a stat of one
catalog file, no database opened — for each read and again for ``moved``. The resident
service injects its own source (a read synced with its file watcher, ``moved`` by an event
sequence number). Tests inject a wrapper whose ``moved`` first changes the repository.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import pygit2

from citegraph.graph.build_target import resolve_target
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home, RepoStore
from citegraph.indexer import gitrepo
from citegraph.indexer.worktree import ChangedWhileReading

SCAN_ATTEMPTS = 3  # a file growing under the one-shot scan is read again this often


@dataclass
class CurrentState:
    repo: pygit2.Repository
    identity: gitrepo.RepoIdentity
    head: str
    state: gitrepo.WorktreeState | None  # None for --at REV
    snapshot_id: str  # the id the exact-current snapshot has (built or not)
    entry: dict[str, Any] | None
    store: RepoStore
    # What it was read for, so that ``StateSource.moved`` can read it again:
    path: str = field(kw_only=True)  # the repository path as given to ``read``
    at: str | None = field(default=None, kw_only=True)  # the --at REV, or None for the worktree
    home: Home = field(kw_only=True)
    # Whatever else the source that read it needs to answer ``moved`` (ScanSource: nothing;
    # the service: its watcher's event sequence number at the read).
    fence: Any = field(default=None, kw_only=True)
    # Read through the resident service (its next steps never say "run index/serve"), and
    # when its build of this state is still running past the read's bound: for how long.
    service: bool = field(default=False, kw_only=True)
    indexing_s: float | None = field(default=None, kw_only=True)
    _former: tuple[str, ...] | None = field(default=None, kw_only=True, repr=False)
    # A snapshot the caller holds open already (``LendingSource``): lent, never closed here.
    lent: Snapshot | None = field(default=None, kw_only=True, repr=False)

    def former_ids(self) -> tuple[str, ...]:
        """The repository's former ids (its identity history, graph/identity.py): citations
        captured under them are validated here when no scope member carries them."""
        if self._former is None:
            from citegraph.graph.identity import former_ids

            self._former = former_ids(self.home, self.identity.repository_id)
        return self._former

    def identity_prefixes(self) -> set[str]:
        """The 16-hex prefixes a ``cgr_`` handle of this repository may carry."""
        return {self.identity.prefix, *(rid[:16] for rid in self.former_ids())}

    def open_snapshot(self) -> Snapshot:
        """The snapshot this state names, read-only (a checkpoint's state reads it from
        Parquet: graph/checkpoint_source.py); the lent one when the caller holds it."""
        if self.lent is not None:
            return _Lent(self.lent)  # type: ignore[return-value]
        return Snapshot.open(self.store, self.snapshot_id, self.repo)

    @property
    def exact_current(self) -> bool:
        return self.entry is not None and self.entry.get("state") == "ready"

    @property
    def dirty(self) -> bool:
        return bool(self.state and self.state.dirty)

    @property
    def workdir(self) -> str | None:
        return self.repo.workdir

    def snapshot_state_text(self) -> str:
        """``not built``, ``building``, or ``failed: <reason>`` — for error lines."""
        if not self.entry:
            return "not built"
        state = self.entry.get("state", "?")
        return f"{state}: {self.entry['reason']}" if self.entry.get("reason") else state

    def token(self) -> tuple[str, str | None, str]:
        """What must not change during a read (racing check)."""
        fp = self.state.dirty_fingerprint if self.state else None
        return (self.head, fp, self.snapshot_id)


def current_state(repo_path: str | os.PathLike[str], home: Home, at: str | None = None) -> CurrentState:
    """The state of ``repo_path`` now (or of commit ``at``): one git status, one catalog stat."""
    t = resolve_target(repo_path, at, skip_dirs=(home.root,))
    rs = home.repo(t.identity.repository_id)
    return CurrentState(t.repo, t.identity, t.commit, t.state, t.snapshot_id, rs.entry(t.snapshot_id), rs,
                        path=os.fspath(repo_path), at=at, home=home)


class StateSource(Protocol):
    """Where capture and validation read the current state of a repository.

    One command reads each repository once (``read``, before the work) and checks it once
    (``moved``, after the work); nothing in between reads the state again."""

    def read(self, repo_path: str | os.PathLike[str], home: Home, at: str | None = None) -> CurrentState:
        """The state now; raises ``CitegraphError`` when ``repo_path`` cannot be read."""
        ...

    def moved(self, cur: CurrentState) -> bool:
        """Has the repository left the state ``cur`` claims? Any doubt (a failed re-read, a
        lost event) is ``True``: the caller then answers racing, never a stale state."""
        ...


class ScanSource:
    """The one-shot path: a git-status scan per read, and another one for ``moved``."""

    def read(self, repo_path: str | os.PathLike[str], home: Home, at: str | None = None) -> CurrentState:
        """The scan; a file that changes while it is hashed is read again (a few times,
        briefly), then the change is reported (retryable)."""
        for attempt in range(SCAN_ATTEMPTS):
            try:
                return current_state(repo_path, home, at)
            except ChangedWhileReading:
                if attempt + 1 == SCAN_ATTEMPTS:
                    raise
                time.sleep(0.02 * (attempt + 1))
        raise AssertionError("unreachable")

    def moved(self, cur: CurrentState) -> bool:
        try:
            again = current_state(cur.path, cur.home, cur.at)
        except Exception:  # a failed re-read proves nothing: count it as moved
            return True
        return again.token() != cur.token()


class _Lent:
    """A held snapshot used as ``with cur.open_snapshot() as snap``: its owner closes it."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def __enter__(self) -> Snapshot:
        return self.snap

    def __exit__(self, *exc: object) -> None:
        return None


class LendingSource(ScanSource):
    """The one-shot scan, lending snapshots the caller already holds open (``citegraph
    check`` opens the base and head snapshots to scope the diff, then validates at both):
    a state naming one of them reads through it instead of opening the file again (≈ 15–45
    ms an open on ruff). Nothing else differs — ``moved`` re-reads as ``ScanSource`` does."""

    def __init__(self, snapshots: list[Snapshot]) -> None:
        self.snapshots = {s.snapshot_id: s for s in snapshots}

    def read(self, repo_path: str | os.PathLike[str], home: Home, at: str | None = None) -> CurrentState:
        cur = super().read(repo_path, home, at)
        held = self.snapshots.get(cur.snapshot_id)
        if held is not None and cur.exact_current:
            cur.lent = held
        return cur

