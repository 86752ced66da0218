"""Sparse checkouts and partial clones (indexer/sparse.py, docs/design.md "Sparse checkouts").

Every repository here is made by real git: ``git sparse-checkout set --cone`` and
``--no-cone``, ``git sparse-checkout init --cone --sparse-index`` (an index libgit2 cannot
read), and ``git clone --filter=blob:none`` over ``file://``. A path outside the sparse set
(skip-worktree) is neither dirty nor deleted — in the one-shot scan and in the service's
event-fed state — and the snapshot keeps its committed facts; after each step the dirty
set equals the one ``git status`` reports.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pygit2
import pytest
from gitutil import GIT_ENV, GitRepo

from citegraph.graph.current import current_state
from citegraph.graph.live_state import LiveRepo
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.tree_watch import AVAILABLE
from citegraph.validator.capture import capture
from citegraph.validator.pipeline import MemoryInput, resolve_scope, validate

UTIL = "def helper(x):\n    return x + 1\n\n\nclass Store:\n    def get(self):\n        return 1\n"
FILES = {
    "main.py": "def main():\n    return 0\n",
    "README.txt": "read me\n",
    "pkg/mod.py": "class Mod:\n    def run(self):\n        return 2\n",
    "pkg/sub/inner.py": "def inner():\n    return 3\n",
    "lib/util.py": UTIL,
    "lib/deep/x.py": "X = 1\n\n\ndef x():\n    return X\n",
    "docs/notes.md": "# notes\n",
}
OUTSIDE = ("lib/util.py", "lib/deep/x.py", "docs/notes.md")  # outside every sparse set below


class Clone(GitRepo):
    """A clone of another test repository (``git clone`` with extra arguments)."""

    def __init__(self, root: Path, source: str, *args: str) -> None:  # noqa: D107 - no git init
        self.root = Path(root)
        env = {**os.environ, **GIT_ENV}
        subprocess.run(["git", "clone", "-q", *args, source, str(self.root)], env=env, check=True,
                       capture_output=True)


def _source(tmp_path: Path) -> GitRepo:
    src = GitRepo(tmp_path / "src")
    for p, t in FILES.items():
        src.write(p, t)
    src.commit("initial")
    return src


def git_dirty(g: GitRepo) -> dict[str, str | None]:
    """What git itself calls dirty: ``git status`` (never refreshing the index), with the
    content blob of each path as citegraph records it (None for deleted)."""
    out = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all",
                          "--no-renames"], cwd=g.root, env={**os.environ, **GIT_ENV}, capture_output=True,
                         text=True, check=True).stdout
    paths = [rec[3:] for rec in out.split("\0") if rec]
    res: dict[str, str | None] = {}
    staged = dict(_index_blobs(g))
    for p in paths:
        full = g.root / p
        if full.exists():
            res[p] = g.git("hash-object", "--no-filters", p)
        elif p in staged and p in _skip_worktree(g):
            res[p] = staged[p]  # outside the sparse set: git takes the index's blob
        else:
            res[p] = None
    return res


def _index_blobs(g: GitRepo) -> list[tuple[str, str]]:
    out = g.git("ls-files", "-s", "-z")
    return [(rec.split("\t", 1)[1], rec.split()[1]) for rec in out.split("\0") if rec]


def _skip_worktree(g: GitRepo) -> set[str]:
    out = g.git("ls-files", "-t", "-z")
    return {rec[2:] for rec in out.split("\0") if rec.startswith("S ")}


def one_shot(g: GitRepo) -> dict[str, str | None]:
    return dict(gitrepo.worktree_state(gitrepo.open_repository(g.root)).dirty_paths)


def _rows(home: Home, res) -> dict[str, tuple]:
    with Snapshot.open(home.repo(res.repository_id), res.snapshot_id) as snap:
        return {r[0]: r[1:] for r in snap.query("SELECT path, blob_id, status, reason, dirty FROM files")}


def _symbols(home: Home, res, path: str) -> list[str]:
    with Snapshot.open(home.repo(res.repository_id), res.snapshot_id) as snap:
        return sorted(r[0] for r in snap.query("SELECT qualified_name FROM symbols WHERE path = ?", [path]))


def _head_blob(g: GitRepo, path: str) -> str:
    return g.git("rev-parse", f"HEAD:{path}")


SPARSE_SETS = {
    "cone": (("sparse-checkout", "set", "--cone", "pkg"),),
    "no-cone": (("sparse-checkout", "set", "--no-cone", "/*", "!/lib/", "!/docs/"),),
    "sparse-index": (("sparse-checkout", "init", "--cone", "--sparse-index"),
                     ("sparse-checkout", "set", "pkg")),
}


def _sparse_clone(tmp_path: Path, mode: str) -> tuple[GitRepo, GitRepo]:
    src = _source(tmp_path)
    wt = Clone(tmp_path / f"wt-{mode}", str(src.root))
    for args in SPARSE_SETS[mode]:
        wt.git(*args)
    # The test is about real skip-worktree entries: they exist and their files do not.
    assert all(not (wt.root / p).exists() for p in OUTSIDE)
    if mode == "sparse-index":
        with pytest.raises(pygit2.GitError, match="sdir"):
            pygit2.Repository(str(wt.root)).index  # noqa: B018 - libgit2 refuses it
        assert "lib/" in wt.git("ls-files", "--sparse", "-t")  # a collapsed directory entry
    else:
        assert set(OUTSIDE) <= _skip_worktree(wt)
    return src, wt


@pytest.mark.parametrize("mode", sorted(SPARSE_SETS))
def test_outside_the_sparse_set_is_neither_dirty_nor_deleted(tmp_path, home, mode):
    src, wt = _sparse_clone(tmp_path, mode)
    assert one_shot(wt) == git_dirty(wt) == {}
    cur = current_state(wt.root, home)
    assert not cur.dirty

    # A clean sparse worktree's snapshot is the commit's snapshot: the same id, the
    # committed facts of every path, also those outside the cone.
    res = build_snapshot(wt.root, home, jobs=1)
    assert not res.dirty
    assert build_snapshot(wt.root, home, rev="HEAD", jobs=1).snapshot_id == res.snapshot_id
    rows = _rows(home, res)
    assert sorted(rows) == sorted(FILES)
    for p in OUTSIDE:
        assert rows[p] == (_head_blob(wt, p), "indexed" if p.endswith(".py") else "skipped",
                           None if p.endswith(".py") else "unsupported-language", False)
    assert _symbols(home, res, "lib/util.py") == ["Store", "Store.get", "helper"]
    # ... and the same snapshot a full checkout of the commit has (another clone, same id).
    full = Clone(tmp_path / "full", str(src.root))
    full_home = Home.open(tmp_path / "full-home")
    full_res = build_snapshot(full.root, full_home, jobs=1)
    assert (full_res.snapshot_id, full_res.content_id) == (res.snapshot_id, res.content_id)

    # An edit inside the cone is the only dirty path; outside, the committed facts stay.
    wt.write("pkg/mod.py", "class Mod:\n    def run(self):\n        return 3\n")
    assert one_shot(wt) == git_dirty(wt)
    assert set(one_shot(wt)) == {"pkg/mod.py"}
    res2 = build_snapshot(wt.root, home, jobs=1)
    rows2 = _rows(home, res2)
    assert rows2["pkg/mod.py"][3] is True
    assert {p: rows2[p] for p in OUTSIDE} == {p: rows[p] for p in OUTSIDE}
    clean = build_snapshot(wt.root, Home.open(tmp_path / "clean"), jobs=1)
    assert clean.content_id == res2.content_id

    # A file put where the sparse set has none is compared as git compares it (git ≥ 2.37
    # clears the skip-worktree bit of a present file): different bytes are dirty.
    wt.write("lib/util.py", UTIL + "\n# local\n")
    assert one_shot(wt) == git_dirty(wt)
    assert set(one_shot(wt)) == {"pkg/mod.py", "lib/util.py"}
    wt.delete("lib/util.py")
    assert one_shot(wt) == git_dirty(wt)
    assert set(one_shot(wt)) == {"pkg/mod.py"}


@pytest.mark.parametrize("mode", ["cone", "sparse-index"])
def test_a_staged_move_out_of_the_cone_has_the_index_content(tmp_path, home, mode):
    """``git mv --sparse`` into a directory outside the cone stages the file there and
    leaves no file behind: git takes its content to be the index's blob."""
    _src, wt = _sparse_clone(tmp_path, mode)
    blob = _head_blob(wt, "pkg/mod.py")
    wt.git("mv", "--sparse", "pkg/mod.py", "lib/mod.py")
    assert not (wt.root / "lib/mod.py").exists()
    state = gitrepo.worktree_state(gitrepo.open_repository(wt.root))
    assert dict(state.dirty_paths) == git_dirty(wt) == {"pkg/mod.py": None, "lib/mod.py": blob}
    assert state.from_index == (("lib/mod.py", 0o100644),)
    res = build_snapshot(wt.root, home, jobs=1)
    rows = _rows(home, res)
    assert "pkg/mod.py" not in rows
    assert rows["lib/mod.py"] == (blob, "indexed", None, True)
    assert _symbols(home, res, "lib/mod.py") == ["Mod", "Mod.run"]
    clean = build_snapshot(wt.root, Home.open(tmp_path / "clean"), jobs=1)
    assert (clean.snapshot_id, clean.content_id) == (res.snapshot_id, res.content_id)


def test_citations_outside_the_cone_validate_against_committed_bytes(tmp_path, home):
    src, wt = _sparse_clone(tmp_path, "cone")
    build_snapshot(wt.root, home, jobs=1)
    receipts = capture(home, wt.root, ["lib/util.py::helper", "lib/util.py#L1-L2", "lib/deep/x.py"])

    def outcomes() -> list[str]:
        rep = validate(home, [MemoryInput("m", receipts)], resolve_scope(home, [str(wt.root)]))
        return [o.outcome for v in rep.verdicts for o in v.observations]

    assert outcomes() == ["exact", "exact", "exact"]
    # The committed bytes outside the cone change (a pulled commit); the worktree has no
    # file there either way: the verdict follows the commit.
    src.write("lib/util.py", UTIL.replace("x + 1", "x + 2"))
    src.commit("change util")
    wt.git("pull", "-q", "--ff-only")
    assert not (wt.root / "lib/util.py").exists() and one_shot(wt) == {}
    build_snapshot(wt.root, home, jobs=1)
    assert outcomes() == ["changed", "changed", "exact"]


def test_partial_clone_outside_the_cone(tmp_path, home):
    """``--filter=blob:none`` + a cone: blobs outside it were never fetched. They are
    inventoried with their committed blob ids as ``skipped/missing-blob`` (nothing is
    fetched at index time), and nothing is dirty."""
    src = _source(tmp_path)
    src.git("config", "uploadpack.allowFilter", "true")
    src.git("config", "uploadpack.allowAnySHA1InWant", "true")
    pc = Clone(tmp_path / "partial", f"file://{src.root}", "--filter=blob:none", "--sparse")
    pc.git("sparse-checkout", "set", "--cone", "pkg")
    repo = pygit2.Repository(str(pc.root))
    blobs = {p: _head_blob(pc, p) for p in FILES}
    missing = {p for p, b in blobs.items() if b not in repo.odb}
    assert missing == set(OUTSIDE)
    assert one_shot(pc) == git_dirty(pc) == {}
    res = build_snapshot(pc.root, home, jobs=1)
    rows = _rows(home, res)
    for p in OUTSIDE:
        assert rows[p] == (blobs[p], "skipped", "missing-blob", False)
    assert rows["pkg/mod.py"] == (blobs["pkg/mod.py"], "indexed", None, False)
    assert {p for p, b in blobs.items() if b not in pygit2.Repository(str(pc.root)).odb} == missing
    # Citations captured in a full clone (its own data home): an unchanged blob id proves
    # the bytes of a file or span; a symbol needs the facts, which the blob would give.
    full = Clone(tmp_path / "full", str(src.root))
    assert gitrepo.repository_identity(gitrepo.open_repository(full.root)) == \
        gitrepo.repository_identity(repo)
    full_home = Home.open(tmp_path / "full-home")
    build_snapshot(full.root, full_home, jobs=1)
    receipts = capture(full_home, full.root, ["lib/util.py", "lib/util.py#L1-L2", "lib/util.py::helper",
                                              "pkg/mod.py::Mod"])
    rep = validate(home, [MemoryInput("m", receipts)], resolve_scope(home, [str(pc.root)]))
    assert [(o.outcome, o.reason) for v in rep.verdicts for o in v.observations] == [
        ("exact", None), ("exact", None), ("unknown", "incomplete-coverage"), ("exact", None)]


@pytest.mark.skipif(not AVAILABLE, reason="inotify (Linux) only")
@pytest.mark.parametrize("mode", sorted(SPARSE_SETS))
def test_the_service_state_matches_git_in_a_sparse_checkout(tmp_path, mode):
    _src, wt = _sparse_clone(tmp_path, mode)
    live = LiveRepo(wt.root)
    try:
        def check(step: str) -> None:
            got = dict(live.sync().state.dirty_paths)
            assert got == one_shot(wt) == git_dirty(wt), step

        check("initial")
        steps = [
            ("edit inside", lambda: wt.write("pkg/mod.py", "class Mod:\n    pass\n")),
            ("new file inside", lambda: wt.write("pkg/new.py", "N = 1\n")),
            ("a file outside appears", lambda: wt.write("lib/util.py", "changed\n")),
            ("and goes", lambda: wt.delete("lib/util.py")),
            ("same bytes outside", lambda: wt.write("docs/notes.md", FILES["docs/notes.md"])),
            ("move out of the cone", lambda: wt.git("mv", "--sparse", "pkg/sub/inner.py", "lib/inner.py")),
            ("widen", lambda: wt.git("sparse-checkout", "add", "lib")),
            ("edit what came in", lambda: wt.write("lib/deep/x.py", "X = 2\n")),
            ("commit", lambda: wt.commit("c2")),
            ("narrow", lambda: wt.git("sparse-checkout", "set", "pkg")),
            ("disable", lambda: wt.git("sparse-checkout", "disable")),
        ]
        for name, op in steps:
            op()
            check(name)
    finally:
        live.close()


def test_update_index_skip_worktree_without_a_sparse_checkout(tmp_path, home):
    """``git update-index --skip-worktree`` (no sparse checkout): git ignores the file,
    present and edited or gone, and so does citegraph; the snapshot keeps the commit's."""
    src = _source(tmp_path)
    src.git("update-index", "--skip-worktree", "lib/util.py")
    src.write("lib/util.py", "local edit\n")
    assert one_shot(src) == git_dirty(src) == {}
    src.delete("lib/util.py")
    assert one_shot(src) == git_dirty(src) == {}
    live = LiveRepo(src.root) if AVAILABLE else None
    try:
        if live is not None:
            assert dict(live.sync().state.dirty_paths) == {}
            src.write("lib/util.py", "again\n")
            assert dict(live.sync().state.dirty_paths) == {} == git_dirty(src)
    finally:
        if live is not None:
            live.close()
    res = build_snapshot(src.root, home, jobs=1)
    assert not res.dirty
    assert _rows(home, res)["lib/util.py"] == (_head_blob(src, "lib/util.py"), "indexed", None, False)
