"""Memory-store schema migration: a store written by citegraph with schema version 1
(``tests/fixtures/store_v1/memories.duckdb.gz``, made by ``make_fixture.py`` on a
deterministic repository) is migrated in place to the current version the first time it is opened —
read-write or read-only — and then answers ``cited`` from its new code index, validates,
and keeps its history. A store newer than this citegraph is refused."""

from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

import duckdb
import pytest

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.indexer.errors import CitegraphError
from citegraph.memory import api
from citegraph.memory.agent.cited import cited
from citegraph.memory.lifecycle.store import MEMORY_SCHEMA_VERSION, MemoryStore

FIXTURE = Path(__file__).parent / "fixtures" / "store_v1"
sys.path.insert(0, str(FIXTURE))

from scene import make_repo  # noqa: E402


@pytest.fixture
def v1(tmp_path, home):
    """The fixture store in ``home`` and its repository rebuilt (same commit, blob and
    snapshot ids), indexed."""
    with gzip.open(FIXTURE / "memories.duckdb.gz", "rb") as src, open(home.memory_db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    root = tmp_path / "repo"
    head = make_repo(root)
    assert head == "252645413f95b111bb16837f49d616db7a2b9e8b"  # the commit the fixture's receipts name
    build_snapshot(root, home, jobs=1)
    return root


def raw(home, sql: str) -> list[tuple]:
    con = duckdb.connect(str(home.memory_db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_the_fixture_is_a_version_1_store(v1, home):
    assert raw(home, "SELECT value FROM meta WHERE key = 'schema_version'") == [("1",)]
    tables = {r[0] for r in raw(home, "SELECT table_name FROM information_schema.tables")}
    assert "code_index" not in tables


def test_a_version_1_store_is_migrated_and_answers_from_its_code_index(v1, home):
    with MemoryStore.open(home) as ms:
        mems = {m.topic: m for m in ms.load()}
    assert MEMORY_SCHEMA_VERSION == 4
    assert raw(home, "SELECT value FROM meta WHERE key = 'schema_version'") == [("4",)]
    assert raw(home, "SELECT count(*) FROM citations WHERE deps IS NOT NULL") == [(0,)]  # legacy: none
    assert raw(home, "SELECT count(*) FROM citations WHERE token_hash IS NOT NULL") == [(0,)]
    # the index holds exactly the current revisions' citations (retry's revision 1 had three)
    want = {(m.id, r.id) for m in mems.values() for r in m.citations}
    assert {(a, b) for a, b in raw(home, "SELECT DISTINCT memory_id, citation_id FROM code_index")} == want
    assert len(want) == 4
    by_ref = lambda refs: {m["topic"] for m in cited(home, refs, repo=v1)["memories"]}  # noqa: E731
    assert by_ref(["src/retry.py"]) == {"retry", "key"}
    assert by_ref(["docs/notes.txt#L2-L2"]) == {"notes"}  # archived memories are not listed
    assert by_ref([mems["key"].citations[0].handle]) == {"key"}
    assert by_ref(["src/retry.py::RetryPolicy.next_delay"]) == {"retry"}
    report = api.validate_memories(home, repo_paths=[str(v1)]).to_json()
    assert {m["freshness"] for m in report["memories"]} == {"fresh"}
    assert all(c["outcome"] == "exact" for m in report["memories"] for c in m["citations"])
    with MemoryStore.open(home) as ms:
        hist = ms.history(mems["retry"].id)
    assert [h["revision"] for h in hist] == [1, 2]
    assert [len(h["citations"]) for h in hist] == [3, 1] and [h["refresh"] for h in hist] == [None, None]
    # a new revision after the migration keeps the index current
    api.remember(home, "Retry delays double, capped.", repo=v1, refs=["docs/notes.txt"], project="fixture",
                 topic="retry")
    assert by_ref(["src/retry.py::RetryPolicy.next_delay"]) == set()
    assert by_ref(["docs/notes.txt"]) == {"notes", "retry"}


def test_a_read_only_open_migrates_first(v1, home):
    res = api.brief(home, "retry delays", repo=v1)  # opens the store read-only
    assert res.to_json()["memories"]
    assert raw(home, "SELECT value FROM meta WHERE key = 'schema_version'") == [("4",)]
    assert raw(home, "SELECT count(*) FROM code_index")[0][0] > 0


def back_to(home, version: int, *columns: str) -> None:
    """The migrated store back to an older layout: the citation columns it lacked dropped."""
    with MemoryStore.open(home):
        pass
    con = duckdb.connect(str(home.memory_db))
    con.execute("DROP INDEX citations_mem")
    for column in columns:
        con.execute(f"ALTER TABLE citations DROP COLUMN {column}")
    con.execute(f"UPDATE meta SET value = '{version}' WHERE key = 'schema_version'")
    con.close()


def test_a_version_2_store_gains_recorded_dependencies(v1, home):
    """2 → 3 adds ``citations.deps``: stored receipts keep none (and get no advisories)."""
    back_to(home, 2, "deps", "token_hash")
    report = api.validate_memories(home, repo_paths=[str(v1)]).to_json()
    assert raw(home, "SELECT value FROM meta WHERE key = 'schema_version'") == [("4",)]
    assert raw(home, "SELECT count(*) FROM citations WHERE deps IS NULL")[0][0] > 0
    assert all(c["outcome"] == "exact" and not c.get("advisories")
               for m in report["memories"] for c in m["citations"])


def test_a_version_3_store_gains_token_hashes(v1, home):
    """3 → 4 adds ``citations.token_hash``: stored receipts keep none and their ids."""
    back_to(home, 3, "token_hash")
    ids = raw(home, "SELECT id FROM citations ORDER BY id")
    report = api.validate_memories(home, repo_paths=[str(v1)]).to_json()
    assert raw(home, "SELECT value FROM meta WHERE key = 'schema_version'") == [("4",)]
    assert raw(home, "SELECT count(*) FROM citations WHERE token_hash IS NULL")[0][0] == len(ids) > 0
    assert raw(home, "SELECT id FROM citations ORDER BY id") == ids
    assert all(c["outcome"] == "exact" for m in report["memories"] for c in m["citations"])


def test_a_newer_store_is_refused(v1, home):
    con = duckdb.connect(str(home.memory_db))
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    for read_only in (True, False):
        with pytest.raises(CitegraphError) as exc, MemoryStore.open(home, read_only=read_only):
            pass
        assert exc.value.code == 3 and "newer" in exc.value.what
