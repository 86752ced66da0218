"""The index-side CLI and its stable JSON contract (SPEC §3, §16)."""

from __future__ import annotations

import json
import re

from citegraph.graph.store import Home

INDEX_KEYS = {"repository_id", "snapshot_id", "commit", "dirty", "state", "reused", "files",
              "symbols", "coverage", "seconds"}
STATUS_KEYS = {"repository_id", "repository_kind", "head", "dirty", "exact_current", "snapshot_id",
               "snapshots"}
SYMBOL_KEYS = {"handle", "language", "kind", "name", "qualified_name", "path", "start_line",
               "end_line"}

SERVICE = """\
import time


class RetryPolicy:
    def next_delay(self, attempt):
        return min(2 ** attempt, 30)

    def give_up(self, attempt):
        return attempt > 5


def schedule(policy):
    return policy.next_delay(1)
"""


def run_json(run_cli, *args: str) -> dict:
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def test_index_json_contract_and_idempotence(repo, run_cli):
    repo.write("svc/retry.py", SERVICE)
    repo.write("README.md", "# svc\n")
    head = repo.commit("c1")
    first = run_json(run_cli, "index", "--json", str(repo.root))
    assert INDEX_KEYS <= set(first)
    assert re.fullmatch(r"[0-9a-f]{32}", first["repository_id"])
    assert first["snapshot_id"].startswith("cgsnap_")
    assert first["commit"] == head
    assert first["dirty"] is False
    assert first["state"] == "ready"
    assert first["reused"] is False
    assert first["files"] == 2
    assert first["symbols"] == 4
    assert isinstance(first["seconds"], int | float) and first["seconds"] >= 0
    assert first["coverage"]["python"] == {"indexed": 1, "partial": 0, "skipped": 0}
    for counts in first["coverage"].values():
        # SPEC §16 keys, plus (issue 15) why files are skipped/partial, only where there are such
        assert {"indexed", "partial", "skipped"} <= set(counts) <= {
            "indexed", "partial", "skipped", "partial_causes", "skipped_reasons"}
    assert first["coverage"]["other"] == {"indexed": 0, "partial": 0, "skipped": 1,
                                          "skipped_reasons": {"unsupported-language": 1}}

    second = run_json(run_cli, "index", "--json", str(repo.root))
    assert second["reused"] is True
    for key in INDEX_KEYS - {"reused", "seconds"}:
        assert second[key] == first[key], key

    # Default (human) output names the snapshot; --quiet prints nothing.
    human = run_cli("index", str(repo.root))
    assert human.returncode == 0 and first["snapshot_id"] in human.stdout
    assert "reused" in human.stdout
    quiet = run_cli("index", "--quiet", str(repo.root))
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""


def test_index_of_dirty_worktree_is_an_overlay(repo, run_cli):
    repo.write("svc/retry.py", SERVICE)
    head = repo.commit("c1")
    clean = run_json(run_cli, "index", "--json", str(repo.root))
    repo.write("svc/retry.py", SERVICE + "\n\ndef added():\n    pass\n")
    dirty = run_json(run_cli, "index", "--json", str(repo.root))
    assert dirty["dirty"] is True
    assert dirty["commit"] == head
    assert dirty["snapshot_id"] != clean["snapshot_id"]
    assert dirty["symbols"] == clean["symbols"] + 1
    assert dirty["reused"] is False
    # Another dirty state is another snapshot; back to the first one is reused.
    repo.write("svc/retry.py", SERVICE)
    back = run_json(run_cli, "index", "--json", str(repo.root))
    assert back["snapshot_id"] == clean["snapshot_id"] and back["reused"] is True


def test_status_json_contract(repo, run_cli):
    repo.write("svc/retry.py", SERVICE)
    head = repo.commit("c1")
    before = run_json(run_cli, "status", "--json", str(repo.root))
    assert STATUS_KEYS <= set(before)
    assert before["repository_kind"] == "local"
    assert before["head"] == head
    assert before["dirty"] is False
    assert before["exact_current"] is False
    assert before["snapshot_id"] is None
    assert before["snapshots"] == []

    built = run_json(run_cli, "index", "--json", str(repo.root))
    after = run_json(run_cli, "status", "--json", str(repo.root))
    assert after["repository_id"] == built["repository_id"]
    assert after["exact_current"] is True
    assert after["snapshot_id"] == built["snapshot_id"]
    (snap,) = after["snapshots"]
    assert snap["snapshot_id"] == built["snapshot_id"]
    assert snap["state"] == "ready" and snap["commit"] == head

    repo.write("untracked.py", "X = 1\n")
    dirty = run_json(run_cli, "status", "--json", str(repo.root))
    assert dirty["dirty"] is True
    assert dirty["exact_current"] is False
    assert dirty["snapshot_id"] is None

    human = run_cli("status", str(repo.root))
    assert human.returncode == 0 and built["repository_id"] in human.stdout


VARIANCE_TS = """\
export interface Box<out T> {
  get(): T;
}

export function unbox<T>(b: Box<T>): T {
  return b.get();
}
"""
PEP696_PY = """\
def first[T = int](xs: list[T]) -> T:
    return xs[0]
"""


def test_grammar_gap_is_named_in_index_and_status(repo, run_cli):
    """Issue 15: a partial file says why (the construct of its first error, and where).
    Issue 23: TS variance annotations are no such gap any more (the file is indexed)."""
    repo.write("src/box.ts", VARIANCE_TS)
    repo.write("src/ok.ts", "export const ok = 1;\n")
    repo.write("src/gap.py", PEP696_PY)
    repo.write("src/broken.py", "def f(:\n    pass\n")
    repo.commit("c1")
    built = run_json(run_cli, "index", "--json", str(repo.root))
    pep696 = "type parameter default (PEP 696, Python 3.13): ERROR in type_parameter"
    missing = 'MISSING ")" in parameters'
    assert built["coverage"]["typescript"] == {"indexed": 2, "partial": 0, "skipped": 0}
    assert built["coverage"]["python"]["partial_causes"] == {pep696: 1, missing: 1}
    st = run_json(run_cli, "status", "--json", str(repo.root))
    assert st["coverage"] == built["coverage"]
    assert st["partial_files"] == [
        {"path": "src/broken.py", "language": "python", "line": 1, "construct": missing},
        {"path": "src/gap.py", "language": "python", "line": 1, "construct": pep696},
    ]
    human = run_cli("status", str(repo.root))
    assert human.returncode == 0
    assert f"partial src/gap.py:1: {pep696}" in human.stdout


def test_status_kind_remote(make_repo, run_cli):
    r = make_repo(remote="git@github.com:Org/Repo.git")
    r.write("a.py", "A = 1\n")
    r.commit("c1")
    st = run_json(run_cli, "status", "--json", str(r.root))
    assert st["repository_kind"] == "remote"


def test_symbols_json_contract(repo, run_cli):
    repo.write("svc/retry.py", SERVICE)
    repo.commit("c1")
    run_json(run_cli, "index", "--json", str(repo.root))
    data = run_json(run_cli, "symbols", str(repo.root / "svc" / "retry.py"), "--json")
    assert set(data) >= {"symbols"}
    rows = data["symbols"]
    for s in rows:
        assert SYMBOL_KEYS <= set(s)
        assert re.fullmatch(r"cgs_[0-9a-f]{32}", s["handle"])
        assert s["path"] == "svc/retry.py"
        assert s["language"] == "python"
    got = [(s["kind"], s["name"], s["qualified_name"], s["start_line"], s["end_line"]) for s in rows]
    assert got == [
        ("class", "RetryPolicy", "RetryPolicy", 4, 9),
        ("method", "next_delay", "RetryPolicy.next_delay", 5, 6),
        ("method", "give_up", "RetryPolicy.give_up", 8, 9),
        ("function", "schedule", "schedule", 12, 13),
    ]
    # A relative path from inside the worktree names the same file.
    proc = run_cli("symbols", "retry.py", "--json", cwd=repo.root / "svc")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == data
    human = run_cli("symbols", str(repo.root / "svc" / "retry.py"))
    assert human.returncode == 0 and "RetryPolicy.next_delay" in human.stdout


def test_find_by_name_and_qualified_name(repo, run_cli):
    repo.write("svc/retry.py", SERVICE)
    repo.write("other/retry2.py", "def next_delay():\n    return 0\n")
    repo.commit("c1")
    run_json(run_cli, "index", "--json", str(repo.root))

    by_name = run_json(run_cli, "find", "next_delay", "--repo", str(repo.root), "--json")["symbols"]
    assert {(s["path"], s["qualified_name"]) for s in by_name} == {
        ("svc/retry.py", "RetryPolicy.next_delay"), ("other/retry2.py", "next_delay")}
    for s in by_name:
        assert SYMBOL_KEYS <= set(s)

    by_qname = run_json(run_cli, "find", "RetryPolicy.next_delay", "--repo", str(repo.root),
                        "--json")["symbols"]
    assert [(s["path"], s["qualified_name"], s["start_line"]) for s in by_qname] == [
        ("svc/retry.py", "RetryPolicy.next_delay", 5)]

    limited = run_json(run_cli, "find", "next_delay", "--repo", str(repo.root), "--limit", "1", "--json")
    assert len(limited["symbols"]) == 1 and limited["truncated"] is True  # said, not silent (issue 22)

    none = run_cli("find", "does_not_exist", "--repo", str(repo.root), "--json")
    assert none.returncode == 1  # like grep: no match is exit 1 (SPEC §19)
    assert json.loads(none.stdout) == {"symbols": [], "truncated": False, "limit": 50}


def test_reads_refuse_when_not_exact_current(repo, run_cli):
    repo.write("svc/retry.py", SERVICE)
    repo.commit("c1")
    proc = run_cli("symbols", str(repo.root / "svc" / "retry.py"), "--json")
    assert proc.returncode == 1
    assert proc.stderr.startswith("citegraph: ") and "citegraph index" in proc.stderr
    proc = run_cli("find", "schedule", "--repo", str(repo.root), "--json")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


def test_gc_keeps_last_n_and_exact_current(repo, run_cli, home: Home):
    repo.write("a.py", "def v1():\n    pass\n")
    c1 = repo.commit("c1")
    repo.write("a.py", "def v2():\n    pass\n")
    c2 = repo.commit("c2")
    repo.write("a.py", "def v3():\n    pass\n")
    c3 = repo.commit("c3")
    # HEAD (c3) is built first, so it is the *oldest* publication.
    s3 = run_json(run_cli, "index", "--json", str(repo.root))
    s1 = run_json(run_cli, "index", "--json", "--rev", c1, str(repo.root))
    s2 = run_json(run_cli, "index", "--json", "--rev", c2, str(repo.root))
    assert s3["commit"] == c3
    rs = home.repo(s3["repository_id"])

    dry = run_json(run_cli, "gc", "--keep-last", "1", "--dry-run", "--json")
    assert dry["retired"] == [s1["snapshot_id"]]
    assert rs.snapshot_files(s1["snapshot_id"])

    res = run_json(run_cli, "gc", "--keep-last", "1", "--json")
    assert res["retired"] == [s1["snapshot_id"]]
    assert set(res["kept"]) == {s2["snapshot_id"], s3["snapshot_id"]}
    assert not rs.snapshot_files(s1["snapshot_id"])
    assert rs.snapshot_files(s2["snapshot_id"])
    assert rs.snapshot_files(s3["snapshot_id"])

    st = run_json(run_cli, "status", "--json", str(repo.root))
    states = {s["snapshot_id"]: s["state"] for s in st["snapshots"]}
    assert states == {s1["snapshot_id"]: "retired", s2["snapshot_id"]: "ready",
                      s3["snapshot_id"]: "ready"}
    assert st["exact_current"] is True and st["snapshot_id"] == s3["snapshot_id"]

    # keep-last 0 still keeps the exact-current snapshot; a retired one can be rebuilt.
    res0 = run_json(run_cli, "gc", "--keep-last", "0", "--json")
    assert res0["retired"] == [s2["snapshot_id"]]
    assert res0["kept"] == [s3["snapshot_id"]]
    sym = run_cli("symbols", str(repo.root / "a.py"), "--json")
    assert sym.returncode == 0, sym.stderr
    assert [s["name"] for s in json.loads(sym.stdout)["symbols"]] == ["v3"]
    again = run_json(run_cli, "index", "--json", "--rev", c1, str(repo.root))
    assert again["snapshot_id"] == s1["snapshot_id"]
    assert again["reused"] is False and again["state"] == "ready"

    human = run_cli("gc")
    assert human.returncode == 0 and "retired" in human.stdout


def test_gc_keeps_what_the_exact_current_snapshot_reads_through(repo, run_cli, home: Home):
    repo.write("a.py", "def v1():\n    pass\n")
    repo.write("b.py", "def stable():\n    pass\n")
    c1 = repo.commit("c1")
    repo.write("a.py", "def v2():\n    pass\n")
    repo.commit("c2")
    # The older commit is built first: HEAD's snapshot may be layered over it.
    old = run_json(run_cli, "index", "--json", "--rev", c1, str(repo.root))
    cur = run_json(run_cli, "index", "--json", str(repo.root))
    rs = home.repo(cur["repository_id"])
    base = rs.entry(cur["snapshot_id"]).get("base")
    res = run_json(run_cli, "gc", "--keep-last", "0", "--json")
    assert cur["snapshot_id"] in res["kept"]
    if base:
        assert base == old["snapshot_id"]
        assert base in res["kept"] and rs.snapshot_files(base)
    else:
        assert res["retired"] == [old["snapshot_id"]]
    sym = run_cli("symbols", str(repo.root / "b.py"), "--json")
    assert sym.returncode == 0, sym.stderr
    assert [s["name"] for s in json.loads(sym.stdout)["symbols"]] == ["stable"]
    a = run_json(run_cli, "symbols", str(repo.root / "a.py"), "--json")
    assert [s["name"] for s in a["symbols"]] == ["v2"]


def test_snapshot_of_an_older_schema_is_refused(repo, home):
    """Schema 3 added the damage table: a snapshot file of another layout is refused with
    one clear error (SPEC §4), never misread."""
    import duckdb
    import pytest

    from citegraph.graph.snapshot_builder import build_snapshot
    from citegraph.graph.snapshot_reader import Snapshot
    from citegraph.indexer.errors import CitegraphError

    repo.write("svc/retry.py", SERVICE)
    repo.commit("c1")
    res = build_snapshot(repo.root, home, jobs=1)
    rs = home.repo(res.repository_id)
    with Snapshot.open(rs, res.snapshot_id) as snap:
        assert snap.query("SELECT count(*) FROM damage") == [(0,)]
    path = rs.snapshot_path(res.snapshot_id)
    con = duckdb.connect(str(path))
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.close()
    entry = rs.entry(res.snapshot_id) or {}
    if entry.get("state") != "ready":  # the catalog notices the rewritten file: say it was built so
        entry = json.loads(rs.catalog_path(res.snapshot_id).read_text())
        entry.update(state="ready", bytes=path.stat().st_size)
        rs.write_entry(entry)
    with pytest.raises(CitegraphError) as err:
        Snapshot.open(rs, res.snapshot_id)
    assert "schema 2" in err.value.what and "run citegraph index" in err.value.todo
