"""The state a checkpoint partition describes, as a ``StateSource`` (graph/current.py): the
snapshot its manifest names, read from its Parquet files, which never moves.

Batch validation (memory/batch/partition.py) runs the one pipeline over it exactly as
``validate --at`` runs it over a commit's snapshot in a data home: the same plan, evidence
and decision tables; only where the rows are read from differs. There is no worktree: the
git object database, when a clone is at hand, serves the bytes some evidence needs (a span
whose file changed, coverage of unindexed files); without one that evidence is unreadable
and the decision tables answer ``unknown``, never fresh."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from citegraph.graph.current import CurrentState
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home, RepoStore


@dataclass
class CheckpointState(CurrentState):
    """A commit's state whose snapshot is the checkpoint's (no data home, no store)."""

    store: RepoStore | None = None  # type: ignore[assignment]
    home: Home | None = field(default=None, kw_only=True)  # type: ignore[assignment]
    tables: dict[str, Path] = field(default_factory=dict, kw_only=True)

    _con: duckdb.DuckDBPyConnection | None = field(default=None, init=False, repr=False)

    def open_snapshot(self) -> Snapshot:
        """A cursor on the partition's one connection (its views are made once: a task
        reads its snapshot for the evidence and again for the advisories)."""
        if self._con is None:
            self._con = Snapshot.from_parquet(self.snapshot_id, self.entry or {}, self.tables).con
        return Snapshot(self.snapshot_id, self.entry or {}, self._con.cursor(), self.repo)

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


class CheckpointSource:
    """Answers every read with the one state of the partition; it never moves (the files
    were verified against the manifest's digests before the state was made)."""

    def __init__(self, state: CheckpointState) -> None:
        self.state = state

    def read(self, repo_path: str | os.PathLike[str], home: Any, at: str | None = None) -> CurrentState:
        return self.state

    def moved(self, cur: CurrentState) -> bool:
        return False
