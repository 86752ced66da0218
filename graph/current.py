"""Which snapshot describes a repository right now (exact-current), decided from the catalog.

This is the read path's first step and must stay cheap: one ``git status`` and a stat of
one catalog file; no database is opened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import pygit2

from citegraph.graph.snapshot_builder import resolve_target
from citegraph.graph.store import Home, RepoStore
from citegraph.indexer import gitrepo


@dataclass
class CurrentState:
    repo: pygit2.Repository
    identity: gitrepo.RepoIdentity
    head: str
    state: gitrepo.WorktreeState | None  # None for --at REV
    snapshot_id: str  # the id the exact-current snapshot has (built or not)
    entry: dict[str, Any] | None
    store: RepoStore

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
    t = resolve_target(repo_path, at)
    rs = home.repo(t.identity.repository_id)
    return CurrentState(t.repo, t.identity, t.commit, t.state, t.snapshot_id, rs.entry(t.snapshot_id), rs)
