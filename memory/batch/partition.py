"""One repository partition of a checkpoint, validated: the plain function a batch engine
runs once per repository (memory/batch/dask_engine.py runs it on Dask; ``inline`` in this
process; any other engine could call it the same way).

It verifies the partition's files against the manifest's digests, reads its memories with
import's checks, and runs **the one pipeline** (validator/pipeline.py: plan → run →
aggregate, the decision tables of validator/decisions.py) over the snapshot the manifest
names, read from its Parquet files by a DuckDB connection of one thread
(graph/checkpoint_source.py) — exactly what ``validate --at COMMIT`` does in a data home.
Each memory is validated with its citations of this repository (or of an id in its
identity history); a memory citing several repositories is validated in each of their
partitions.

Without a clone, evidence that needs file bytes (a span whose file changed, the coverage
of files that were not indexed, re-extraction under another extractor version) cannot be
read and the tables answer ``unknown`` — never fresh; with ``repo_path`` (a clone of the
repository, readable where the task runs) the answer is ``validate --at``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from citegraph.graph.checkpoint_manifest import RepositoryPart, verify_file
from citegraph.graph.checkpoint_source import CheckpointSource, CheckpointState
from citegraph.graph.schema import SNAPSHOT_TABLES
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.api import excerpt
from citegraph.memory.exchange.checkpoint_memories import read_memories
from citegraph.validator import pipeline
from citegraph.validator.model import Receipt


class PartitionFailed(RuntimeError):
    """Why a partition could not be validated (one line; picklable across processes)."""


@dataclass(frozen=True)
class PartitionTask:
    """What one task needs: plain data, picklable (a Dask task ships it to a worker)."""

    root: str  # the checkpoint directory, readable where the task runs
    part: RepositoryPart
    repo_path: str | None = None  # a clone of the repository, for evidence that needs bytes
    dependency_depth: int = 1

    @property
    def repository_id(self) -> str:
        return self.part.repository_id


def _open_clone(path: str, own: set[str]) -> pygit2.Repository:
    repo = gitrepo.open_repository(path)
    rid = gitrepo.repository_identity(repo).repository_id
    if rid not in own:
        raise PartitionFailed(f"{path} is repository {rid}, not one of {sorted(own)}")
    return repo


def validate_partition(task: PartitionTask) -> dict[str, Any]:
    """Validate every memory of the partition against its snapshot. Returns plain data:
    ``{"repository_id", "snapshot_id", "commit", "memories": [validate's memory JSON +
    "repository_id"]}``; raises ``PartitionFailed`` (the engine retries, then reports it)."""
    try:
        return _validate(task)
    except CitegraphError as err:
        raise PartitionFailed(err.what) from None


def _validate(task: PartitionTask) -> dict[str, Any]:
    part, root = task.part, Path(task.root)
    where = task.root
    rid, snap = part.repository_id, part.snapshot
    tables = {t.name: verify_file(root, part.files[t.name], where) for t in SNAPSHOT_TABLES if t.name in part.files}
    former = tuple(e["repository_id"] for e in part.identity.get("history", []))
    own = {rid, *former}
    records = [rec for _file, _row, rec in read_memories(root, part, where)]
    repo = _open_clone(task.repo_path, own) if task.repo_path else None
    identity = gitrepo.RepoIdentity(rid, part.identity["kind"], part.identity["source"])
    entry = {**snap, "state": "ready", "repository_id": rid}
    state = CheckpointState(repo, identity, snap["commit"], None, snap["snapshot_id"], entry, None, tables=tables,
                            path=rid, at=snap["commit"], _former=former)
    items = [pipeline.MemoryInput(rec["id"], [Receipt(**c) for c in rec["citations"] if c["repository_id"] in own],
                                  rec.get("source_commit")) for rec in records]
    scope = pipeline.Scope([(rid, None)], at=snap["commit"], source=CheckpointSource(state))
    try:
        report = pipeline.validate(None, items, scope, dependency_depth=task.dependency_depth)
    finally:
        state.close()
    report.about = {rec["id"]: {"project": rec["project"], "topic": rec["topic"], "excerpt": excerpt(rec["text"])}
                    for rec in records}
    return {"repository_id": rid, "snapshot_id": snap["snapshot_id"], "commit": snap["commit"],
            "memories": [{**report.memory_json(v), "repository_id": rid} for v in report.verdicts]}
