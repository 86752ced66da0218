"""Handles (SPEC §2): stable cgs_ symbol handles, decodable cgr_ handles, repository identity."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from gitutil import GIT_ENV

from citegraph.graph.handles import (
    decode_repo_handle,
    is_repo_handle,
    is_symbol_handle,
    repo_handle,
    symbol_handle,
)
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.indexer import gitrepo

CGS = re.compile(r"^cgs_[0-9a-f]{32}$")
CGR = re.compile(r"^cgr_[0-9a-f]{16}_[0-9a-f]{32}$")

MODULE = """\
def untouched(a, b):
    return a + b


def other():
    return 1
"""

MODULE_EDITED = """\
def other():
    # a comment that moves everything below it
    x = 2
    return x


def untouched(a, b):
    return a + b
"""

PROPERTY = """\
class Temperature:
    @property
    def celsius(self):
        return self._c

    @celsius.setter
    def celsius(self, value):
        self._c = value

    def unique(self):
        return 0
"""


def symbols_table(home, result) -> list[dict]:
    with Snapshot.open(home.repo(result.repository_id), result.snapshot_id) as snap:
        return snap.dicts("SELECT * FROM symbols ORDER BY path, start_byte")


def by_qname(rows: list[dict], path: str, qname: str) -> list[dict]:
    return [r for r in rows if r["path"] == path and r["qualified_name"] == qname]


def test_untouched_symbol_keeps_handle_across_commits_and_line_moves(repo, home):
    repo.write("pkg/mod.py", MODULE)
    repo.write("pkg/side.py", "def side():\n    pass\n")
    repo.commit("c1")
    r1 = build_snapshot(repo.root, home, jobs=1)
    s1 = symbols_table(home, r1)
    (u1,) = by_qname(s1, "pkg/mod.py", "untouched")

    # A commit that touches only another file: same handle, same lines.
    repo.write("pkg/side.py", "def side():\n    return 2\n")
    repo.commit("c2")
    r2 = build_snapshot(repo.root, home, jobs=1)
    assert r2.snapshot_id != r1.snapshot_id
    (u2,) = by_qname(symbols_table(home, r2), "pkg/mod.py", "untouched")
    assert u2["handle"] == u1["handle"]
    assert (u2["start_line"], u2["end_line"]) == (u1["start_line"], u1["end_line"])

    # An unrelated edit in the same file moves its lines: the handle stays.
    repo.write("pkg/mod.py", MODULE_EDITED)
    repo.commit("c3")
    r3 = build_snapshot(repo.root, home, jobs=1)
    (u3,) = by_qname(symbols_table(home, r3), "pkg/mod.py", "untouched")
    assert u3["handle"] == u1["handle"]
    assert u3["start_line"] != u1["start_line"]
    assert u3["fragment_hash"] == u1["fragment_hash"]
    (o1,) = by_qname(s1, "pkg/mod.py", "other")
    (o3,) = by_qname(symbols_table(home, r3), "pkg/mod.py", "other")
    assert o3["handle"] == o1["handle"]
    assert o3["fragment_hash"] != o1["fragment_hash"]

    # Moving the file changes the handle (the path is part of it).
    repo.mv("pkg/mod.py", "lib/mod.py")
    repo.commit("c4")
    r4 = build_snapshot(repo.root, home, jobs=1)
    s4 = symbols_table(home, r4)
    assert by_qname(s4, "pkg/mod.py", "untouched") == []
    (u4,) = by_qname(s4, "lib/mod.py", "untouched")
    assert u4["handle"] != u1["handle"]
    assert u4["handle"] == symbol_handle("lib/mod.py", "python", "function", "untouched", 0)
    assert u1["handle"] == symbol_handle("pkg/mod.py", "python", "function", "untouched", 0)


def test_handle_shapes_and_ordinals_for_property_getter_setter(repo, home):
    repo.write("temp.py", PROPERTY)
    repo.commit("c1")
    res = build_snapshot(repo.root, home, jobs=1)
    rows = symbols_table(home, res)
    assert rows, "no symbols extracted"
    for r in rows:
        assert CGS.match(r["handle"]), r["handle"]
        assert is_symbol_handle(r["handle"])
    assert len({r["handle"] for r in rows}) == len(rows)

    getter, setter = by_qname(rows, "temp.py", "Temperature.celsius")
    assert (getter["ordinal"], setter["ordinal"]) == (1, 2)
    assert getter["start_line"] < setter["start_line"]
    assert getter["kind"] == setter["kind"] == "method"
    assert getter["handle"] != setter["handle"]
    assert setter["handle"] == symbol_handle("temp.py", "python", "method", "Temperature.celsius", 2)
    (unique,) = by_qname(rows, "temp.py", "Temperature.unique")
    assert unique["ordinal"] == 0
    (cls,) = by_qname(rows, "temp.py", "Temperature")
    assert cls["ordinal"] == 0
    assert getter["parent_handle"] == cls["handle"]


def test_symbol_handle_inputs_all_matter():
    base = symbol_handle("a.py", "python", "function", "f", 0)
    assert CGS.match(base)
    assert base == symbol_handle("a.py", "python", "function", "f", 0)
    variants = [
        symbol_handle("b.py", "python", "function", "f", 0),
        symbol_handle("a.py", "ruby", "function", "f", 0),
        symbol_handle("a.py", "python", "method", "f", 0),
        symbol_handle("a.py", "python", "function", "g", 0),
        symbol_handle("a.py", "python", "function", "f", 1),
    ]
    assert base not in variants
    assert len(set(variants)) == len(variants)


def test_repo_handle_round_trip(repo, home):
    repo.write("m.py", "def f():\n    pass\n")
    repo.commit("c1")
    res = build_snapshot(repo.root, home, jobs=1)
    (row,) = by_qname(symbols_table(home, res), "m.py", "f")
    cgr = repo_handle(res.repository_id, row["handle"])
    assert CGR.match(cgr)
    assert is_repo_handle(cgr)
    assert not is_symbol_handle(cgr)
    decoded = decode_repo_handle(cgr)
    assert decoded.repository_prefix == res.repository_id[:16]
    assert decoded.symbol == row["handle"]
    assert len(res.repository_id) == 32


@pytest.mark.parametrize("bad", ["", "cgs_123", "cgr_0123456789abcdef_xyz", "cgs_" + "A" * 32,
                                 "cgr_0123456789abcde_" + "0" * 32])
def test_malformed_handles_rejected(bad):
    assert not is_repo_handle(bad)
    with pytest.raises(ValueError):
        decode_repo_handle(bad)


def test_repo_handle_rejects_non_cgs():
    with pytest.raises(ValueError):
        repo_handle("0" * 32, "cgs_short")


REMOTE_SPELLINGS = [
    "https://user:pw@GitHub.com/Org/Repo.git",
    "git@github.com:Org/Repo.git",
    "ssh://git@github.com/Org/Repo",
    "https://github.com/Org/Repo/",
]


def test_remote_identity_is_credential_free_and_normalised(make_repo):
    ids = set()
    for url in REMOTE_SPELLINGS:
        r = make_repo(remote=url)
        ident = gitrepo.repository_identity(gitrepo.open_repository(r.root))
        assert ident.kind == "remote"
        assert "pw" not in ident.source and "user" not in ident.source
        assert ident.source == "github.com/Org/Repo"
        assert re.fullmatch(r"[0-9a-f]{32}", ident.repository_id)
        ids.add(ident.repository_id)
    assert len(ids) == 1
    other = make_repo(remote="https://github.com/Org/Other.git")
    assert gitrepo.repository_identity(gitrepo.open_repository(other.root)).repository_id not in ids


def test_local_identity_without_remote(make_repo):
    a, b = make_repo(), make_repo()
    ia = gitrepo.repository_identity(gitrepo.open_repository(a.root))
    ib = gitrepo.repository_identity(gitrepo.open_repository(b.root))
    assert ia.kind == ib.kind == "local"
    assert ia.repository_id != ib.repository_id
    # Opening from a subdirectory gives the same identity.
    a.write("sub/x.py", "x = 1\n")
    assert gitrepo.repository_identity(gitrepo.open_repository(a.root / "sub")) == ia


def test_linked_worktree_shares_identity_and_commit_snapshot(repo, home, tmp_path: Path, run_cli):
    repo.write("m.py", "def f():\n    return 1\n")
    c1 = repo.commit("c1")
    main = build_snapshot(repo.root, home, jobs=1)
    assert not main.reused

    wt = tmp_path / "linked-wt"
    repo.git("worktree", "add", "-q", "--detach", str(wt), c1)
    ident_main = gitrepo.repository_identity(gitrepo.open_repository(repo.root))
    ident_wt = gitrepo.repository_identity(gitrepo.open_repository(wt))
    assert ident_wt == ident_main
    assert ident_wt.kind == "local"

    linked = build_snapshot(wt, home, jobs=1)
    assert linked.reused is True
    assert linked.snapshot_id == main.snapshot_id
    assert linked.repository_id == main.repository_id

    # The CLI agrees, and the linked worktree sees the shared snapshot as exact-current.
    proc = run_cli("status", "--json", str(wt))
    assert proc.returncode == 0, proc.stderr
    assert '"exact_current": true' in proc.stdout

    # A commit in the linked worktree is a new state for both, under the same identity.
    subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "wt"], cwd=wt, check=True,
                   env={**os.environ, **GIT_ENV})
    moved = build_snapshot(wt, home, jobs=1)
    assert moved.repository_id == main.repository_id
    assert moved.snapshot_id != main.snapshot_id
    assert build_snapshot(repo.root, home, jobs=1).reused is True
