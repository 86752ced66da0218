"""Portable checkpoints (SPEC §22; docs/checkpoints.md): ``export --parquet`` and
``import --parquet``.

A checkpoint holds, per repository, one ready commit snapshot (its logical tables:
graph/checkpoint_snapshots.py) and, unless ``--no-memories``, the publishable memories
citing it with their receipts (memory/exchange/checkpoint_memories.py), Parquet
partitioned by repository id, and a manifest with each file's blake3 digest and the schema
and extractor versions (graph/checkpoint_manifest.py).

Import is all or nothing: the whole checkpoint is verified first — the manifest, every
digest, every snapshot (columns, counts, ids, content ids), every memory record with
import's rules and, where a clone has the capture commit, every receipt recomputed — and
only then are the snapshots published and the memories loaded (one transaction, the same
loading as ``import FILE``). A tar is extracted with the ``data`` filter into the data
home's staging directory and removed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citegraph.graph.build_target import resolve_target
from citegraph.graph.checkpoint_manifest import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    CheckpointRefused,
    Manifest,
    RepositoryPart,
    extract_tar,
    read_manifest,
    write_manifest,
)
from citegraph.graph.checkpoint_snapshots import (
    CheckedSnapshot,
    check_snapshot,
    export_snapshot,
    identity_record,
    load_snapshot,
)
from citegraph.graph.identity import former_ids
from citegraph.graph.schema import SNAPSHOT_SCHEMA_VERSION
from citegraph.graph.store import Home, RepoStore
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import EXTRACTOR_VERSION
from citegraph.memory.exchange import share
from citegraph.memory.exchange.checkpoint_memories import cited_ids, read_memories, write_memories
from citegraph.memory.exchange.share import (
    ImportReport,
    Refusal,
    load_records,
    memory_record,
    record_problem,
)
from citegraph.memory.lifecycle.store import MemoryStore

# --- export ----------------------------------------------------------------------------------


@dataclass
class ExportReport:
    out: str
    repositories: list[dict[str, Any]] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)  # memories the publish gate refused
    memories: bool = True
    bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"out": self.out, "format": FORMAT, "format_version": FORMAT_VERSION,
                "schema_version": SNAPSHOT_SCHEMA_VERSION, "extractor_version": EXTRACTOR_VERSION,
                "repositories": self.repositories, "memories": self.memories,
                "refused": [r.to_json() for r in self.refused], "bytes": self.bytes}


def _commit_entry(home: Home, repo_path: str, rev: str | None) -> tuple[RepoStore, dict[str, Any]]:
    """The ready snapshot of ``rev`` (default HEAD) of the repository at ``repo_path``."""
    target = resolve_target(repo_path, rev or "HEAD")
    rs = home.repo(target.identity.repository_id)
    entry = rs.entry(target.snapshot_id)
    if not entry or entry.get("state") != "ready":
        state = "not built" if not entry else f"{entry.get('state')}: {entry.get('reason', '')}".rstrip(": ")
        raise CitegraphError(f"{repo_path}: the snapshot of commit {target.commit[:12]} is {state}; nothing was "
                             "exported", f"run citegraph index {repo_path} --rev {rev or 'HEAD'} first", code=1,
                             retryable=True)
    return rs, entry


def _newest_commit_entry(rs: RepoStore) -> dict[str, Any] | None:
    """The most recently built ready commit snapshot of this citegraph's versions."""
    ready = [e for e in rs.entries() if e["state"] == "ready" and e.get("kind") == "commit"
             and e.get("extractor_version") == EXTRACTOR_VERSION and e.get("schema_version") == SNAPSHOT_SCHEMA_VERSION]
    return max(ready, key=lambda e: (e.get("created_at", 0), e["snapshot_id"])) if ready else None


def _publishable(home: Home) -> tuple[list[dict[str, Any]], list[Refusal]]:
    """Durable, active memories as publish writes them (records), and the refused ones."""
    with MemoryStore.open(home) as ms:
        mems = ms.load(where="kind = 'durable' AND status = 'active'", order="project, topic, id")
    records, refused = [], []
    for m in mems:
        rec = memory_record(m)
        if not rec["citations"]:
            continue  # no repository to travel with: publish's JSONL carries it
        problem = record_problem(rec)
        if problem:
            refused.append(Refusal(m.id, *problem))
        else:
            records.append(rec)
    return records, refused


def export_checkpoint(home: Home, out: str, *, repo_paths: list[str] | None = None, all_repos: bool = False,
                      rev: str | None = None, memories: bool = True) -> ExportReport:
    """Write a checkpoint of the selected repositories' snapshots (and memories) to ``out``:
    a directory that must not exist or be empty, or ``*.tar``. Written aside, renamed last."""
    if all_repos and (repo_paths or rev):
        raise CitegraphError("--all exports the newest commit snapshot of every repository; it takes no --repo "
                             "or --rev", "drop --all, or --repo/--rev", code=2)
    chosen: list[tuple[RepoStore, dict[str, Any]]] = []
    if all_repos:
        for rid in home.repo_ids():
            rs = home.repo(rid)
            entry = _newest_commit_entry(rs)
            if entry is not None:
                chosen.append((rs, entry))
    else:
        seen: set[str] = set()
        for path in repo_paths or ["."]:
            rs, entry = _commit_entry(home, path, rev)
            if rs.repository_id not in seen:
                seen.add(rs.repository_id)
                chosen.append((rs, entry))
    if not chosen:
        raise CitegraphError("no ready commit snapshot to export; nothing was exported",
                             "run citegraph index --rev HEAD in the repositories first", code=1)
    dest = Path(out)
    tar = dest.name.endswith(".tar")
    if not tar and dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise CitegraphError(f"{out}: exists and is not an empty directory; nothing was exported",
                             "choose a new directory (or a .tar file) for --parquet", code=2)
    stage = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    report = ExportReport(out, memories=memories)
    try:
        stage.mkdir(parents=True)
        records, report.refused = _publishable(home) if memories else ([], [])
        manifest = Manifest(generator=f"citegraph {share.citegraph_version()}", exported_at=round(time.time(), 3))
        for rs, entry in chosen:
            snapshot, files = export_snapshot(rs, entry, stage)
            part = RepositoryPart(rs.repository_id, identity_record(rs), snapshot, files, memories)
            mine = 0
            if memories:
                own = {rs.repository_id, *former_ids(home, rs.repository_id)}
                held = [r for r in records if cited_ids(r) & own]
                files.update(write_memories(held, stage, rs.repository_id))
                mine = len(held)
            manifest.repositories.append(part)
            size = sum(f.bytes for f in files.values())
            report.bytes += size
            report.repositories.append({"repository_id": rs.repository_id, "snapshot_id": entry["snapshot_id"],
                                        "commit": entry["commit"], "files": entry.get("files", 0),
                                        "symbols": entry.get("symbols", 0), "memories": mine,
                                        "snapshot_bytes": int(entry.get("bytes", 0)), "bytes": size})
        write_manifest(stage, manifest)
        if tar:
            _write_tar(stage, manifest, dest)
        else:
            with contextlib.suppress(FileNotFoundError):
                dest.rmdir()  # empty (checked above)
            os.replace(stage, dest)
    except OSError as exc:
        raise CitegraphError(f"{out}: cannot write the checkpoint ({exc.strerror or exc}); nothing was exported",
                             "choose a writable --parquet path with room for it", code=3) from exc
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return report


def _write_tar(stage: Path, manifest: Manifest, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    try:
        with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as t:
            t.add(stage / MANIFEST, arcname=MANIFEST)
            for part in manifest.repositories:
                for rec in sorted(part.files.values(), key=lambda r: r.path):
                    t.add(stage / rec.path, arcname=rec.path)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


# --- import ----------------------------------------------------------------------------------


@dataclass
class CheckpointImportReport:
    checkpoint: str
    repositories: list[dict[str, Any]] = field(default_factory=list)
    memories: ImportReport | None = None

    def to_json(self) -> dict[str, Any]:
        mem = self.memories.to_json() if self.memories else None
        if mem:
            for k in ("file", "format", "format_version"):
                mem.pop(k, None)
        return {"checkpoint": self.checkpoint, "format": FORMAT, "format_version": FORMAT_VERSION,
                "repositories": self.repositories, "memories": mem}


@contextlib.contextmanager
def opened(home: Home, source: str):
    """The checkpoint's root directory: ``source`` itself, or a tar extracted into the data
    home's staging directory (removed afterwards)."""
    src = Path(source)
    if src.is_dir():
        yield src
        return
    if not src.is_file():
        raise CitegraphError(f"checkpoint {source}: no such directory or file; nothing was imported",
                             "pass the directory (or .tar) written by citegraph export --parquet", code=2)
    stage = home.root / "tmp" / f"checkpoint.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        stage.mkdir(parents=True)
        extract_tar(src, stage)
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def verify_checkpoint(root: Path, where: str) -> tuple[Manifest, list[CheckedSnapshot],
                                                        list[tuple[str, int, dict[str, Any]]]]:
    """Everything a checkpoint holds, verified (raises on the first problem, by name)."""
    manifest = read_manifest(root, where)
    checked = [check_snapshot(root, part, where) for part in manifest.repositories]
    records: dict[str, tuple[str, int, dict[str, Any]]] = {}
    for part in manifest.repositories:
        for file, row, rec in read_memories(root, part, where):
            prior = records.get(rec["id"])
            if prior is not None and prior[2] != rec:
                raise CheckpointRefused(where, f"memory {rec['id']} differs between {prior[0]} and {file}")
            records.setdefault(rec["id"], (file, row, rec))
    seen: set[tuple[str, str]] = set()
    for file, row, rec in records.values():  # one (project, topic) across partitions too
        share.check_record(file, row, rec, seen)
    return manifest, checked, list(records.values())


def import_checkpoint(home: Home, source: str, repos: list[str] | None = None) -> CheckpointImportReport:
    """Verify the checkpoint at ``source`` completely, then publish its snapshots (ready,
    same ids) and load its memories; nothing is imported if anything does not verify."""
    report = CheckpointImportReport(source)
    with opened(home, source) as root:
        manifest, checked, records = verify_checkpoint(root, source)
        mem = ImportReport(source, share.FORMAT, share.FORMAT_VERSION)
        by_file: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for file, row, rec in records:
            by_file.setdefault(file, []).append((row, rec))
        for file, rows in by_file.items():
            share.verify_records(home, file, rows, repos, mem)
        for c in checked:
            state = load_snapshot(home, c)
            report.repositories.append({"repository_id": c.part.repository_id, "snapshot_id": c.snapshot_id,
                                        "commit": c.part.snapshot["commit"], "state": state})
        if any(p.memories for p in manifest.repositories):
            load_records(home, [rec for _f, _r, rec in records], mem)
            report.memories = mem
    return report
