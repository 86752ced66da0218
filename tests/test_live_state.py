"""The event-fed worktree state (graph.live_state) against the one-shot scan: after every
real git operation or file edit, a sync yields exactly the state a fresh `git status`
scan gives; lost events (overflow), a dead watcher and races are never hidden."""

from __future__ import annotations

import os
import shutil
import threading

import pytest
from gitutil import GitRepo
from hypothesis import given, settings
from hypothesis import strategies as st

from citegraph.graph.live_state import LiveRepo, SyncFailed
from citegraph.indexer import gitrepo
from citegraph.indexer.tree_watch import AVAILABLE, Batch

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="inotify (Linux) only")


def one_shot(repo: GitRepo) -> tuple[str, tuple]:
    s = gitrepo.worktree_state(gitrepo.open_repository(repo.root))
    return s.head, s.dirty_paths


def live_state(live: LiveRepo) -> tuple[str, tuple]:
    v = live.sync()
    return v.state.head, v.state.dirty_paths


@pytest.fixture
def world(repo):
    repo.write("a.py", "x = 1\n")
    repo.write("lib/b.py", "y = 2\n")
    repo.write("lib/deep/c.py", "z = 3\n")
    repo.write(".gitignore", "*.log\nbuild/\n")
    repo.commit("c1")
    live = LiveRepo(repo.root)
    yield repo, live
    live.close()


def _ops(repo: GitRepo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "b.py").write_text("y = 2\n")
    return [
        ("edit", lambda: repo.write("a.py", "x = 2\n")),
        ("untracked file", lambda: repo.write("new.py", "n = 1\n")),
        ("ignored file", lambda: repo.write("debug.log", "log\n")),
        ("ignored dir", lambda: repo.write("build/out.o", "o\n")),
        ("commit", lambda: repo.commit("c2")),
        ("new directory tree", lambda: repo.write("d/e/f.py", "f = 1\n")),
        ("move a directory", lambda: shutil.move(str(repo.root / "lib"), str(repo.root / "lib2"))),
        ("symlinked directory", lambda: (shutil.rmtree(repo.root / "lib2"), os.symlink(outside, repo.root / "lib"))),
        ("fifo", lambda: (os.unlink(repo.root / "a.py"), os.mkfifo(repo.root / "a.py"))),
        ("restore", lambda: (os.unlink(repo.root / "lib"), os.unlink(repo.root / "a.py"),
                             repo.git("checkout", "--", "lib", "a.py"))),
        ("branch and commit", lambda: (repo.git("checkout", "-q", "-b", "other"), repo.write("o.py", "o\n"),
                                       repo.commit("c3"))),
        ("checkout", lambda: repo.git("checkout", "-q", "main")),
        ("stash", lambda: (repo.write("a.py", "x = 9\n"), repo.git("stash", "-q"))),
        ("stash pop", lambda: repo.git("stash", "pop", "-q")),
        ("git add", lambda: repo.git("add", "a.py")),
        ("rm --cached", lambda: repo.git("rm", "-q", "--cached", "lib/b.py")),
        ("reset --hard", lambda: repo.git("reset", "-q", "--hard", "HEAD")),
        ("chmod +x", lambda: os.chmod(repo.root / "a.py", 0o755)),
        ("gitignore edit", lambda: repo.write(".gitignore", "*.log\n")),
        ("delete a tracked directory", lambda: shutil.rmtree(repo.root / "lib")),
        ("non-utf8 name", lambda: repo.write(os.fsdecode(b"caf\xe9.py"), "c = 1\n")),
    ]


def test_every_operation_reaches_the_one_shot_state(world, tmp_path):
    repo, live = world
    assert live_state(live) == one_shot(repo)
    for name, op in _ops(repo, tmp_path):
        op()
        assert live_state(live) == one_shot(repo), name
    assert live.events > 0 and live.rehashed > 0


def test_an_edit_rehashes_only_its_path(world):
    repo, live = world
    live.sync()
    before = (live.rescans, live.rehashed)
    repo.write("a.py", "x = 5\n")
    assert live_state(live) == one_shot(repo)
    assert live.rescans == before[0]  # no scan of the worktree
    assert live.rehashed - before[1] == 1


def test_overflow_means_racing_then_a_rescan(world):
    repo, live = world
    v1 = live.sync()
    repo.write("a.py", "x = 7\n")
    live._on_batch(Batch(overflow=True))  # the kernel said it dropped events
    v2 = live.sync()
    assert v2.generation == v1.generation + 1  # every read that spans this is racing
    assert (v2.state.head, v2.state.dirty_paths) == one_shot(repo)
    assert live.rescans >= 2


def test_a_dead_watcher_fails_the_sync_then_recovers(world):
    repo, live = world
    v1 = live.sync()
    live.watcher.stop.set()  # the watcher thread ends as if it had died
    live.watcher.thread.join(timeout=5)
    with pytest.raises(SyncFailed):
        live.sync(timeout_s=0.5)
    repo.write("a.py", "x = 8\n")  # a change nobody saw
    live.start_watcher()
    v2 = live.sync()
    assert v2.generation > v1.generation
    assert (v2.state.head, v2.state.dirty_paths) == one_shot(repo)


def test_a_change_between_two_syncs_moves_the_version(world):
    repo, live = world
    v1 = live.sync()
    assert live.sync().token == v1.token  # nothing happened
    repo.write("a.py", "x = 3\n")
    assert live.sync().token != v1.token
    repo.write("a.py", "x = 1\n")  # back to the committed bytes: still not the same read
    v3 = live.sync()
    assert v3.token != v1.token and v3.state.dirty_fingerprint is None


def test_concurrent_syncs(world):
    repo, live = world
    errors = []

    def reader():
        try:
            for _ in range(20):
                live.sync()
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for i in range(10):
        repo.write(f"w{i}.py", f"w = {i}\n")
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert live_state(live) == one_shot(repo)


PATHS = ["a.py", "lib/b.py", "lib/deep/c.py", "n1.py", "lib/n2.py", "x/y/n3.py", "debug.log"]


@st.composite
def worktree_op(draw):
    kind = draw(st.sampled_from(["write", "delete", "commit", "rmdir", "mkfifo", "symlink-dir", "add", "checkout-file",
                                 "rm-cached", "reset-soft", "reset-mixed", "stash"]))
    return kind, draw(st.sampled_from(PATHS)), draw(st.integers(0, 3))


@settings(deadline=None)
@given(st.lists(worktree_op(), min_size=1, max_size=12))
def test_random_sequences_match_one_shot(tmp_path_factory, ops):
    repo = GitRepo(tmp_path_factory.mktemp("live") / "r")
    repo.write("a.py", "x = 1\n")
    repo.write("lib/b.py", "y = 2\n")
    repo.write("lib/deep/c.py", "z = 3\n")
    repo.write(".gitignore", "*.log\n")
    repo.commit("c1")
    live = LiveRepo(repo.root)
    try:
        assert live_state(live) == one_shot(repo)
        for kind, path, n in ops:
            full = repo.root / path
            try:
                if kind == "write":
                    repo.write(path, f"v = {n}\n")
                elif kind == "delete" and (full.is_file() or full.is_symlink()):
                    full.unlink()
                elif kind == "commit":
                    repo.commit(f"c {n}")
                elif kind == "rmdir" and full.parent.is_dir() and full.parent != repo.root:
                    shutil.rmtree(full.parent)
                elif kind == "mkfifo" and not full.exists() and full.parent.is_dir():
                    os.mkfifo(full)
                elif kind == "symlink-dir" and full.parent != repo.root and not full.parent.exists():
                    os.symlink(repo.root / "lib", full.parent)
                elif kind == "add":
                    repo.git("add", "-A")
                elif kind == "checkout-file":
                    repo.git("checkout", "--", path, check=False)
                # index and HEAD changes: re-checked path by path, no full scan (live_state)
                elif kind == "rm-cached":
                    repo.git("rm", "-q", "--cached", "--ignore-unmatch", path, check=False)
                elif kind == "reset-soft":
                    repo.git("reset", "-q", "--soft", "HEAD~1", check=False)
                elif kind == "reset-mixed":
                    repo.git("reset", "-q", check=False)
                elif kind == "stash":
                    repo.git("stash", "-q", check=False)
            except OSError:
                continue
            assert live_state(live) == one_shot(repo), (kind, path)
    finally:
        live.close()


def test_git_operations_apply_without_a_full_scan(world):
    """HEAD and index changes re-check only the paths they can affect (the module
    docstring's rule): no full scan, and still exactly the one-shot state. A skip-worktree
    change (a sparse-checkout change) is the exception: a full scan."""
    repo, live = world
    assert live_state(live) == one_shot(repo)
    scans = live.rescans
    ops = [
        ("commit", lambda: (repo.write("a.py", "x = 2\n"), repo.commit("c2"))),
        ("branch and commit", lambda: (repo.git("checkout", "-q", "-b", "other"), repo.write("o.py", "o\n"),
                                       repo.commit("c3"))),
        ("checkout", lambda: repo.git("checkout", "-q", "main")),
        ("stash", lambda: (repo.write("a.py", "x = 9\n"), repo.git("stash", "-q"))),
        ("stash pop", lambda: repo.git("stash", "pop", "-q")),
        ("git add", lambda: repo.git("add", "a.py")),
        ("rm --cached of a clean file", lambda: repo.git("rm", "-q", "--cached", "lib/deep/c.py")),
        ("reset (mixed)", lambda: repo.git("reset", "-q")),
        ("reset --soft", lambda: repo.git("reset", "-q", "--soft", "HEAD~1")),
        ("reset --hard", lambda: repo.git("reset", "-q", "--hard", "HEAD")),
        # (read-tree drops the index's stat data: a `reset --hard` after it rewrites every
        # file, .gitignore too — a change of what is ignored, which is a full scan)
        ("read-tree of another commit (index only)", lambda: repo.git("read-tree", "other")),
        ("reset (mixed) back", lambda: repo.git("reset", "-q")),
        ("merge", lambda: repo.git("merge", "-q", "--no-edit", "other")),
    ]
    for name, op in ops:
        op()
        assert live_state(live) == one_shot(repo), name
        assert live.rescans == scans, name
    repo.write("a.py", "x = 42\n")
    repo.git("update-index", "--skip-worktree", "a.py")  # git now takes a.py to be its index blob
    assert live_state(live) == one_shot(repo)
    assert live.rescans == scans + 1
    repo.git("update-index", "--no-skip-worktree", "a.py")
    assert live_state(live) == one_shot(repo)
