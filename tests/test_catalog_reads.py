"""Catalog entries are parsed once per file version (graph/store.py ``CatalogReads``): a
build lists the whole catalog, retired entries included, and a long-lived service gathers
thousands. What is kept must never hide a change: a rewrite (rename), an in-place write
of the same size with the old mtime put back, a damaged or removed entry — each is read
as it is now; and what a reader gets is its own copy."""

from __future__ import annotations

import json
import os
import time

import pytest

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import CATALOG_READS, CatalogReads


@pytest.fixture
def built(repo, home):
    repo.write("a.py", "def f():\n    return 1\n")
    repo.commit("c1")
    res = build_snapshot(repo.root, home)
    return home.repo(res.repository_id), res.snapshot_id


def test_a_rewritten_entry_is_read_again(built):
    rs, sid = built
    assert rs.entry(sid)["state"] == "ready"
    e = rs.entry(sid)
    e["state"] = "retired"
    rs.write_entry(e)  # atomic: a new file
    assert rs.entry(sid)["state"] == "retired"
    assert [x["state"] for x in rs.entries()] == ["retired"]


def test_an_in_place_write_of_the_same_size_with_the_old_mtime_is_read_again(built):
    rs, sid = built
    path = rs.catalog_path(sid)
    assert rs.entry(sid)["state"] == "ready"
    st = os.stat(path)
    text = path.read_text()
    same_size = text.replace('"state": "ready"', '"state": "reads"')  # not a state: malformed
    assert len(same_size) == len(text) and same_size != text
    time.sleep(0.01)
    with open(path, "r+") as f:
        f.write(same_size)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # only the ctime tells
    got = rs.entry(sid)
    assert got["state"] == "failed" and got["reason"] == "malformed catalog entry (state)"


def test_each_reader_gets_its_own_copy(built):
    rs, sid = built
    rs.entry(sid)  # parsed and kept
    a = rs.entry(sid)  # from what was kept
    a["state"] = "mutated"
    a["coverage"] = {}
    b = rs.entry(sid)
    assert b["state"] == "ready" and b["coverage"]
    c = rs.entries()[0]
    c["state"] = "mutated"
    assert rs.entries()[0]["state"] == "ready"


def test_a_removed_or_garbage_entry_is_seen(built):
    rs, sid = built
    path = rs.catalog_path(sid)
    rs.entry(sid)
    good = path.read_bytes()
    path.write_bytes(b"\xff" * len(good))
    assert rs.entry(sid)["reason"] == "unreadable catalog entry"
    path.write_bytes(good)
    assert rs.entry(sid)["state"] == "ready"
    path.unlink()
    assert rs.entry(sid) is None and rs.entries() == []


def test_the_damage_checks_run_on_every_read(built):
    rs, sid = built
    assert rs.entry(sid)["state"] == "ready"
    with open(rs.published_path(rs.entry(sid)), "ab") as f:
        f.write(b"x")  # the snapshot file, not the entry, changed
    got = rs.entry(sid)
    assert got["state"] == "failed" and "damaged" in got["reason"]


def test_the_cache_is_bounded_and_hidden_files_are_not_entries(built, tmp_path):
    rs, sid = built
    small = CatalogReads(max_entries=2)
    for i in range(5):
        p = tmp_path / f"cgsnap_{i}.json"
        p.write_text(json.dumps({"snapshot_id": f"cgsnap_{i}", "state": "retired"}))
        assert small.read(str(p), f"cgsnap_{i}")[0]["state"] == "retired"
    assert len(small._parsed) <= 2
    (rs.catalog_path(sid).parent / f".{sid}.json.123.tmp.json").write_text("{}")
    assert [e["snapshot_id"] for e in rs.entries()] == [sid]
    assert CATALOG_READS.read(str(tmp_path / "missing.json"), "cgsnap_x") is None
