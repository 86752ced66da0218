"""A long-lived builder reuses one in-memory DuckDB per thread (graph/snapshot_writer.py
``connect``/``release``): opening one costs more than a one-file delta's own writes. Reuse
must leave nothing behind: a build's temporary tables die with its connection, and a build
that fails with a database still attached closes the instance, so no file stays open."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

import citegraph.graph.snapshot_writer as sw
from citegraph.graph.build_hooks import BuildHooks
from citegraph.graph.snapshot_builder import build_snapshot

SOURCE = "def f{i}():\n    return {i}\n"


@pytest.fixture
def opened(monkeypatch):
    """Every in-memory DuckDB instance the builder opens, counted."""
    calls = []
    real = duckdb.connect

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    sw._close_build_db()
    monkeypatch.setattr(sw.duckdb, "connect", counting)
    yield calls
    sw._close_build_db()


def _commit(repo, i):
    repo.write("a.py", SOURCE.format(i=i))
    repo.write(f"m{i}.py", SOURCE.format(i=i))
    return repo.commit(f"c{i}")


def test_builds_in_one_thread_share_one_database(repo, home, opened):
    for i in range(3):
        _commit(repo, i)
        build_snapshot(repo.root, home, jobs=1)
    assert opened.count((":memory:",)) == 1
    names = {r[0] for r in sw._BUILD_DB.db.execute("SELECT database_name FROM duckdb_databases()").fetchall()}
    assert names == {"memory", "system", "temp"}


def test_a_failed_build_closes_the_database_and_its_files(repo, home, opened):
    _commit(repo, 0)
    build_snapshot(repo.root, home, jobs=1)
    _commit(repo, 1)

    def fail(stage: str) -> None:
        if stage == "write":  # the snapshot under construction and the facts cache are attached
            raise RuntimeError("injected")

    with pytest.raises(RuntimeError, match="injected"):
        build_snapshot(repo.root, home, jobs=1, hooks=BuildHooks(stall=fail))
    assert sw._BUILD_DB.db is None  # closed: it still held a database
    # Another process can open the facts cache read-write (DuckDB excludes every other
    # process while one holds a file).
    (facts,) = list(home.root.glob("repos/*/facts.duckdb"))
    code = f"import duckdb; duckdb.connect({str(facts)!r}).execute('SELECT 1').fetchall()"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0
    res = build_snapshot(repo.root, home, jobs=1)  # the next build opens a new one and succeeds
    assert res.state == "ready" and opened.count((":memory:",)) == 2
