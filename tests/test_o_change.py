"""Incremental cost O(change), proved by counting (issue 16, acceptance 2): a one-file
commit in a 20,000-file repository reads one blob, parses one file, lists no inventory,
reads one row of the base's file table, and writes rows only for that file.

The repository is generated with ``git fast-import`` (small files in three languages, so
the cold build that makes the base takes seconds; the counts do not depend on file size).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from gitutil import GIT_ENV
from service_helpers import TIMEOUT, ServeProc

import citegraph.graph.extract_pool as ep
import citegraph.indexer.blob_facts as bf
from citegraph.graph import compaction
from citegraph.graph.build_hooks import BuildHooks
from citegraph.graph.retention import collect
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo

PROFILE_LAUNCHER = str(Path(__file__).parent / "profile_launcher.py")
N_FILES = 20_000
CHANGED = "pkg007/mod_00122.py"


def source(i: int, ext: str, extra: str = "") -> bytes:
    if ext == "py":
        text = f"import os\n\n\nclass C{i}:\n    def run(self):\n        return f{i}()\n\n\ndef f{i}():\n    return {i}\n"
    elif ext == "go":
        text = f"package p\n\nfunc F{i}() int {{\n\treturn G{i}()\n}}\n"
    else:
        text = f"export function f{i}(): number {{\n  return g{i}();\n}}\n"
    return (text + extra).encode()


def fast_import(root: Path, files: dict[str, bytes], message: str, parent: bool) -> str:
    lines: list[bytes] = [b"commit refs/heads/main\n", b"committer T <t@e.x> 1764547200 +0000\n",
                          f"data {len(message)}\n{message}\n".encode()]
    if parent:
        lines.append(b"from refs/heads/main^0\n")
    for path, data in files.items():
        lines.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode())
        lines += [data, b"\n"]
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input=b"".join(lines), check=True,
                   env={**GIT_ENV, "PATH": "/usr/bin:/bin"})
    return subprocess.run(["git", "rev-parse", "main"], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A 20k-file repository (not checked out), its cold build, and a one-file commit."""
    root = tmp_path_factory.mktemp("gen20k")
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    exts = ("py", "go", "ts")
    files = {}
    for i in range(N_FILES):
        ext = exts[i % 3]
        files[f"pkg{i // 1000:03d}/mod_{i % 1000:05d}.{ext}"] = source(i, ext)
    assert CHANGED in files
    c1 = fast_import(root, files, "c1", parent=False)
    home = Home.open(tmp_path_factory.mktemp("home20k"))
    first = build_snapshot(root, home, rev=c1)
    assert first.files == N_FILES
    c2 = fast_import(root, {CHANGED: source(7122, "py", "\n\ndef added():\n    return added\n")}, "c2",
                     parent=True)
    return root, home, first, c2


def test_one_file_commit_costs_one_file(big, monkeypatch):
    root, home, first, c2 = big
    parses = Counter(bf.extract)
    blob_facts = Counter(ep.facts_for_blob)
    inventories = Counter(gitrepo.commit_inventory)
    monkeypatch.setattr(bf, "extract", parses)
    monkeypatch.setattr(ep, "facts_for_blob", blob_facts)
    monkeypatch.setattr(gitrepo, "commit_inventory", inventories)

    res = build_snapshot(root, home, rev=c2, jobs=1)
    stats = res.stats
    assert not res.reused and res.files == N_FILES
    # One blob read and parsed; the inventory never listed; one base row looked up.
    assert stats.blob_reads == 1 and stats.parses == 1 and stats.extracted_blobs == 1
    assert parses.n == 1 and blob_facts.n == 1
    assert inventories.n == 0
    assert stats.base_rows_read == 1
    assert stats.copied_files == N_FILES - 1

    # Rows written only for the changed file: one file row, one override, its symbols
    # and edges (and the constant metadata), nothing for the other 19,999 files.
    rs = home.repo(res.repository_id)
    with Snapshot.open(rs, res.snapshot_id) as snap:
        symbols = snap.query("SELECT count(*) FROM symbols WHERE path = ?", [CHANGED])[0][0]
        edges = snap.query("SELECT count(*) FROM edges WHERE path = ?", [CHANGED])[0][0]
    assert symbols == 4  # C7122, C7122.run, f7122, added
    written = dict(stats.rows_written)
    meta = written.pop("meta")
    assert written == {"files": 1, "overrides": 1, "symbols": symbols, "edges": edges}
    assert meta <= 12
    entry = rs.entry(res.snapshot_id)
    own = own_rows(rs, entry)
    for table in ("files", "symbols", "edges", "overrides"):
        assert own[table] and {r[0] for r in own[table]} == {CHANGED}, table
    assert own["damage"] == [] and own["contents"] == []
    # ... in a container of kilobytes (target: 256 KiB; an empty DuckDB file is 268 KiB).
    assert entry["bytes"] == rs.published_path(entry).stat().st_size <= 32 * 1024


def own_rows(rs, entry: dict) -> dict[str, list[tuple]]:
    """The rows a delta holds itself (not those read through from its base), read straight
    from its published file: each table's path column (blob id for contents)."""
    assert entry["container"] == "parquet"
    con = duckdb.connect(":memory:")
    try:
        f = str(rs.published_path(entry))
        return {t: con.execute(f"SELECT {'blob_id' if t == 'contents' else 'path'} FROM read_parquet(?) "
                               "WHERE tbl = ?", [f, t]).fetchall()
                for t in ("files", "symbols", "edges", "overrides", "damage", "contents")}
    finally:
        con.close()


class Counter:
    def __init__(self, fn):
        self.fn, self.n = fn, 0

    def __call__(self, *a, **k):
        self.n += 1
        return self.fn(*a, **k)


def test_a_grown_delta_is_compacted_and_the_next_commit_costs_one_file(repo, home, monkeypatch):
    """Deltas over one base grow with the distance from it; once the newest holds
    COMPACT_MIN_PATHS paths, gc compacts it into a new base, and the next one-file commit
    layers over that: one parse, one file row, one override."""
    monkeypatch.setattr(compaction, "COMPACT_MIN_PATHS", 3)
    for name in "abcde":
        repo.write(f"{name}.py", f"def {name}():\n    return 1\n")
    repo.commit("c1")
    build_snapshot(repo.root, home, jobs=1)
    for name in "abc":
        repo.write(f"{name}.py", f"def {name}():\n    return 2\n")
    repo.commit("c2")
    s2 = build_snapshot(repo.root, home, jobs=1)
    rs = home.repo(s2.repository_id)
    grown = rs.entry(s2.snapshot_id)
    assert grown["layout"] == "delta" and grown["delta_paths"] == 3
    assert compaction.newest_due(rs) == s2.snapshot_id
    collect(home)
    full = rs.entry(s2.snapshot_id)
    assert full["layout"] == "full" and "base" not in full and full["content_id"] == grown["content_id"]
    repo.write("d.py", "def d():\n    return 3\n")
    repo.commit("c3")
    s3 = build_snapshot(repo.root, home, jobs=1)
    top = rs.entry(s3.snapshot_id)
    assert top["base"] == s2.snapshot_id and top["delta_paths"] == 1
    assert s3.stats.parses == 1 and s3.stats.rows_written["files"] == 1
    assert compaction.newest_due(rs) is None


# --- edge resolution and import targets in O(change) (issue 21, acceptance 1) ------------------

RESOLUTION_ROWS = 1_000  # rows DuckDB may scan over a delta's whole resolution (the whole-union one: 173k)


def profiled_build(root, home, **kw):
    """Build with every statement of the delta's edge resolution profiled by DuckDB."""
    seen: list[tuple[str, int]] = []
    res = build_snapshot(root, home, jobs=1, hooks=BuildHooks(
        statement=lambda label, q: seen.append((label, int(q.get("total_rows_scanned") or 0)))), **kw)
    return res, seen


def assert_resolution_costs_the_change(rs, snapshot_id: str, seen: list[tuple[str, int]], changed: str) -> None:
    labels = [label for label, _ in seen]
    assert "affected edges" in labels and "resolved edges" in labels, labels  # the O(change) path ran
    scanned = sum(n for _, n in seen)
    assert scanned <= RESOLUTION_ROWS, sorted(seen, key=lambda s: -s[1])[:5]
    entry = rs.entry(snapshot_id)
    assert entry["layout"] == "delta" and entry["files"] == N_FILES
    con = duckdb.connect(":memory:")
    try:
        f = str(rs.published_path(entry))
        own = {t: con.execute("SELECT DISTINCT path FROM read_parquet(?) WHERE tbl = ?", [f, t]).fetchall()
               for t in ("resolved_edges", "import_targets")}
    finally:
        con.close()
    # Derived rows written for the changed file only (nothing else's resolution moved).
    assert own["resolved_edges"] == [(changed,)] and own["import_targets"] in ([], [(changed,)]), own
    with Snapshot.open(rs, snapshot_id) as snap:
        calls = dict(snap.query("SELECT target, tier || ' ' || coalesce(target_path, '') FROM resolved_edges "
                                "WHERE path = ? AND kind = 'calls'", [changed]))
    # f7125 is defined once, in another file: the repository level, from the base's keys.
    assert calls["f7125"] == "name-only pkg007/mod_00125.py", calls


def test_one_file_commit_resolves_edges_in_o_change(big):
    """A one-file commit's edge resolution and import targets read only the changed file's
    rows and the keys of the names it touches: ``run`` has 6,667 definitions, ``f7125``
    one elsewhere, ``added2`` is new — and DuckDB's own profile of every statement counts
    the rows scanned (the whole-union computation this replaced scanned 173,499)."""
    root, home, _first, _ = big
    c3 = fast_import(root, {CHANGED: source(7122, "py", "\n\ndef added2():\n    return added2() + f7125()\n")},
                     "c3", parent=True)
    res, seen = profiled_build(root, home, rev=c3)
    assert not res.reused
    assert_resolution_costs_the_change(home.repo(res.repository_id), res.snapshot_id, seen, CHANGED)


def test_one_file_edit_through_the_service_resolves_edges_in_o_change(big, tmp_path):
    """The same for an edit seen by a running ``serve`` (its builds profiled through
    tests/profile_launcher.py): the dirty overlay it builds reads only the edited file's
    rows and the keys of the names it touches."""
    root, home, first, _ = big
    env = {**GIT_ENV, "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=root, check=True, env=env)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()
    prof = tmp_path / "statements.jsonl"
    svc = ServeProc(home, tmp_path / "serve.log", str(root), launcher=[sys.executable, PROFILE_LAUNCHER, str(prof)])
    try:
        status(home, root, head, dirty=False)
        prof.unlink(missing_ok=True)  # the builds before the edit (its commit's, if any)
        (root / CHANGED).write_bytes(source(7122, "py", "\n\ndef edited():\n    return f7125() + run()\n"))
        st = status(home, root, head, dirty=True)
    finally:
        assert svc.stop() == 0, svc.log()
    seen = [(d["label"], d["rows"]) for d in map(json.loads, prof.read_text().splitlines())]
    assert_resolution_costs_the_change(home.repo(first.repository_id), st["snapshot_id"], seen, CHANGED)


def status(home, root, head: str, dirty: bool) -> dict:
    """``citegraph status --json`` until the service has the state (head, dirty) exact-current."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        p = subprocess.run([sys.executable, "-m", "citegraph.cli.main", "status", "--json", str(root)],
                           capture_output=True, text=True, env={**os.environ, "CITEGRAPH_HOME": str(home.root)})
        st = json.loads(p.stdout) if p.returncode in (0, 1) and p.stdout.strip() else {}
        if st.get("exact_current") and st.get("head") == head and st.get("dirty") == dirty:
            return st
        assert time.monotonic() < deadline, (p.stdout, p.stderr)
        time.sleep(0.1)
