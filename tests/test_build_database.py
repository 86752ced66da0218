"""A long-lived builder reuses an in-memory DuckDB per repository (graph/snapshot_writer.py
``connect``/``release``): opening one costs more than a one-file delta's own writes. The
service builds each change in a new lane thread, so the reuse must not be per thread. Reuse
must leave nothing behind: a build's temporary tables die with its connection, and a build
that fails with a database still attached closes the instance, so no file stays open."""

from __future__ import annotations

import subprocess
import sys
import threading

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

    sw.BUILD_DATABASES.close_all()
    monkeypatch.setattr(sw.duckdb, "connect", counting)
    yield calls
    sw.BUILD_DATABASES.close_all()


def _commit(repo, i):
    repo.write("a.py", SOURCE.format(i=i))
    repo.write(f"m{i}.py", SOURCE.format(i=i))
    return repo.commit(f"c{i}")


def _in_a_new_thread(fn):
    """Run ``fn`` as the service runs a build: in a thread of its own that then ends."""
    out = {}

    def run():
        try:
            out["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["result"]


def test_builds_share_one_database_across_threads(repo, home, opened):
    for i in range(3):
        _commit(repo, i)
        res = _in_a_new_thread(lambda: build_snapshot(repo.root, home, jobs=1))
        assert res.state == "ready"
    assert opened.count((":memory:",)) == 1
    (spill,) = sw.BUILD_DATABASES.idle()
    assert spill.startswith(str(home.root))


def test_a_failed_build_closes_the_database_and_its_files(repo, home, opened):
    _commit(repo, 0)
    build_snapshot(repo.root, home, jobs=1)
    _commit(repo, 1)

    def fail(stage: str) -> None:
        if stage == "write":  # the snapshot under construction and the facts cache are attached
            raise RuntimeError("injected")

    with pytest.raises(RuntimeError, match="injected"):
        build_snapshot(repo.root, home, jobs=1, hooks=BuildHooks(stall=fail))
    assert sw.BUILD_DATABASES.idle() == []  # closed: it still held a database
    # Another process can open the facts cache read-write (DuckDB excludes every other
    # process while one holds a file).
    (facts,) = list(home.root.glob("repos/*/facts.duckdb"))
    code = f"import duckdb; duckdb.connect({str(facts)!r}).execute('SELECT 1').fetchall()"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0
    res = build_snapshot(repo.root, home, jobs=1)  # the next build opens a new one and succeeds
    assert res.state == "ready" and opened.count((":memory:",)) == 2


def test_idle_databases_are_bounded(tmp_path):
    class Store:  # a repository store as connect sees it: only its root
        def __init__(self, root):
            self.root = root

    sw.BUILD_DATABASES.close_all()
    try:
        for i in range(sw.BUILD_DATABASES.KEEP_IDLE + 2):
            con = sw.connect(Store(tmp_path / f"r{i}"))
            con.execute("CREATE TEMP TABLE t AS SELECT 1")
            sw.release(con)
        idle = sw.BUILD_DATABASES.idle()
        assert len(idle) == sw.BUILD_DATABASES.KEEP_IDLE
        assert idle[-1] == str(tmp_path / f"r{sw.BUILD_DATABASES.KEEP_IDLE + 1}" / "tmp" / "spill")
        again = sw.connect(Store(tmp_path / "r5"))  # a build's temp tables died with its connection
        assert again.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchall() == [(0,)]
        sw.release(again)
    finally:
        sw.BUILD_DATABASES.close_all()
