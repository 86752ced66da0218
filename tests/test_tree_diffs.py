"""A delta's tree diff to its base is kept per (git directory, commit, commit)
(graph/delta_plan.py ``TreeDiffs``): consecutive builds over one base at one HEAD — the
service, edit after edit — diff the two trees once; and the service reads it (with the
build's DuckDB instance) after a build, off the next edit's path (snapshot_builder.warm)."""

from __future__ import annotations

import subprocess

import pygit2

from citegraph.graph import delta_plan
from citegraph.graph.delta_plan import TREE_DIFFS, TreeDiffs
from citegraph.graph.snapshot_builder import build_snapshot, warm
from citegraph.graph.snapshot_writer import BUILD_DATABASES
from citegraph.indexer import gitrepo


def git_changed(root, a: str, b: str) -> frozenset[str]:
    out = subprocess.run(["git", "diff", "--no-renames", "--name-only", a, b], cwd=root, capture_output=True,
                         text=True, check=True).stdout
    return frozenset(out.split())


def test_changed_paths_equal_git_and_are_diffed_once_per_repository_and_pair(repo, monkeypatch, tmp_path):
    repo.write("a.py", "x = 1\n")
    repo.write("d/b.py", "y = 1\n")
    c1 = repo.commit("c1")
    repo.write("a.py", "x = 2\n")
    (repo.root / "d" / "b.py").rename(repo.root / "d" / "c.py")
    repo.write("e/new.py", "z = 1\n")
    c2 = repo.commit("c2")
    calls = []
    real = pygit2.Repository.diff

    def counting(self, *a, **kw):
        calls.append(self.path)
        return real(self, *a, **kw)

    monkeypatch.setattr(pygit2.Repository, "diff", counting)
    diffs = TreeDiffs()
    r = gitrepo.open_repository(repo.root)
    got = diffs.changed(r, c1, c2)
    assert got == git_changed(repo.root, c1, c2) == {"a.py", "d/b.py", "d/c.py", "e/new.py"}
    assert diffs.changed(gitrepo.open_repository(repo.root), c1, c2) == got and len(calls) == 1
    assert diffs.changed(r, c2, c1) == got and len(calls) == 2  # another pair
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo.root), str(clone)], check=True)
    assert diffs.changed(gitrepo.open_repository(clone), c1, c2) == got and len(calls) == 3  # another repository


def test_it_keeps_a_bounded_number_of_pairs(repo, monkeypatch):
    repo.write("a.py", "x = 0\n")
    commits = [repo.commit("c0")]
    for i in range(1, 5):
        repo.write("a.py", f"x = {i}\n")
        commits.append(repo.commit(f"c{i}"))
    diffs = TreeDiffs()
    monkeypatch.setattr(TreeDiffs, "KEEP", 2)
    r = gitrepo.open_repository(repo.root)
    for c in commits[1:]:
        assert diffs.changed(r, commits[0], c) == {"a.py"}
    assert len(diffs._kept) == 2
    monkeypatch.setattr(TreeDiffs, "MAX_PATHS", 0)  # too many paths to keep: answered, not kept
    assert TreeDiffs().changed(r, commits[0], commits[1]) == {"a.py"}
    big = TreeDiffs()
    big.changed(r, commits[0], commits[1])
    assert big._kept == {}


def test_warm_reads_the_next_builds_base_diff_and_keeps_its_duckdb_instance(repo, home):
    repo.write("a.py", "def f():\n    return 1\n")
    c1 = repo.commit("c1")
    build_snapshot(repo.root, home)  # the full base
    repo.write("a.py", "def f():\n    return 2\n")
    c2 = repo.commit("c2")
    r = gitrepo.open_repository(repo.root)
    BUILD_DATABASES.close_all()
    TREE_DIFFS._kept.clear()
    warm(repo.root, home, gitrepo.worktree_state(r), r)
    assert (r.path, c1, c2) in TREE_DIFFS._kept
    assert any(str(repo.root) in d or d.startswith(str(home.root)) for d in BUILD_DATABASES.idle())
    res = build_snapshot(repo.root, home, repo=r)  # the delta over c1, from what was read
    assert res.commit == c2 and not res.reused
    assert delta_plan.TREE_DIFFS._kept[(r.path, c1, c2)] == {"a.py"}
