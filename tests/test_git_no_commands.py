"""No command from the repository's configuration runs (issue 20, item 5).

A sparse index makes citegraph ask ``git status`` itself (indexer/sparse.py). The
repository's ``.git/config`` names a real filter driver (clean, smudge and a long-running
process), an fsmonitor hook, a pager, an ssh command, an editor and an askpass program; each
would write a marker file if it ran. After ``citegraph index`` no marker exists, and the
dirty set is still the one git reports (the filtered file, touched, is taken as git's
stat-unchanged-or-dirty view, never run through the filter)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pygit2
import pytest
from gitutil import GIT_ENV, GitRepo

from citegraph.indexer import gitrepo, sparse


def _marker_command(marker: Path, name: str) -> str:
    return f"sh -c 'echo {name} >> {marker}; cat'"


@pytest.fixture
def hostile_sparse(tmp_path: Path) -> tuple[GitRepo, Path]:
    src = GitRepo(tmp_path / "src")
    src.write(".gitattributes", "*.py filter=mark\n*.txt filter=mark.sub\n*.md filter=markp\n")
    src.write("pkg/mod.py", "def run():\n    return 2\n")
    src.write("pkg/notes.txt", "notes\n")
    src.write("pkg/readme.md", "# read me\n")
    src.write("lib/util.py", "def helper():\n    return 1\n")
    src.commit("initial")
    wt = tmp_path / "wt"
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "clone", "-q", str(src.root), str(wt)], env=env, check=True, capture_output=True,
                   timeout=60)
    g = GitRepo.__new__(GitRepo)
    g.root = wt
    g.git("sparse-checkout", "init", "--cone", "--sparse-index")
    g.git("sparse-checkout", "set", "pkg")
    with pytest.raises(pygit2.GitError, match="sdir"):
        pygit2.Repository(str(wt)).index  # noqa: B018 - the path that shells out to git
    marker = tmp_path / "marker"
    for key, name in (("filter.mark.clean", "clean"), ("filter.mark.smudge", "smudge"),
                      ("filter.mark.sub.clean", "sub-clean"), ("filter.markp.process", "process"),
                      ("core.fsmonitor", "fsmonitor"), ("core.pager", "pager"), ("core.sshCommand", "ssh"),
                      ("core.editor", "editor"), ("core.askPass", "askpass"), ("diff.external", "diff")):
        g.git("config", key, _marker_command(marker, name))
    g.git("config", "filter.mark.required", "true")
    g.git("config", "core.hooksPath", str(tmp_path / "hooks"))
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for hook in ("post-index-change", "fsmonitor-watchman", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\necho hook-{hook} >> {marker}\n")
        (hooks / hook).chmod(0o755)
    return g, marker


def _touch(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns + 5_000_000_000, st.st_mtime_ns + 5_000_000_000))


def test_git_status_runs_no_configured_command(hostile_sparse, home, run_cli):
    g, marker = hostile_sparse
    # Stat data that differs from the index makes git re-read (and clean-filter) the files.
    _touch(g.root / "pkg/mod.py")
    _touch(g.root / "pkg/notes.txt")
    _touch(g.root / "pkg/readme.md")
    g.write("pkg/new.py", "N = 1\n")
    state = gitrepo.worktree_state(gitrepo.open_repository(g.root))
    assert not marker.exists(), marker.read_text()
    assert "pkg/new.py" in dict(state.dirty_paths)
    res = run_cli("index", str(g.root), "--json", timeout=120)
    assert res.returncode == 0, res.stderr
    assert not marker.exists(), marker.read_text()


def test_the_overrides_cover_every_configured_filter(hostile_sparse):
    g, marker = hostile_sparse
    cmd, env = sparse.git_command(str(g.root), str(g.root / ".git"), "status")
    keys = [env[f"GIT_CONFIG_KEY_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))]
    for name in ("mark", "mark.sub", "markp"):
        for var in ("clean", "smudge", "process"):
            assert f"filter.{name}.{var}" in keys
    # What the overrides leave: git itself agrees the filters are empty.
    out = subprocess.run([*cmd[:-1], "config", "--get-all", "filter.mark.clean"], env=env, capture_output=True,
                         timeout=30, cwd=g.root).stdout.decode().splitlines()
    assert out[-1] == ""
    assert not marker.exists()


def test_the_marker_filter_is_real(hostile_sparse):
    """The fixture's filter does run under plain git (so the tests above can fail)."""
    g, marker = hostile_sparse
    _touch(g.root / "pkg/mod.py")
    subprocess.run(["git", "status", "--porcelain"], cwd=g.root, env={**os.environ, **GIT_ENV},
                   capture_output=True, timeout=60, check=True)
    assert marker.exists() and "clean" in marker.read_text()



def test_a_submodule_is_judged_without_its_own_configuration(tmp_path: Path):
    """``git status`` would recurse into a submodule under the submodule's configuration
    (whose filters were not listed): the scan asks libgit2 instead, and a submodule with
    changes inside is dirty exactly as in the libgit2 scan; its filter never runs."""
    marker = tmp_path / "marker"
    sub = GitRepo(tmp_path / "sub")
    sub.write(".gitattributes", "* filter=inner\n")
    sub.write("x.txt", "x\n")
    sub.commit("s")
    sup = GitRepo(tmp_path / "sup")
    sup.write("a.txt", "a\n")
    sup.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub.root), "sm")
    sup.commit("sup")
    inner = GitRepo.__new__(GitRepo)
    inner.root = sup.root / "sm"
    inner.git("config", "filter.inner.clean", _marker_command(marker, "inner-clean"))
    _touch(sup.root / "sm/x.txt")
    root, gitdir = str(sup.root), str(sup.root / ".git")

    def scans() -> tuple[dict, dict]:
        repo = gitrepo.open_repository(sup.root)
        by_git = gitrepo._state_by_git(repo, gitrepo.head_commit(repo), sup.root)
        return dict(by_git.dirty_paths), dict(gitrepo.worktree_state(repo).dirty_paths)

    assert {e.path for e in sparse.git_status(root, gitdir)} == set()
    by_git, by_libgit2 = scans()
    assert by_git == by_libgit2 == {}
    (sup.root / "sm/x.txt").write_text("changed\n")
    by_git, by_libgit2 = scans()
    assert by_git == by_libgit2 and set(by_git) == {"sm"}
    assert not marker.exists(), marker.read_text()
