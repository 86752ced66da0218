"""The facts cache's lookup (graph/facts_cache.py ``lookup``) reads a delta's few blobs
through the cache's blob index, and a larger set by a join: both give the same answer —
only keys of the asked language, only rows the cache holds itself or a source attached
for this build holds."""

from __future__ import annotations

import pytest

from citegraph.graph import facts_cache
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_writer import connect, release


@pytest.fixture
def cache(repo, home):
    for i in range(60):
        repo.write(f"p/m{i}.py", f"def f{i}():\n    return {i}\n")
    repo.write("README.md", "# hi\n")
    repo.commit("c1")
    res = build_snapshot(repo.root, home)  # a full build: the cache points at its rows (source)
    repo.write("p/m0.py", "def changed():\n    return 0\n")
    build_snapshot(repo.root, home)  # a delta: its new blob's rows are in the cache itself
    rs = home.repo(res.repository_id)
    out = connect(rs)
    facts_cache.attach(out, rs)
    yield out, rs
    facts_cache.detach(out)
    release(out)


def both(out, keys):
    small = facts_cache.lookup(out, keys)
    big = facts_cache.lookup(out, keys + [(f"{n:040x}", "python") for n in range(facts_cache.INDEX_LOOKUP_KEYS)])
    return small, big


def test_index_and_join_lookups_agree(cache):
    out, _ = cache
    rows = out.execute("SELECT blob_id, language, source FROM facts.blob_files ORDER BY 1").fetchall()
    assert {r[2] is None for r in rows} == {True, False}  # rows in the cache and in a source
    keys = [(b, lang) for b, lang, _ in rows[:10]]
    small, big = both(out, keys)
    assert set(small) == set(keys) and small == big
    wrong = [(b, "rust") for b, _ in keys]  # another language: not these facts
    assert both(out, wrong) == ({}, {})


def test_rows_of_a_source_not_attached_are_not_found(cache):
    out, _ = cache
    src = [tuple(r) for r in out.execute("SELECT blob_id, language FROM facts.blob_files "
                                         "WHERE source IS NOT NULL ORDER BY 1 LIMIT 5").fetchall()]
    assert both(out, src)[0].keys() == set(src)
    out.execute("DELETE FROM _fact_src")  # as if its snapshot could not be attached
    assert both(out, src) == ({}, {})
