"""``citegraph batch validate --parquet DIR``: every memory of a checkpoint validated against
the snapshot its manifest names for each repository (SPEC §22; docs/checkpoints.md).

One task per repository partition (memory/batch/partition.py, a plain function), run by an
engine: ``inline`` — one after another in this process — or Dask (memory/batch/
dask_engine.py, the only module that imports it): ``local[:N]`` starts a ``LocalCluster``,
an address attaches to the user's scheduler. Results are written as Parquet (one row per
citation) and JSONL (one line per memory and repository, the shape of ``validate --format
jsonl`` plus the repository), with a summary by repository, project, freshness and outcome.
A partition that fails after its retries is listed under ``failed`` with the reason: never
a silent gap.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from citegraph.graph.checkpoint_manifest import read_manifest
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.batch.partition import PartitionTask, validate_partition
from citegraph.validator.model import OUTCOMES

FRESHNESS = ("fresh", "stale", "unknown")
DEFAULT_RETRIES = 2
CITATION_SCHEMA = pa.schema([
    ("repository_id", pa.string()), ("snapshot_id", pa.string()), ("commit", pa.string()),
    ("memory_id", pa.string()), ("project", pa.string()), ("topic", pa.string()), ("freshness", pa.string()),
    ("citation_id", pa.string()), ("ref", pa.string()), ("locator", pa.string()), ("kind", pa.string()),
    ("path", pa.string()), ("handle", pa.string()), ("outcome", pa.string()), ("reason", pa.string()),
    ("observed_path", pa.string()), ("observed_start_line", pa.int64()), ("observed_end_line", pa.int64()),
    ("observed_handle", pa.string()), ("next_step", pa.string()), ("advisories", pa.int32())])
PartitionFn = Callable[[PartitionTask], dict[str, Any]]


@dataclass(frozen=True)
class Scheduler:
    """Where the partitions run: ``inline``, a ``LocalCluster`` of ``workers`` processes, or
    the scheduler at ``address``."""

    text: str
    workers: int | None = None
    address: str | None = None

    @classmethod
    def parse(cls, text: str) -> Scheduler:
        if text == "inline":
            return cls(text)
        m = re.fullmatch(r"local(?::(\d{1,4}))?", text)
        if m:
            n = int(m.group(1)) if m.group(1) else max(1, os.cpu_count() or 1)
            if n < 1:
                raise CitegraphError(f"--scheduler {text}: a cluster needs at least one worker",
                                     "use local:N with N ≥ 1", code=2)
            return cls(text, workers=n)
        if re.fullmatch(r"(?:[a-z]+://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}", text):
            return cls(text, address=text)
        raise CitegraphError(f"--scheduler {text!r} is not inline, local[:N] or a scheduler address",
                             "pass e.g. --scheduler local:2 or --scheduler tcp://10.0.0.5:8786", code=2)


@dataclass
class Outcome:
    repository_id: str
    result: dict[str, Any] | None
    error: str | None


@dataclass
class BatchReport:
    checkpoint: str
    out: str
    scheduler: str
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.error is not None]

    def memory_lines(self) -> list[dict[str, Any]]:
        return [{**m, "snapshot_id": o.result["snapshot_id"], "commit": o.result["commit"]}
                for o in self.outcomes if o.result for m in o.result["memories"]]

    def summary(self) -> dict[str, Any]:
        lines = self.memory_lines()
        by_id: dict[str, list[dict[str, Any]]] = {}
        by_project: dict[str, list[dict[str, Any]]] = {}
        for m in lines:  # grouped once: a scan per repository was repositories × memories
            by_id.setdefault(m["repository_id"], []).append(m)
            by_project.setdefault(m.get("project") or "", []).append(m)
        by_repo = []
        for o in self.outcomes:
            mine = by_id.get(o.repository_id, [])
            by_repo.append({"repository_id": o.repository_id,
                            "snapshot_id": o.result["snapshot_id"] if o.result else None,
                            "commit": o.result["commit"] if o.result else None,
                            "state": "failed" if o.error else "validated", "error": o.error, **_counts(mine)})
        return {"checkpoint": self.checkpoint, "out": self.out, "scheduler": self.scheduler,
                "seconds": round(self.seconds, 3), "repositories": len(self.outcomes),
                "validated": len(self.outcomes) - len(self.failed),
                "failed": [{"repository_id": o.repository_id, "error": o.error} for o in self.failed],
                **_counts(lines), "by_repository": by_repo,
                "by_project": [{"project": p, **_counts(by_project[p])} for p in sorted(by_project)]}


def _counts(lines: list[dict[str, Any]]) -> dict[str, Any]:
    outcomes = dict.fromkeys(OUTCOMES, 0)
    fresh = dict.fromkeys(FRESHNESS, 0)
    for m in lines:
        fresh[m["freshness"]] += 1
        for c in m["citations"]:
            outcomes[c["outcome"]] += 1
    return {"memories": len(lines), "citations": sum(outcomes.values()), "summary": outcomes,
            "freshness_summary": fresh}


def _clones(repos: list[str]) -> dict[str, str]:
    """repository id → a clone's path, for the evidence that needs bytes."""
    out: dict[str, str] = {}
    for path in repos:
        repo = gitrepo.open_repository(path)
        out.setdefault(gitrepo.repository_identity(repo).repository_id, os.path.abspath(path))
    return out


def run_inline(tasks: list[PartitionTask], fn: PartitionFn, retries: int) -> list[Outcome]:
    """The engine without an engine: each partition in turn, in this process, retried like
    a Dask task (the benchmark's floor: bench/batch_bench.py)."""
    out = []
    for t in tasks:
        error = None
        for _attempt in range(retries + 1):
            try:
                out.append(Outcome(t.repository_id, fn(t), None))
                break
            except Exception as exc:  # a failed partition is reported, like a failed task
                error = f"{type(exc).__name__}: {exc}"
        else:
            out.append(Outcome(t.repository_id, None, error))
    return out


def run_batch(checkpoint: str, *, scheduler: str = "local", out: str | None = None, repos: list[str] | None = None,
              partition_fn: PartitionFn = validate_partition, retries: int = DEFAULT_RETRIES, progress: bool = False,
              dependency_depth: int = 1) -> BatchReport:
    """Validate every partition of the checkpoint at ``checkpoint`` (a directory readable
    where the tasks run); write the results to ``out`` (when given). ``partition_fn``: the
    function each task runs (tests inject one that fails or stalls)."""
    sched = Scheduler.parse(scheduler)
    root = Path(checkpoint).resolve()
    if not root.is_dir():
        raise CitegraphError(f"checkpoint {checkpoint}: not a directory",
                             "pass the directory written by citegraph export --parquet (extract a .tar first)",
                             code=2)
    manifest = read_manifest(root, checkpoint)
    clones = _clones(repos or [])
    tasks = [PartitionTask(str(root), part, clones.get(part.repository_id), dependency_depth)
             for part in manifest.repositories]
    t0 = time.perf_counter()
    if sched.text == "inline":
        outcomes = run_inline(tasks, partition_fn, retries)
    else:
        from citegraph.memory.batch import dask_engine

        outcomes = [Outcome(*r) for r in dask_engine.run(tasks, partition_fn, sched.text, sched.workers, retries,
                                                         progress)]
    report = BatchReport(checkpoint, out or "", sched.text, outcomes, time.perf_counter() - t0)
    if out:
        write_results(report, Path(out))
    return report


def citation_rows(lines: list[dict[str, Any]]) -> dict[str, list]:
    cols: dict[str, list] = {n: [] for n in CITATION_SCHEMA.names}
    for m in lines:
        for c in m["citations"]:
            obs = c.get("observed") or {}
            row = {"repository_id": m["repository_id"], "snapshot_id": m["snapshot_id"], "commit": m["commit"],
                   "memory_id": m["id"], "project": m.get("project"), "topic": m.get("topic"),
                   "freshness": m["freshness"], "citation_id": c["id"], "ref": c["ref"], "locator": c.get("locator"),
                   "kind": c["kind"], "path": c["path"], "handle": c.get("handle"), "outcome": c["outcome"],
                   "reason": c.get("reason"), "observed_path": obs.get("path"),
                   "observed_start_line": obs.get("start_line"), "observed_end_line": obs.get("end_line"),
                   "observed_handle": obs.get("handle"), "next_step": c.get("next_step"),
                   "advisories": len(c.get("advisories", ()))}
            for k, v in row.items():
                cols[k].append(v)
    return cols


def write_results(report: BatchReport, out: Path) -> None:
    """``citations.parquet``, ``memories.jsonl`` and ``summary.json`` in ``out`` (each
    written aside and renamed)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        lines = report.memory_lines()
        tmp = out / f".citations.{os.getpid()}.parquet"
        pq.write_table(pa.table(citation_rows(lines), schema=CITATION_SCHEMA), tmp, compression="zstd")
        os.replace(tmp, out / "citations.parquet")
        _write_text(out / "memories.jsonl", "".join(json.dumps(m, sort_keys=True) + "\n" for m in lines))
        _write_text(out / "summary.json", json.dumps(report.summary(), sort_keys=True, indent=1) + "\n")
    except OSError as exc:
        raise CitegraphError(f"{out}: cannot write the results ({exc.strerror or exc})",
                             "choose a writable --out directory", code=3) from exc


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
