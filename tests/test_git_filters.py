"""Worktree bytes as git sees them (issue 20, item 3; indexer/git_filters.py).

Real repositories with a real ``.gitattributes`` (``eol=crlf``, ``ident``), a real
``core.autocrlf=true`` and a real filter driver in ``.git/config``: a file is dirty exactly
when ``git status`` says so, its dirty blob is the one ``git hash-object`` (filters on)
names, and a file, span and symbol citation captured on an uncommitted file validates
``exact`` right after an unchanged ``git commit`` — in the one-shot scan and in the
service's event-fed state. A filter driver is never run (its marker file never appears);
a file it would change reads dirty, never clean, and never exact."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from gitutil import GIT_ENV, GitRepo

from citegraph.graph.live_state import LiveRepo
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.memory import api

CODE_LF = b'"""Retries."""\n# $Id$\n\n\ndef next_delay(attempt):\n    return 2 ** attempt\n\n\nTRIES = 3\n'
REFS = ["src/retry.py", "src/retry.py#L5-L6", "src/retry.py::next_delay"]


def crlf(data: bytes) -> bytes:
    return data.replace(b"\n", b"\r\n")


def one_shot(g: GitRepo) -> dict[str, str | None]:
    return dict(gitrepo.worktree_state(gitrepo.open_repository(g.root)).dirty_paths)


def live(g: GitRepo) -> dict[str, str | None]:
    state = LiveRepo(g.root)
    try:
        return dict(state.sync().state.dirty_paths)
    finally:
        state.close()


def git_status(g: GitRepo) -> set[str]:
    out = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
                         cwd=g.root, env={**os.environ, **GIT_ENV}, capture_output=True, text=True, check=True,
                         timeout=60).stdout
    return {rec[3:] for rec in out.split("\0") if rec}


def outcomes(home: Home, g: GitRepo, mid: str) -> list[str]:
    rep = api.validate_memories(home, memory_ids=[mid], repo_paths=[str(g.root)]).to_json()
    return [c["outcome"] for c in rep["memories"][0]["citations"]]


def setup_eol(g: GitRepo) -> Callable[[bytes], bytes]:
    g.write(".gitattributes", "*.py text eol=crlf\n")
    return crlf


def setup_autocrlf(g: GitRepo) -> Callable[[bytes], bytes]:
    g.git("config", "core.autocrlf", "true")
    return crlf


def setup_ident(g: GitRepo) -> Callable[[bytes], bytes]:
    g.write(".gitattributes", "*.py ident\n")
    return lambda data: data.replace(b"$Id$", b"$Id: 0123456789abcdef0123456789abcdef01234567 $")


def setup_utf16(g: GitRepo) -> Callable[[bytes], bytes]:
    g.write(".gitattributes", "*.py text eol=crlf working-tree-encoding=UTF-16\n")
    return lambda data: crlf(data).decode().encode("utf-16")  # with its BOM, as git requires


# Each setup returns how a file looks in the worktree (git's checkout form) given its LF text.
SETUPS = {"eol-crlf": setup_eol, "autocrlf": setup_autocrlf, "ident": setup_ident, "utf-16": setup_utf16}


@pytest.mark.parametrize("how", ["untracked", "dirty"])
@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_captured_uncommitted_then_committed_is_exact(tmp_path: Path, setup: str, how: str) -> None:
    g = GitRepo(tmp_path / "repo")
    home = Home.open(tmp_path / "home")
    form = SETUPS[setup](g)
    worktree_bytes = form(CODE_LF)
    g.write("README.md", "# repo\n")
    if how == "dirty":  # tracked, committed once, then edited (the worktree in git's checkout form)
        g.write("src/retry.py", form(CODE_LF.replace(b"TRIES = 3", b"TRIES = 1")))
    g.commit("init")
    g.write("src/retry.py", worktree_bytes)
    blob = g.git("hash-object", "src/retry.py")  # what git add would store (filters on)
    assert git_status(g) == {"src/retry.py"}
    assert one_shot(g) == live(g) == {"src/retry.py": blob}
    build_snapshot(g.root, home)
    mem = api.remember(home, "delays double", repo=g.root, refs=REFS, topic="t")
    assert outcomes(home, g, mem["id"]) == ["exact"] * 3

    g.commit("add retry")
    assert g.git("rev-parse", "HEAD:src/retry.py") == blob
    assert (g.root / "src/retry.py").read_bytes() == worktree_bytes  # git did not rewrite the file
    assert git_status(g) == set() and one_shot(g) == live(g) == {}
    build_snapshot(g.root, home)
    assert outcomes(home, g, mem["id"]) == ["exact"] * 3

    # A real change is still a change: one line edited, in the worktree's own form.
    g.write("src/retry.py", form(CODE_LF.replace(b"2 ** attempt", b"3 ** attempt")))
    assert one_shot(g) == live(g) == {"src/retry.py": g.git("hash-object", "src/retry.py")}
    build_snapshot(g.root, home)
    assert outcomes(home, g, mem["id"]) == ["changed", "changed", "changed"]


def test_a_checkout_with_crlf_is_clean_and_cited_as_stored(tmp_path: Path) -> None:
    """``core.autocrlf=true`` on a clone: every file checked out with CRLF is clean."""
    src = GitRepo(tmp_path / "src")
    src.write("src/retry.py", CODE_LF)
    src.commit("init")
    g = GitRepo(tmp_path / "clone")
    g.git("config", "core.autocrlf", "true")
    g.git("pull", "-q", str(src.root), "main")
    assert (g.root / "src/retry.py").read_bytes() == crlf(CODE_LF)
    os.utime(g.root / "src/retry.py", ns=(1, 1))  # stat changed: the content must be compared
    assert git_status(g) == set() and one_shot(g) == live(g) == {}


def _marker_filter(g: GitRepo, marker: Path, clean: str) -> None:
    g.write(".gitattributes", "*.cfg filter=redact\n")
    g.git("config", "filter.redact.clean", f"sh -c 'echo ran >> {marker}; {clean}'")
    g.git("config", "filter.redact.smudge", f"sh -c 'echo ran >> {marker}; cat'")


def test_a_filter_driver_never_runs_and_never_makes_a_false_clean(tmp_path: Path) -> None:
    g = GitRepo(tmp_path / "repo")
    home = Home.open(tmp_path / "home")
    marker = tmp_path / "marker"
    _marker_filter(g, marker, "sed s/^password=.*/password=REDACTED/")
    g.write("app.cfg", "user=me\npassword=REDACTED\n")
    g.write("same.cfg", "user=you\n")
    g.commit("init")
    marker.unlink(missing_ok=True)  # git's own add ran it; from here on only citegraph acts
    build_snapshot(g.root, home)
    mem = api.remember(home, "config", repo=g.root, refs=["app.cfg", "app.cfg#L2-L2", "same.cfg"], topic="t")

    # The driver would store these bytes unchanged: a bare touch leaves them exact.
    os.utime(g.root / "same.cfg", ns=(1, 1))
    # The driver would redact this one: git calls it clean; citegraph cannot know (it runs
    # no command), so the file is dirty (never a false clean) and every verdict about it
    # but exact is unknown/filter-driver (never a false changed, never a false exact).
    g.write("app.cfg", "user=me\npassword=hunter2\n")
    state = one_shot(g)
    assert state == live(g) and set(state) == {"app.cfg"}
    build_snapshot(g.root, home)
    rep = api.validate_memories(home, memory_ids=[mem["id"]], repo_paths=[str(g.root)]).to_json()
    got = [(c["outcome"], c["reason"]) for c in rep["memories"][0]["citations"]]
    assert got == [("unknown", "filter-driver"), ("unknown", "filter-driver"), ("exact", None)]
    # Capturing it now would record bytes git does not store: refused, one clear line.
    with pytest.raises(CitegraphError, match="filter driver 'redact'"):
        api.remember(home, "new", repo=g.root, refs=["app.cfg#L1-L1"], topic="u")
    assert not marker.exists()

    g.commit("new password, redacted by the driver")  # git runs it: the stored blob is unchanged
    assert g.git("rev-parse", "HEAD:app.cfg") == g.git("rev-parse", "HEAD~1:app.cfg")
    marker.unlink(missing_ok=True)
    assert one_shot(g) == live(g) == {}
    build_snapshot(g.root, home)
    assert outcomes(home, g, mem["id"]) == ["exact", "exact", "exact"]

    g.write("app.cfg", "user=them\npassword=REDACTED\n")  # a real edit: still never exact
    build_snapshot(g.root, home)
    assert outcomes(home, g, mem["id"]) == ["unknown", "exact", "exact"]
    assert not marker.exists()


MATRIX_CONTENTS = {"lf": b"a\nb\n", "crlf": b"a\r\nb\r\n", "mixed": b"a\r\nb\nc\r\n", "bin": b"\0a\r\nb\r\n",
                   "ident": b"x $Id: 0123 $\r\n", "u16": "a\r\nb\n".encode("utf-16"),
                   "u16le": "a\r\nb\n".encode("utf-16-le")}
MATRIX_ATTRS = ["", "* text", "* text=auto", "* text eol=crlf", "* eol=lf", "* -text", "* binary", "* ident",
                "* text ident", "*u16 working-tree-encoding=UTF-16\n*u16le working-tree-encoding=UTF-16LE",
                "*u16 text working-tree-encoding=UTF-16\n*u16le text eol=crlf working-tree-encoding=UTF-16LE"]


@pytest.mark.parametrize("autocrlf", ["false", "true", "input"])
def test_dirty_set_and_blobs_equal_git_over_a_matrix(tmp_path: Path, autocrlf: str) -> None:
    """Every attribute line × LF/CRLF/mixed/binary/ident contents, tracked (stat changed,
    so the content is compared) and untracked: the dirty set is ``git status``'s and each
    dirty blob is ``git hash-object``'s (filters on)."""
    for k, attr in enumerate(MATRIX_ATTRS):
        g = GitRepo(tmp_path / f"r{k}")
        g.git("config", "core.autocrlf", autocrlf)
        g.git("config", "core.safecrlf", "false")
        if attr:
            g.write(".gitattributes", attr + "\n")
        for name, data in MATRIX_CONTENTS.items():
            g.write(f"t_{name}", data)
        g.commit("c")
        for name, data in MATRIX_CONTENTS.items():
            g.write(f"u_{name}", data)
            os.utime(g.root / f"t_{name}", ns=(1, 1))
        dirty = git_status(g)
        want = {p: g.git("hash-object", p) for p in dirty}
        assert one_shot(g) == want, attr
        assert live(g) == want, attr
