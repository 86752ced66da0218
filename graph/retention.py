"""Garbage collection of snapshots: keep exact-current, the last N, and pinned ones."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path

import duckdb

from citegraph.graph.compaction import compact, newest_due
from citegraph.graph.store import Home, RepoStore, atomic_write_json, pid_alive
from citegraph.indexer.errors import CitegraphError

KEEP_LAST = 5


def pinned_ids(home: Home) -> set[str]:
    """Snapshot ids pinned by worksets (written by ``workset prepare``)."""
    try:
        data = json.loads((home.root / "pins.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return set()
    return {sid for ids in data.values() for sid in ids}


def set_pins(home: Home, owner: str, snapshot_ids: list[str]) -> None:
    path = home.root / "pins.json"
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        data = {}
    data[owner] = sorted(set(snapshot_ids))
    atomic_write_json(path, data)


def _exact_current_ids(home: Home, worktrees: list[str], known: Mapping[str, str] | None = None) -> set[str]:
    """The exact-current snapshot of each worktree: from ``known`` (worktree real path ->
    snapshot id: what a caller that watches the worktree knows) where it has the worktree,
    else by reading the worktree's state (a status scan: seconds on a large monorepo)."""
    from citegraph.graph.current import current_state

    keep = set()
    for wt in worktrees:
        sid = (known or {}).get(os.path.realpath(wt))
        if sid is not None:
            keep.add(sid)
            continue
        try:
            keep.add(current_state(wt, home).snapshot_id)
        except (CitegraphError, OSError, duckdb.Error):
            continue
    return keep


def collect(home: Home, keep_last: int = KEEP_LAST, dry_run: bool = False, compact: bool = True,
            known_current: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Compact each repository's newest delta when it is due (graph/compaction.py), then
    retire snapshots outside the policy; returns {"retired": [...], "kept": [...],
    "busy": [...]}. Each repository is collected under its build lock, so a build never
    loses a file it is publishing; a repository whose build is running is skipped (busy).
    ``known_current``: the exact-current snapshots a caller knows (``_exact_current_ids``)."""
    retired: list[str] = []
    kept: list[str] = []
    busy: list[str] = []
    pins = pinned_ids(home)
    for rid in home.repo_ids():
        rs = home.repo(rid)
        if compact and not dry_run:
            compact_newest(rs)
        try:
            with rs.build_lock(wait_s=LOCK_WAIT_S):
                _collect_repo(home, rs, pins, keep_last, dry_run, retired, kept, known_current)
        except CitegraphError as err:
            if err.kind != "busy":
                raise
            busy.append(rid)
    return {"retired": sorted(retired), "kept": sorted(kept), "busy": busy}


LOCK_WAIT_S = 2.0


def _collect_repo(home: Home, rs: RepoStore, pins: set[str], keep_last: int, dry_run: bool,
                  retired: list[str], kept: list[str], known_current: Mapping[str, str] | None = None) -> None:
    keep = pins | _exact_current_ids(home, rs.repo_info().get("worktrees", []), known_current)
    ready = [e for e in rs.entries() if e["state"] == "ready"]
    ready.sort(key=lambda e: e.get("published_at", 0), reverse=True)
    keep |= {e["snapshot_id"] for e in ready[:keep_last]}
    # A delta snapshot is read through its full base: keep the bases of kept ones.
    keep |= {e["base"] for e in ready if e["snapshot_id"] in keep and e.get("base")}
    for e in rs.entries():
        sid = e["snapshot_id"]
        if e["state"] == "ready" and sid not in keep:
            if not dry_run:
                for f in rs.snapshot_files(sid):
                    f.unlink(missing_ok=True)
                e["state"] = "retired"
                rs.write_entry(e)
            retired.append(sid)
        elif e["state"] == "failed":
            # A failed build, or a snapshot found damaged: its file (if any) goes too.
            if not dry_run:
                for f in rs.snapshot_files(sid):
                    f.unlink(missing_ok=True)
                rs.catalog_path(sid).unlink(missing_ok=True)
            retired.append(sid)
        elif e["state"] == "ready":
            kept.append(sid)
            if not dry_run:
                _drop_superseded(rs, e)
    tmp_dir = rs.root / "tmp"
    leftovers = [*tmp_dir.glob("*.duckdb*"), *tmp_dir.glob("*.parquet")] if tmp_dir.exists() else []
    for tmp in leftovers:
        if tmp.name.startswith("empty-v"):
            continue  # the schema template of new snapshot files
        pid = _pid_of_tmp(tmp)
        if pid is None or not pid_alive(pid):
            if not dry_run:
                tmp.unlink(missing_ok=True)


def _pid_of_tmp(path: Path) -> int | None:
    parts = path.name.split(".")
    for p in parts[1:]:
        if p.isdigit():
            return int(p)
    return None





SUPERSEDED_GRACE_S = 60.0


def _drop_superseded(rs: RepoStore, entry: dict) -> None:
    """Remove a ready snapshot's file in the container it is no longer published in (the
    Parquet delta a compaction replaced, or a compaction's file killed before its catalog
    update) — after a grace period, for readers that read the entry just before."""
    if time.time() - float(entry.get("published_at", 0)) < SUPERSEDED_GRACE_S:
        return
    published = rs.published_path(entry)
    for f in rs.snapshot_files(entry["snapshot_id"]):
        if f != published:
            f.unlink(missing_ok=True)


def compact_newest(rs: RepoStore) -> str | None:
    """Compact the repository's newest delta when it is due; its id, or None."""
    sid = newest_due(rs)
    if sid is None:
        return None
    worktrees = rs.repo_info().get("worktrees", [])
    try:
        done = compact(rs, sid, repo_path=worktrees[0] if worktrees else None)
    except (CitegraphError, OSError, duckdb.Error):
        return None  # compaction is an optimisation: the delta stays as it is
    return sid if done else None
