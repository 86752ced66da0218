"""SPEC §6.1 (file citations) and the §6 preconditions, built with real git operations.

Each test asserts outcome, reason and observed location, so a change of any table row's
outcome fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gitutil import GitRepo
from validation_helpers import (
    RETRY,
    ChangeBeforeRecheck,
    assert_obs,
    cite,
    git,
    handle,
    index,
    loc,
    memory_verdict,
    observe,
    verdicts,
)

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.memory import api
from citegraph.memory.lifecycle.store import MemoryStore
from citegraph.validator.pipeline import resolve_scope, validate

URL = "https://example.invalid/acme/proj.git"


@pytest.fixture
def cited(repo, home):
    """src/retry.py committed, indexed and cited as a file."""
    repo.write("src/retry.py", RETRY)
    repo.write("src/other.py", "X = 1\n")
    repo.commit("c1")
    index(repo, home)
    return cite(home, repo, "src/retry.py")


# --- §6.1 rows -----------------------------------------------------------------------------


def test_exact_when_same_content_after_unrelated_commits(repo, home, cited):
    repo.write("src/other.py", "X = 2\n")
    repo.commit("unrelated")
    index(repo, home)
    assert_obs(observe(home, repo, cited), "exact", None, loc("src/retry.py"))


def test_changed_and_a_copy_elsewhere_never_rescues_it(repo, home, cited):
    repo.write("lib/copy_of_retry.py", RETRY)  # the cited content, at another path
    repo.write("src/retry.py", RETRY.replace("42", "43"))
    repo.commit("edit + copy")
    index(repo, home)
    assert_obs(observe(home, repo, cited), "changed", None, loc("src/retry.py"))


def test_whitespace_only_edit_is_changed(repo, home, cited):
    repo.write("src/retry.py", RETRY + "\n")
    repo.commit("trailing newline")
    index(repo, home)
    assert_obs(observe(home, repo, cited), "changed", None, loc("src/retry.py"))


def test_relocated_by_git_mv(repo, home, cited):
    repo.mv("src/retry.py", "lib/retry.py")
    repo.commit("move")
    index(repo, home)
    assert_obs(observe(home, repo, cited), "relocated", None, loc("lib/retry.py"))


def test_ambiguous_relocation_with_two_copies(repo, home, cited):
    repo.mv("src/retry.py", "lib/a.py")
    repo.write("lib/b.py", RETRY)
    repo.commit("move and copy")
    index(repo, home)
    assert_obs(observe(home, repo, cited), "unknown", "ambiguous-relocation", None)


def test_deleted_by_git_rm(repo, home, cited):
    repo.rm("src/retry.py")
    repo.commit("delete")
    index(repo, home)
    assert_obs(observe(home, repo, cited), "deleted", None, None)


def test_moved_and_edited_file_is_deleted_not_relocated(repo, home, cited):
    # No file has the cited content any more; no similarity is ever used (§15).
    repo.mv("src/retry.py", "lib/retry.py")
    repo.write("lib/retry.py", RETRY.replace("42", "43"))
    repo.commit("move and edit")
    index(repo, home)
    assert_obs(observe(home, repo, cited), "deleted", None, None)


def test_path_reused_by_other_content_is_changed(repo, home, cited):
    repo.mv("src/retry.py", "lib/retry.py")
    repo.write("src/retry.py", "print('new file at the old path')\n")
    repo.commit("path reuse")
    index(repo, home)
    # The path exists with different content: changed, even though the old content
    # lives on at lib/retry.py.
    assert_obs(observe(home, repo, cited), "changed", None, loc("src/retry.py"))


def test_dirty_worktree_overlay_is_validated(repo, home, cited):
    repo.mv("src/retry.py", "lib/retry.py")  # staged move, not committed
    index(repo, home)  # overlay snapshot of the dirty worktree
    assert_obs(observe(home, repo, cited), "relocated", None, loc("lib/retry.py"))


# --- unknown/incomplete-coverage: a real partial clone missing trees ----------------------


def _partial_clone_setup(make_repo, tmp_path: Path, home: Home) -> tuple[GitRepo, dict, str]:
    """Capture three citations at c1 in a full clone; commit c2 that moves the file into
    vendor/; return (source, memory, c2). c2 is *not* indexed in the source."""
    src = make_repo("src", remote=URL)
    src.write("src/retry.py", RETRY)
    src.write("README.md", "readme\n")
    src.commit("c1")
    index(src, home)
    mem = cite(home, src, "src/retry.py", "src/retry.py#L4-L6", "src/retry.py::helper")
    src.mv("src/retry.py", "vendor/retry.py")
    c2 = src.commit("vendor it")
    return src, mem, c2


def _partial_clone(src: GitRepo, dst: Path) -> Path:
    """`git clone --filter=tree:1`: root trees only; every subtree is missing from the odb
    (what a partial clone holds before a lazy fetch)."""
    src.git("config", "uploadpack.allowfilter", "true")
    src.git("config", "uploadpack.allowanysha1inwant", "true")
    git(dst.parent, "clone", "-q", "--bare", "--filter=tree:1", f"file://{src.root}", str(dst))
    git(dst, "remote", "set-url", "origin", URL)  # same repository identity as the source
    return dst


def test_incomplete_inventory_in_a_partial_clone_is_unknown(make_repo, tmp_path, home):
    src, mem, c2 = _partial_clone_setup(make_repo, tmp_path, home)
    clone = _partial_clone(src, tmp_path / "partial.git")
    snap = build_snapshot(clone, home, rev=c2, jobs=1)
    assert snap.state == "ready"
    assert home.repo(snap.repository_id).entry(snap.snapshot_id)["inventory_complete"] is False
    m = memory_verdict(home, clone, mem, at=c2)
    file_c, span_c, sym_c = m["citations"]
    # The file went into a tree this clone does not have: never "deleted".
    assert_obs(file_c, "unknown", "incomplete-coverage", None)
    assert_obs(span_c, "unknown", "incomplete-coverage", None)
    assert_obs(sym_c, "unknown", "incomplete-coverage", None)
    assert m["freshness"] == "unknown"


def test_same_commit_with_complete_inventory_is_relocated(make_repo, tmp_path):
    # Control for the test above: the full clone proves the evidence was in the missing tree.
    home = Home.open(tmp_path / "home2")
    src, mem, c2 = _partial_clone_setup(make_repo, tmp_path, home)
    index(src, home, rev=c2)
    m = memory_verdict(home, src, mem, at=c2)
    file_c, span_c, sym_c = m["citations"]
    assert_obs(file_c, "relocated", None, loc("vendor/retry.py"))
    assert_obs(span_c, "relocated", None, loc("vendor/retry.py", 4, 6))
    assert_obs(sym_c, "relocated", None, loc("vendor/retry.py", 12, 13, handle("vendor/retry.py", "helper")))


def test_unique_copy_does_not_prove_relocation_when_inventory_is_incomplete(make_repo, tmp_path, home):
    # A copy at the root is visible, but the missing subtrees could hold another one:
    # "exactly one file anywhere" is unprovable.
    src = make_repo("src", remote=URL)
    src.write("retry.py", RETRY)
    src.write("pkg/keep.py", "K = 1\n")
    src.commit("c1")
    index(src, home)
    mem = cite(home, src, "retry.py")
    src.mv("retry.py", "moved.py")
    c2 = src.commit("rename at the root")
    clone = _partial_clone(src, tmp_path / "partial.git")
    build_snapshot(clone, home, rev=c2, jobs=1)
    assert_obs(observe(home, clone, mem, at=c2), "unknown", "incomplete-coverage", None)


def test_cited_path_inside_a_missing_tree_is_never_deleted(make_repo, tmp_path, home):
    # vendor/ is unchanged since capture, so the bounded diff is complete — but this clone
    # cannot see the cited file at all. Nothing may be called deleted.
    src = make_repo("src", remote=URL)
    src.write("vendor/retry.py", RETRY)
    src.write("top.py", "T = 1\n")
    src.commit("c1")
    index(src, home)
    mem = cite(home, src, "vendor/retry.py", "vendor/retry.py#L4-L6", "vendor/retry.py::helper")
    src.write("top.py", "T = 2\n")
    c2 = src.commit("unrelated")
    clone = _partial_clone(src, tmp_path / "partial.git")
    build_snapshot(clone, home, rev=c2, jobs=1)
    m = memory_verdict(home, clone, mem, at=c2)
    for c in m["citations"]:
        assert_obs(c, "unknown", "incomplete-coverage", None)


# --- preconditions (§6 "before anything") -------------------------------------------------


def test_not_current_after_an_unindexed_commit(repo, home, cited):
    repo.write("src/other.py", "X = 3\n")
    repo.commit("not indexed")
    assert_obs(observe(home, repo, cited), "unknown", "not-current", None)
    index(repo, home)
    assert_obs(observe(home, repo, cited), "exact", None, loc("src/retry.py"))


def test_not_current_for_dirty_worktree_without_overlay(repo, home, cited):
    repo.write("src/other.py", "X = 4\n")  # dirty, not indexed
    assert_obs(observe(home, repo, cited), "unknown", "not-current", None)
    index(repo, home)  # overlay for this dirty state
    assert_obs(observe(home, repo, cited), "exact", None, loc("src/retry.py"))
    repo.write("src/other.py", "X = 5\n")  # another dirty state: overlay no longer current
    assert_obs(observe(home, repo, cited), "unknown", "not-current", None)


def test_not_current_applies_to_every_kind(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    mem = cite(home, repo, "src/retry.py", "src/retry.py#L1-L1", "src/retry.py::helper")
    repo.write("new.py", "N = 1\n")
    repo.commit("c2")
    m = memory_verdict(home, repo, mem)
    assert [(c["outcome"], c["reason"], c["observed"]) for c in m["citations"]] == [
        ("unknown", "not-current", None)] * 3
    assert (m["freshness"], m["status"]) == ("unknown", "unknown")


def test_out_of_scope_citation(make_repo, home):
    a, b = make_repo("a"), make_repo("b")
    for r in (a, b):
        r.write("src/retry.py", RETRY)
        r.commit("c1")
        index(r, home)
    mem_a = cite(home, a, "src/retry.py", topic="from-a")
    mem_b = cite(home, b, "src/retry.py", topic="from-b")
    data = verdicts(home, b, memory_ids=[mem_a["id"], mem_b["id"]])
    by_id = {m["id"]: m for m in data["memories"]}
    assert_obs(by_id[mem_a["id"]]["citations"][0], "unknown", "out-of-scope", None)
    assert_obs(by_id[mem_b["id"]]["citations"][0], "exact", None, loc("src/retry.py"))


def test_racing_commit_makes_every_observation_of_that_repository_unknown(make_repo, home):
    a, b = make_repo("a"), make_repo("b")
    mems = {}
    for name, r in (("a", a), ("b", b)):
        r.write("src/retry.py", RETRY)
        r.commit("c1")
        index(r, home)
        mems[name] = cite(home, r, "src/retry.py", "src/retry.py#L4-L6", "src/retry.py::helper",
                          topic=f"m-{name}")
    done = []

    def commit_in_a() -> None:
        if not done:
            a.write("src/other.py", "Y = 1\n")
            a.commit("racing commit")
            done.append(True)

    data = verdicts(home, a, b, memory_ids=[mems["a"]["id"], mems["b"]["id"]],
                    source=ChangeBeforeRecheck(commit_in_a))
    by_id = {m["id"]: m for m in data["memories"]}
    assert [(c["outcome"], c["reason"], c["observed"]) for c in by_id[mems["a"]["id"]]["citations"]] == [
        ("unknown", "racing", None)] * 3
    assert [c["outcome"] for c in by_id[mems["b"]["id"]]["citations"]] == ["exact"] * 3


def test_racing_dirty_edit(repo, home, cited):
    def edit() -> None:
        repo.write("src/other.py", "X = 99\n")

    c = observe(home, repo, cited, source=ChangeBeforeRecheck(edit))
    assert_obs(c, "unknown", "racing", None)


def test_racing_is_not_cached(repo, home, cited):
    # A racing answer must not be remembered under the snapshot id it started from.
    def edit() -> None:
        repo.write("src/other.py", "X = 100\n")

    assert_obs(observe(home, repo, cited, source=ChangeBeforeRecheck(edit)), "unknown", "racing", None)
    repo.write("src/other.py", "X = 1\n")  # back to the clean, indexed state
    assert_obs(observe(home, repo, cited), "exact", None, loc("src/retry.py"))


def test_limit_marks_citations_beyond_the_bound(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.write("src/other.py", "X = 1\n")
    repo.commit("c1")
    index(repo, home)
    mem = cite(home, repo, "src/retry.py", "src/other.py")
    scope = resolve_scope(home, [str(repo.root)])
    with MemoryStore.open(home) as ms:
        inputs = api.to_inputs(api.select_memories(ms, [mem["id"]]))
    report = validate(home, inputs, scope, max_citations=1).to_json()
    first, second = report["memories"][0]["citations"]
    assert_obs(first, "exact", None, loc("src/retry.py"))
    assert_obs(second, "unknown", "limit", None)


def test_repository_ambiguous_for_two_worktrees_at_different_states(repo, home, tmp_path, cited):
    c1 = repo.head()
    repo.write("src/other.py", "X = 7\n")
    repo.commit("c2")
    index(repo, home)
    wt = tmp_path / "wt"
    repo.git("worktree", "add", "-q", "--detach", str(wt), c1)
    build_snapshot(wt, home, jobs=1)
    data = verdicts(home, repo, wt, memory_ids=[cited["id"]])
    assert_obs(data["memories"][0]["citations"][0], "unknown", "repository-ambiguous", None)
