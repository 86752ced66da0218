"""The cold build (graph/extract_pool.py, graph/snapshot_writer.py, graph/facts_cache.py):
the process pool hands rows back as Arrow tables and gives the same snapshot as a
build in one process; a full build writes its rows once (into the snapshot; the facts
cache points there), and later builds reuse them from that snapshot — or parse again
when it is gone. Counted, never timed (figures: bench/RESULTS.md)."""

from __future__ import annotations

import duckdb
from gitutil import GitRepo
from test_incremental import snapshot_meta, snapshot_tables

from citegraph.graph import extract_pool
from citegraph.graph.compaction import compact
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home

N_FILES = 2 * extract_pool.POOL_THRESHOLD + 7  # enough blobs for the pool, several chunks


def _source(i: int, body: str = "return 1") -> str:
    return (f"import os\n\n\nclass C{i}:\n    def run(self):\n        {body}\n\n\n"
            f"def f{i}(x):\n    return os.path.join(x, C{i}().run())\n")


def _repo(repo: GitRepo) -> None:
    for i in range(N_FILES):
        repo.write(f"pkg{i % 5}/m{i}.py", _source(i))
    repo.write("notes.txt", "text\n")
    repo.write("broken.py", "def broken(:\n    pass\n")
    repo.commit("many files")


def _facts(home: Home, res) -> tuple[int, int, set]:
    con = duckdb.connect(str(home.repo(res.repository_id).facts_path), read_only=True)
    try:
        return (con.execute("SELECT count(*) FROM blob_symbols").fetchall()[0][0],
                con.execute("SELECT count(*) FROM blob_edges").fetchall()[0][0],
                {r[0] for r in con.execute("SELECT DISTINCT source FROM blob_files").fetchall()})
    finally:
        con.close()


def test_the_pool_build_is_the_serial_build(repo, tmp_path):
    _repo(repo)
    pool_home, one_home = Home.open(tmp_path / "pool"), Home.open(tmp_path / "one")
    pooled = build_snapshot(repo.root, pool_home, jobs=2)
    serial = build_snapshot(repo.root, one_home, jobs=1)
    assert pooled.stats.extracted_blobs == serial.stats.extracted_blobs == N_FILES + 2
    assert pooled.stats.parses == N_FILES + 1  # every Python file once; the text file is not parsed
    assert snapshot_tables(pool_home, pooled) == snapshot_tables(one_home, serial)
    assert snapshot_meta(pool_home, pooled) == snapshot_meta(one_home, serial)
    tables = snapshot_tables(pool_home, pooled)
    # Rows written once: each table's rows were written exactly once, into the snapshot.
    for table in ("symbols", "edges", "damage"):
        assert pooled.stats.rows_written[table] == len(tables[table]) > 0, table


def test_a_full_build_writes_rows_once_and_later_builds_reuse_them(repo, tmp_path, home):
    _repo(repo)
    first = build_snapshot(repo.root, home, jobs=2)
    # The cache points at the full snapshot; it holds no copy of its rows.
    assert _facts(home, first) == (0, 0, {first.snapshot_id})

    # A commit that moves a file, copies another and changes a third: the moved and
    # copied blobs are re-homed from the full snapshot's rows, the changed one parsed.
    repo.mv("pkg0/m0.py", "moved/m0.py")
    repo.write("copies/m1.py", _source(1))
    repo.write("pkg2/m2.py", _source(2, "return 2"))
    repo.commit("move, copy, change")
    second = build_snapshot(repo.root, home, jobs=1)
    assert second.stats.parses == 1
    assert second.stats.cached_blobs == 2
    # Back to the first file's bytes at its own path: copied from the full snapshot.
    repo.write("pkg2/m2.py", _source(2))
    repo.commit("revert")
    third = build_snapshot(repo.root, home, jobs=1)
    assert third.stats.parses == 0 and third.stats.cached_blobs >= 1
    for res in (second, third):
        clean_home = Home.open(tmp_path / f"clean-{res.snapshot_id}")
        clean = build_snapshot(repo.root, clean_home, rev=res.commit, jobs=1)
        assert snapshot_tables(home, res) == snapshot_tables(clean_home, clean)
        assert snapshot_meta(home, res) == snapshot_meta(clean_home, clean)
    # The delta's own new rows went into the cache (its file holds only the delta).
    syms, _edges, sources = _facts(home, second)
    assert syms > 0 and sources == {first.snapshot_id, None}


def test_a_retired_source_is_parsed_again(repo, tmp_path, home):
    _repo(repo)
    first = build_snapshot(repo.root, home, jobs=2)
    rs = home.repo(first.repository_id)
    # Retire it the way garbage collection does: the file goes, the entry says retired.
    entry = rs.entry(first.snapshot_id)
    rs.snapshot_path(first.snapshot_id).unlink()
    entry["state"] = "retired"
    rs.write_entry(entry)
    repo.git("commit", "-q", "--allow-empty", "-m", "same tree, another commit")
    again = build_snapshot(repo.root, home, jobs=2)
    assert again.stats.cached_blobs == 0 and again.stats.parses == N_FILES + 1
    assert _facts(home, again) == (0, 0, {again.snapshot_id})
    clean_home = Home.open(tmp_path / "clean")
    clean = build_snapshot(repo.root, clean_home, jobs=1)
    assert snapshot_tables(home, again) == snapshot_tables(clean_home, clean)


def test_rows_from_the_pool_are_never_remembered_empty(repo, tmp_path, home):
    """A long-lived builder keeps the rows it extracted (facts_cache.RECENT) to copy them
    again at their path. Rows that came from the pool as Arrow tables are not on their
    results: remembering those would copy a file back without its symbols. Here a file
    changed and compacted into a new base, then reverted, is copied at its own path."""
    _repo(repo)
    build_snapshot(repo.root, home, jobs=2)  # the pool: every blob's rows as Arrow tables
    repo.write("pkg2/m2.py", _source(2, "return 2"))
    repo.commit("change")
    changed = build_snapshot(repo.root, home, jobs=1)
    assert compact(home.repo(changed.repository_id), changed.snapshot_id, repo_path=str(repo.root))
    repo.write("pkg2/m2.py", _source(2))
    repo.commit("revert")
    again = build_snapshot(repo.root, home, jobs=1)
    assert again.stats.parses == 0 and again.stats.cached_blobs == 1
    clean_home = Home.open(tmp_path / "clean")
    clean = build_snapshot(repo.root, clean_home, jobs=1)
    assert snapshot_tables(home, again) == snapshot_tables(clean_home, clean)
