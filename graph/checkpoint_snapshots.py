"""Snapshots in and out of checkpoints (docs/checkpoints.md).

**Export** writes the *logical* tables of a ready commit snapshot — read through
graph/snapshot_reader.py, so a delta is laid over its base exactly as readers see it — one
Parquet file per table of graph/schema.py, rows in path order, with the catalog fields
that identify it (snapshot id, commit, configuration fingerprint, versions, content id).

**Import** first checks a partition completely (``check_snapshot``: every file's digest,
its columns and types against graph/schema.py, row counts, the snapshot id recomputed from
repository, commit and configuration, the content id recomputed from the file rows, a
commit snapshot's meta), then writes it as a *full* snapshot with the builder's writer and
publisher (``load_snapshot``: a DuckDB file in ``tmp/``, the indexes, fsync, rename,
catalog ``ready``). Same id, same content id, same rows: the next ``index`` of that commit
reuses it and the next commit builds as a delta over it. Like a cold build, the import
records the snapshot's file facts in the facts cache with the snapshot as their
``source`` (graph/facts_cache.py), so a later delta copies the rows of a known blob instead
of parsing it again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from citegraph.graph import build_inventory as inv
from citegraph.graph import coverage_summary, delta_resolution, facts_cache
from citegraph.graph.build_hooks import BuildStats
from citegraph.graph.build_inventory import PATH_REASONS, TRANSIENT_REASONS
from citegraph.graph.build_publish import publish_entry, publish_file, tmp_path
from citegraph.graph.build_target import snapshot_id_of
from citegraph.graph.checkpoint_manifest import (
    CheckpointRefused,
    FileRecord,
    RepositoryPart,
    file_digest,
    member_path,
    partition_dir,
    verify_file,
)
from citegraph.graph.identity import HEX32, history
from citegraph.graph.schema import (
    IMPORT_TARGETS_LAYOUT,
    RESOLVED_EDGES_INDEXES,
    SNAPSHOT_INDEXES,
    SNAPSHOT_SCHEMA_VERSION,
    SNAPSHOT_TABLES,
    Table,
)
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.snapshot_writer import SnapshotWriter, close_snapshot, open_snapshot, sql_str
from citegraph.graph.snapshot_writer import connect as writer_connect
from citegraph.graph.snapshot_writer import release as release_connection
from citegraph.graph.store import Home, RepoStore
from citegraph.indexer.extract import EXTRACTOR_VERSION

SNAPSHOT_FIELDS = ("snapshot_id", "kind", "commit", "config", "extractor_version", "schema_version", "content_id",
                   "files", "symbols", "inventory_complete")

# --- export ----------------------------------------------------------------------------------


def _export_sql(t: Table) -> str:
    """The logical rows of table ``t`` of an open snapshot, typed by its spec, in a stable
    order (path first: an imported full snapshot lies clustered by path like a built one)."""
    cols = ", ".join(f"CAST({c.name} AS {c.sql_type}) AS {c.name}" for c in t.columns)
    if t.name == "meta":  # an imported snapshot is a full one: it has no base
        # (and holds its import targets whole: the export reads them through the layered view)
        return (f"SELECT key, CASE WHEN key = 'base' THEN '' ELSE value END AS value FROM meta "
                f"WHERE key <> '{IMPORT_TARGETS_LAYOUT}' ORDER BY key")
    if t.name == "overrides":
        # A full commit snapshot lists the paths a delta over it must redo: its transient
        # skips (snapshot_builder.full_redo_paths; a commit snapshot has no dirty rows).
        reasons = ", ".join(f"'{r}'" for r in TRANSIENT_REASONS)
        return f"SELECT path FROM files WHERE dirty OR reason IN ({reasons}) ORDER BY path"
    order = ", ".join(["path", *(c.name for c in t.columns if c.name != "path")]) if "path" in t.names \
        else ", ".join(t.names)
    return f"SELECT {cols} FROM {t.name} ORDER BY {order}"


def identity_record(rs: RepoStore) -> dict[str, Any]:
    """The repository's identity as the data home knows it: kind, source and the identity
    history (graph/identity.py), which routes citations captured under former ids."""
    info = rs.repo_info()
    return {"kind": info.get("kind") if info.get("kind") in ("remote", "local") else "local",
            "source": str(info.get("source") or ""), "history": history(rs)}


def export_snapshot(rs: RepoStore, entry: dict[str, Any], root: Path) -> tuple[dict[str, Any], dict[str, FileRecord]]:
    """Write the tables of the ready commit snapshot ``entry`` under ``root`` (its partition
    directory); returns its catalog fields and the files written."""
    sid = entry["snapshot_id"]
    (root / partition_dir(rs.repository_id)).mkdir(parents=True, exist_ok=True)
    files: dict[str, FileRecord] = {}
    with Snapshot.open(rs, sid) as snap:
        for t in SNAPSHOT_TABLES:
            rel = member_path(rs.repository_id, t.name)
            dest = root / rel
            snap.con.execute(f"COPY ({_export_sql(t)}) TO {sql_str(dest)} (FORMAT parquet, COMPRESSION zstd)")
            digest, size = file_digest(dest)
            files[t.name] = FileRecord(rel, t.name, digest, size, pq.ParquetFile(dest).metadata.num_rows)
    return {k: entry.get(k) for k in SNAPSHOT_FIELDS}, files


# --- import: check ---------------------------------------------------------------------------


@dataclass
class CheckedSnapshot:
    """A partition's snapshot that verified: its files and the catalog summary computed
    from its rows (never taken from the manifest)."""

    part: RepositoryPart
    paths: dict[str, Path]
    summary: dict[str, Any]
    facts: list[tuple[str, str, str]] = field(default_factory=list)  # (blob, language, origin path)

    @property
    def snapshot_id(self) -> str:
        return str(self.part.snapshot["snapshot_id"])


def _same_types(got: pa.Schema, want: pa.Schema) -> bool:
    return got.names == want.names and all(got.field(n).type == want.field(n).type for n in want.names)


def check_snapshot(root: Path, part: RepositoryPart, where: str) -> CheckedSnapshot:
    """Verify the snapshot of one partition; raise ``CheckpointRefused`` naming the file
    and the problem."""
    rid, snap = part.repository_id, part.snapshot
    paths: dict[str, Path] = {}
    for t in SNAPSHOT_TABLES:
        rec = part.files.get(t.name)
        if rec is None:
            raise CheckpointRefused(where, f"repository {rid}: the manifest lists no {t.name} table "
                                           f"({member_path(rid, t.name)} is missing)")
        path = verify_file(root, rec, where)
        try:
            meta = pq.ParquetFile(path)
            schema, rows = meta.schema_arrow, meta.metadata.num_rows
        except (OSError, pa.ArrowException) as exc:
            raise CheckpointRefused(where, f"{rec.path} is not a Parquet file ({exc})") from None
        if not _same_types(schema, t.arrow_schema):
            raise CheckpointRefused(where, f"{rec.path} does not have the columns of the {t.name} table of "
                                           f"schema {SNAPSHOT_SCHEMA_VERSION} (graph/schema.py)")
        if rows != rec.rows:
            raise CheckpointRefused(where, f"{rec.path} holds {rows} rows, the manifest lists {rec.rows}")
        paths[t.name] = path
    sid = snap["snapshot_id"]
    if snapshot_id_of(rid, snap["commit"], None, snap["config"]) != sid:
        raise CheckpointRefused(where, f"snapshot {sid} is not the id of repository {rid}'s commit "
                                       f"{snap['commit'][:12]} under its configuration and this citegraph's versions")
    m = pq.read_table(paths["meta"]).to_pydict()
    meta = dict(zip(m["key"], m["value"], strict=True))
    want = {"snapshot_id": sid, "repository_id": rid, "commit": snap["commit"], "dirty_fingerprint": "",
            "extractor_version": EXTRACTOR_VERSION, "schema_version": str(SNAPSHOT_SCHEMA_VERSION),
            "content_id": snap["content_id"], "inventory_complete": "true" if snap["inventory_complete"] else "false",
            "base": ""}
    for k, v in want.items():
        if meta.get(k) != v:
            raise CheckpointRefused(where, f"{part.files['meta'].path}: {k} is {meta.get(k)!r}, the manifest's "
                                           f"snapshot says {v!r}")
    files = pq.read_table(paths["files"], columns=["path", "blob_id", "language", "status", "reason", "mode",
                                                   "dirty"]).to_pydict()
    n = len(files["path"])
    total, facts, seen = 0, [], set()
    for path, blob, lang, status, reason, mode, dirty in zip(*files.values(), strict=True):
        if dirty:
            raise CheckpointRefused(where, f"{part.files['files'].path}: {path} is dirty in a commit snapshot")
        total += inv.row_digest(path, blob, lang, status, reason, mode, dirty)
        key = (blob, lang or "")
        if reason not in PATH_REASONS and reason not in TRANSIENT_REASONS and key not in seen:
            seen.add(key)  # rows are in path order: the first path is the origin, as in a build
            facts.append((blob, lang or "", path))
    content = inv.content_id(total)
    if content != snap["content_id"] or n != snap["files"] or len(set(files["path"])) != n:
        raise CheckpointRefused(where, f"{part.files['files'].path}: the file rows do not add up to the snapshot's "
                                       f"content id {snap['content_id']} and {snap['files']} files")
    if part.files["symbols"].rows != snap["symbols"]:
        raise CheckpointRefused(where, f"{part.files['symbols'].path}: {part.files['symbols'].rows} symbols, the "
                                       f"snapshot lists {snap['symbols']}")
    counts, causes = coverage_summary.split(coverage_summary.summarize(
        zip(files["language"], files["status"], files["reason"], strict=True)))
    summary = {"files": n, "symbols": int(snap["symbols"]), "content_id": content, "content_sum": content,
               "inventory_complete": bool(snap["inventory_complete"]), "layout": "full",
               "coverage": counts, "coverage_causes": causes}
    return CheckedSnapshot(part, paths, summary, facts)


# --- import: load ------------------------------------------------------------------------------


def _identity_info(rs: RepoStore, part: RepositoryPart) -> dict[str, Any]:
    have = history(rs)
    known = {e["repository_id"] for e in have}
    added = [e for e in part.identity.get("history", []) if HEX32.match(e["repository_id"])
             and e["repository_id"] not in known and e["repository_id"] != rs.repository_id]
    info = {"repository_id": rs.repository_id, "kind": part.identity["kind"], "source": part.identity["source"]}
    if added:
        info["identity_history"] = (have + added)[-64:]
    return info


def load_snapshot(home: Home, checked: CheckedSnapshot) -> str:
    """Publish a checked snapshot as a ready full snapshot of this home (``imported``), or
    leave the one already there (``present``: ids name content, so it is the same)."""
    part, sid = checked.part, checked.snapshot_id
    rs = home.repo(part.repository_id)
    rs.ensure()
    rs.write_repo_info(_identity_info(rs, part))
    existing = rs.entry(sid)
    if existing and existing["state"] == "ready":
        return "present"
    with rs.build_lock():
        existing = rs.entry(sid)
        if existing and existing["state"] == "ready":
            return "present"
        s = part.snapshot
        entry: dict[str, Any] = {
            "snapshot_id": sid, "repository_id": part.repository_id, "kind": "commit", "commit": s["commit"],
            "dirty_fingerprint": None, "extractor_version": EXTRACTOR_VERSION, "config": s["config"],
            "schema_version": SNAPSHOT_SCHEMA_VERSION}
        publish_entry(rs, entry, lambda op: {**checked.summary, "bytes": _write(rs, checked, op)})
    return "imported"


def _write(rs: RepoStore, checked: CheckedSnapshot, op: str) -> int:
    """The full snapshot file, written aside and published (its size)."""
    sid = checked.snapshot_id
    tmp = tmp_path(rs, sid, "duckdb", op)
    out = writer_connect(rs)
    try:
        out.execute(f"SET threads = {max(1, os.cpu_count() or 1)}")
        open_snapshot(out, rs, tmp, "duckdb")
        writer = SnapshotWriter(out, BuildStats())
        for t in SNAPSHOT_TABLES:
            writer.copy(t.name, f"SELECT {', '.join(t.names)} FROM read_parquet({sql_str(checked.paths[t.name])})")
        out.execute(SNAPSHOT_INDEXES)
        out.execute(RESOLVED_EDGES_INDEXES)
        delta_resolution.write_keys(out)  # derived from the rows, never exported
        facts_cache.attach(out, rs)
        known = facts_cache.lookup(out, [(b, lang) for b, lang, _ in checked.facts])
        facts_cache.remember(out, [k for k in checked.facts if (k[0], k[1]) not in known], source=sid)
        facts_cache.detach(out)
        close_snapshot(out, tmp, "duckdb")
    finally:
        release_connection(out)
    return publish_file(tmp, rs.snapshot_path(sid))
