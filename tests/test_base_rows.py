"""The base rows a delta's resolution keeps between deltas (graph/base_rows.py): whatever
the sequence of lookups, each returns exactly the rows a direct query returns, reads from
DuckDB only keys it has not seen, and never answers for a different base file."""

from __future__ import annotations

import os
import time
from collections import Counter

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from citegraph.graph.base_rows import BaseRows

PATHS = [f"d{i % 3}/f{i}.py" for i in range(12)]


def _base(path, rows) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE edges(path VARCHAR, target VARCHAR, line INTEGER)")
    con.execute("INSERT INTO edges SELECT * FROM (VALUES " + ", ".join(
        f"('{p}', '{t}', {n})" for p, t, n in rows) + ")" if rows else "SELECT 1")
    con.close()


def _fetcher(con, seen):
    def fetch(label, sql, params=None):
        seen.append(label)
        return con.sql(sql, params=params).to_arrow_table()
    return fetch


rows_st = st.lists(st.tuples(st.sampled_from(PATHS), st.sampled_from(["a", "b.c", "d"]), st.integers(1, 9)),
                   min_size=1, max_size=30)


@settings(max_examples=40, deadline=None)
@given(rows=rows_st, lookups=st.lists(st.lists(st.sampled_from([*PATHS, "gone.py"]), max_size=8), min_size=1,
                                      max_size=6))
def test_every_lookup_equals_the_direct_query_and_reads_only_unseen_keys(tmp_path_factory, rows, lookups):
    path = tmp_path_factory.mktemp("base") / "base.duckdb"
    _base(path, rows)
    con = duckdb.connect()
    con.execute(f"ATTACH '{path}' AS b (READ_ONLY)")
    cache, seen = BaseRows(), []
    fetch = _fetcher(con, seen)
    read: set[str] = set()
    for keys in lookups:
        got = cache.lookup(fetch, str(path), "b", "edges", "line, path, target", "path", keys, "edges")
        want = con.execute("SELECT line, path, target FROM b.edges WHERE path IN (SELECT unnest($k))",
                           {"k": keys}).fetchall()
        assert Counter(zip(*got.to_pydict().values(), strict=True)) == Counter(want)
        assert got.column_names == ["line", "path", "target"]
        new = set(keys) - read
        assert cache.reads == len(read | new)  # each key read from DuckDB once
        read |= new


def test_a_rewritten_base_file_is_a_different_base(tmp_path):
    """The rows are the base file's: the same path rewritten (a compaction publishes a new
    full file; a GC'd snapshot is built again) is read anew."""
    path = tmp_path / "base.duckdb"
    _base(path, [("a.py", "x", 1)])
    cache = BaseRows()

    def look():
        con = duckdb.connect()
        con.execute(f"ATTACH '{path}' AS b (READ_ONLY)")
        try:
            t = cache.lookup(_fetcher(con, []), str(path), "b", "edges", "path, target, line", "path",
                             ["a.py"], "edges")
            return sorted(zip(*t.to_pydict().values(), strict=True))
        finally:
            con.close()

    assert look() == [("a.py", "x", 1)]
    assert look() == [("a.py", "x", 1)] and cache.hits == 1
    os.unlink(path)
    time.sleep(0.01)  # a distinct mtime even where the inode is reused
    _base(path, [("a.py", "y", 2), ("a.py", "z", 3)])
    assert look() == [("a.py", "y", 2), ("a.py", "z", 3)]


def test_a_full_cache_starts_over_rather_than_growing(tmp_path):
    path = tmp_path / "base.duckdb"
    _base(path, [(p, "t", 1) for p in PATHS])
    con = duckdb.connect()
    con.execute(f"ATTACH '{path}' AS b (READ_ONLY)")
    cache = BaseRows(max_rows=5)
    fetch = _fetcher(con, [])
    for p in PATHS * 2:
        got = cache.lookup(fetch, str(path), "b", "edges", "path, target, line", "path", [p], "edges")
        assert got.to_pydict()["path"] == [p]
        assert cache.kept_rows() <= 5 + 1  # bounded: past the bound it starts over at the next lookup
    assert cache.reads > len(PATHS)  # what was dropped was read again


def test_a_memo_is_the_base_files_own(tmp_path):
    """What a delta keeps beside the rows (its import mapping) is dropped with them when the
    base file is another one: another path, or the same path rewritten."""
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    _base(a, [("x.py", "t", 1)])
    _base(b, [("x.py", "t", 1)])
    cache = BaseRows()
    cache.memo(str(a), "import mapping")["imp"] = ["a.py"]
    assert cache.memo(str(a), "import mapping") == {"imp": ["a.py"]}
    assert cache.memo(str(b), "import mapping") == {}
    os.unlink(a)
    time.sleep(0.01)
    _base(a, [("x.py", "t", 1), ("y.py", "u", 2)])
    assert cache.memo(str(a), "import mapping") == {}
