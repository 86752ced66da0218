"""The service builds each worktree through one kept repository object (graph/live_state.py
``LiveRepo.build_repository``): a fresh ``pygit2.Repository`` reads the whole git index at
its first attribute lookup (280–400 ms per build on the 250k-file monorepo). What is kept
must never read a state as git would not: it is replaced when anything in the git
directory moves (a commit, the configuration), a concurrent build gets its own, and a
``.gitattributes`` edited in the worktree applies to the next build."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from citegraph.graph.current import current_state
from citegraph.graph.live_state import LiveRepo
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.indexer.tree_watch import AVAILABLE
from citegraph.server.service import Service

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="inotify (Linux) only")


def test_one_repository_is_kept_until_the_git_directory_moves(repo):
    repo.write("a.py", "def f():\n    return 1\n")
    repo.commit("c1")
    live = LiveRepo(repo.root)
    try:
        live.sync()
        with live.build_repository() as r1:
            with live.build_repository() as r2:  # a concurrent build: its own
                assert r2 is not r1
        with live.build_repository() as r3:
            assert r3 is r2  # the first given back is kept (the other is dropped)
        with live.build_repository() as r4:
            assert r4 is r3
        repo.write("a.py", "def f():\n    return 2\n")  # a worktree edit: still the same
        live.sync()
        with live.build_repository() as r5:
            assert r5 is r4
        repo.commit("c2")  # the git directory moved
        live.sync()
        with live.build_repository() as r6:
            assert r6 is not r5
        with live.build_repository() as r7:
            assert r7 is r6
        scans = live.rescans
        repo.git("config", "core.autocrlf", "true")  # the configuration: a full scan, a new one
        live.sync()
        assert live.rescans == scans + 1
        with live.build_repository() as r8:
            assert r8 is not r7
        repo.commit("c3")
        live.sync()
        live.warm_build_repository()  # opened and read now, for the next build
        warmed = live._build_repo
        assert warmed is not None and warmed[0] == live.repo_epoch
        with live.build_repository() as r9:
            assert r9 is warmed[1]
    finally:
        live.close()


def git_blob(repo, path: str) -> str:
    return subprocess.run(["git", "hash-object", path], cwd=repo.root, capture_output=True, text=True,
                          check=True, env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}).stdout.strip()


def built_blob(home, repo, path: str, svc) -> str:
    deadline = time.monotonic() + 60
    while True:
        cur = current_state(repo.root, home)
        w = svc.watched[str(repo.root)]
        if cur.exact_current and not w.want and not w.busy:
            with Snapshot.open(cur.store, cur.snapshot_id) as snap:
                return snap.dicts("SELECT blob_id FROM files WHERE path = ?", [path])[0]["blob_id"]
        assert time.monotonic() < deadline, (path, cur.snapshot_id, cur.exact_current, w.last.get("snapshot_id"), w.last_error, w.want, w.busy)
        time.sleep(0.05)


def test_a_gitattributes_edited_in_the_worktree_applies_to_the_next_build(repo, home):
    repo.write("a.py", "def f():\n    return 1\n")
    repo.commit("c1")
    svc = Service(home, debounce_ms=5, pool_context="fork")
    svc.start()
    try:
        svc.register(repo.root)
        text = "def g():\n    return 'ü'\n"
        (repo.root / "u.py").write_bytes(text.encode("utf-16"))  # untracked, with its BOM
        raw = built_blob(home, repo, "u.py", svc)
        assert raw == git_blob(repo, "u.py")  # no attributes: byte for byte
        repo.write(".gitattributes", "u.py working-tree-encoding=UTF-16\n")
        converted = built_blob(home, repo, "u.py", svc)
        assert converted == git_blob(repo, "u.py") != raw  # stored as UTF-8, as git would
        os.remove(repo.root / ".gitattributes")
        assert built_blob(home, repo, "u.py", svc) == raw
    finally:
        svc.close()
