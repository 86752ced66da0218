"""`citegraph watch` (SPEC §3): follows commits, checkouts and edits to an exact-current
ready snapshot; survives event bursts with bounded memory and builds; stops cleanly on
SIGTERM; a restart reuses finished work."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stall_launcher import stalled_argv

from citegraph.graph.current import current_state
from citegraph.graph.store import Home

TIMEOUT = 30.0


class WatchProc:
    def __init__(self, home: Home, log: Path, *args: str, env: dict | None = None,
                 stall: tuple[str, Path, float] | None = None) -> None:
        """``stall``: (stage, marker, seconds) — builds stall there (tests/stall_launcher.py)."""
        self.log = log
        self.fh = open(log, "w")
        full_env = {**os.environ, "CITEGRAPH_HOME": str(home.root), **(env or {})}
        argv = stalled_argv(*stall, "watch", *args) if stall else \
            [sys.executable, "-m", "citegraph.cli.main", "watch", *args]
        self.p = subprocess.Popen(argv, env=full_env, stdout=subprocess.DEVNULL, stderr=self.fh)

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines()

    def count(self, word: str) -> int:
        return sum(1 for line in self.lines() if f"watch: {word} " in line)

    def wait_line(self, word: str, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.count(word):
                return
            assert self.p.poll() is None, self.log.read_text()
            time.sleep(0.05)
        raise AssertionError(f"no '{word}' line within {timeout}s:\n{self.log.read_text()}")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.p.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 8.0) -> tuple[int, float]:
        t0 = time.monotonic()
        self.p.send_signal(sig)
        try:
            code = self.p.wait(timeout)
        finally:
            if self.p.poll() is None:
                self.p.kill()
                self.p.wait()
            self.fh.close()
        return code, time.monotonic() - t0

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.fh.close()


@pytest.fixture
def procs():
    started: list[WatchProc] = []
    yield started
    for w in started:
        w.kill()


def wait_current(path: Path, home: Home, head: str | None = None, dirty: bool | None = None,
                 timeout: float = TIMEOUT) -> str:
    """Poll until the worktree's exact-current snapshot is ready; returns its id."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        cur = current_state(path, home)
        last = (cur.head, cur.dirty, cur.entry and cur.entry.get("state"))
        if cur.exact_current and (head is None or cur.head == head) and (dirty is None or cur.dirty == dirty):
            return cur.snapshot_id
        time.sleep(0.1)
    raise AssertionError(f"no exact-current snapshot within {timeout}s (last: {last})")


def py(name: str, value: int = 1) -> str:
    return f"def {name}():\n    return {value}\n"


def test_follows_edits_commits_and_checkouts(repo, home, tmp_path, run_cli, procs):
    repo.write("src/a.py", py("a"))
    repo.write("src/b.py", py("b"))
    c1 = repo.commit("c1")
    w = WatchProc(home, tmp_path / "watch.log", str(repo.root), "--debounce-ms", "50")
    procs.append(w)
    first = wait_current(repo.root, home, head=c1, dirty=False)

    repo.write("src/a.py", py("a", 2))  # a file edit: dirty overlay
    dirty_id = wait_current(repo.root, home, head=c1, dirty=True)
    assert dirty_id != first

    c2 = repo.commit("c2")  # a commit
    wait_current(repo.root, home, head=c2, dirty=False)

    repo.git("checkout", "-q", "-b", "feature")  # a branch switch, then a commit on it
    repo.write("src/c.py", py("c"))
    c3 = repo.commit("c3")
    wait_current(repo.root, home, head=c3, dirty=False)
    repo.checkout("main")  # back: HEAD moves to c2 (already built: reused)
    wait_current(repo.root, home, head=c2, dirty=False)
    repo.checkout(c3)  # detached HEAD
    wait_current(repo.root, home, head=c3, dirty=False)

    st = run_cli("status", str(repo.root), "--json")
    data = json.loads(st.stdout)
    assert data["exact_current"] is True and data["head"] == c3 and data["snapshot_id"]

    published = [line for line in w.lines() if "watch: published " in line]
    assert published and all(k in published[0] for k in ("cgsnap_", "commit=", "dirty=", "files=", "seconds="))
    assert len(published) <= 8  # c1, dirty, c2, c3 (+ transient states), never one per event

    code, took = w.stop(signal.SIGTERM)
    assert code == 0 and took < 5, w.log.read_text()
    assert "watch: stopped" in w.log.read_text()

    # A restart resumes: the ready snapshot of this state is reused, nothing is rebuilt.
    w2 = WatchProc(home, tmp_path / "watch2.log", str(repo.root), "--debounce-ms", "50")
    procs.append(w2)
    w2.wait_line("reused")
    time.sleep(0.5)
    assert w2.count("published") == 0, w2.log.read_text()
    code, took = w2.stop(signal.SIGINT)
    assert code == 0 and took < 5


def test_burst_is_coalesced_with_bounded_memory(repo, home, tmp_path, procs):
    repo.write(".gitignore", "node_modules/\n")
    for i in range(20):
        repo.write(f"src/m{i}.py", py(f"m{i}"))
    c1 = repo.commit("c1")
    w = WatchProc(home, tmp_path / "watch.log", str(repo.root), "--debounce-ms", "50")
    procs.append(w)
    wait_current(repo.root, home, head=c1)
    w.wait_line("published")
    base_rss = w.rss_kib()

    # Events only in an excluded, ignored directory never trigger a build.
    nm = repo.root / "node_modules"
    for i in range(300):
        (nm / f"warm{i // 50}").mkdir(parents=True, exist_ok=True)
        (nm / f"warm{i // 50}" / f"f{i}.js").write_text("x")
    time.sleep(1.0)
    assert w.count("published") == 1 and w.count("reused") == 0, w.log.read_text()

    # The burst: 10,000+ file events, mostly in node_modules, many in tracked files.
    peak = base_rss
    events = 0
    for k in range(100):
        d = nm / f"pkg{k}"
        d.mkdir(parents=True, exist_ok=True)
        for j in range(80):
            (d / f"index{j}.js").write_text(f"module.exports = {j};\n")
            events += 1
        for i in range(20):
            (repo.root / f"src/m{i}.py").write_text(py(f"m{i}", k))
            events += 1
        if k % 10 == 0:
            peak = max(peak, w.rss_kib())
    assert events >= 10_000
    final = wait_current(repo.root, home, head=c1, dirty=True)
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        peak = max(peak, w.rss_kib())
        time.sleep(0.1)
    assert current_state(repo.root, home).snapshot_id == final

    builds = w.count("published") - 1
    assert 1 <= builds <= 25, w.log.read_text()  # coalesced: never one build per event
    print(f"rss base={base_rss} KiB peak={peak} KiB builds={builds}")
    assert peak < base_rss + 200 * 1024 and peak < 700 * 1024, (base_rss, peak)

    code, took = w.stop()
    assert code == 0 and took < 5


def test_stop_during_a_build_abandons_it_safely(repo, home, tmp_path, procs):
    repo.write("src/a.py", py("a"))
    c1 = repo.commit("c1")
    w = WatchProc(home, tmp_path / "w0.log", str(repo.root), "--debounce-ms", "50")
    procs.append(w)
    ready = wait_current(repo.root, home, head=c1)
    assert w.stop()[0] == 0

    repo.write("src/b.py", py("b"))
    c2 = repo.commit("c2")
    marker = tmp_path / "stalled"
    w = WatchProc(home, tmp_path / "w1.log", str(repo.root), "--debounce-ms", "50",
                  stall=("extract", marker, 60))
    procs.append(w)
    deadline = time.monotonic() + TIMEOUT
    while not marker.exists():
        assert time.monotonic() < deadline and w.p.poll() is None, w.log.read_text()
        time.sleep(0.05)
    code, took = w.stop(signal.SIGTERM)
    assert code == 0 and took < 6, w.log.read_text()
    assert "abandoned" in w.log.read_text() or "stopped" in w.log.read_text()

    cur = current_state(repo.root, home)
    assert cur.head == c2 and not cur.exact_current  # nothing half-built is ready
    assert cur.entry is None or cur.entry["state"] == "failed"
    rs = cur.store
    assert rs.entry(ready)["state"] == "ready"  # the old snapshot is intact

    w = WatchProc(home, tmp_path / "w2.log", str(repo.root), "--debounce-ms", "50")
    procs.append(w)
    wait_current(repo.root, home, head=c2)
    assert w.stop()[0] == 0


def test_once_builds_and_exits(repo, home, run_cli):
    repo.write("src/a.py", py("a"))
    c1 = repo.commit("c1")
    res = run_cli("watch", str(repo.root), "--once")
    assert res.returncode == 0, res.stderr
    assert "published" in res.stderr
    wait_current(repo.root, home, head=c1, timeout=1)
    res = run_cli("watch", str(repo.root), "--once", "--json")
    assert res.returncode == 0
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert [e["event"] for e in events] == ["reused"] and events[0]["commit"] == c1


def test_not_a_repository_is_one_line(tmp_path, run_cli):
    res = run_cli("watch", str(tmp_path))
    assert res.returncode == 3 and res.stderr.count("\n") == 1 and "not a git repository" in res.stderr


def test_what_moves_the_state(repo, tmp_path):
    """Object churn, lock files, ignored directories and the data home (inside the worktree)
    move nothing; a source edit, an untracked file and a commit do. Two paths of one
    worktree are watched once."""
    from citegraph.graph.live_state import LiveRepo
    from citegraph.server.service import Service

    repo.write(".gitignore", "build/\n.cg-home/\n")
    repo.write("src/a.py", py("a"))
    repo.commit("c1")
    home = Home.open(repo.root / ".cg-home")
    live = LiveRepo(repo.root, exclude_abs=(str(home.root),))
    try:
        v = live.sync().version
        for quiet in (lambda: (repo.root / "build").mkdir(), lambda: (repo.root / "build" / "out.o").write_text("o"),
                      lambda: (home.root / "repos" / "x.json").write_text("{}"),
                      lambda: repo.git("gc", "-q"), lambda: (repo.root / ".git" / "index.lock").write_text("")):
            quiet()
            assert live.sync().version == v
        (repo.root / ".git" / "index.lock").unlink()
        for loud in (lambda: repo.write("src/a.py", py("a", 2)), lambda: repo.write("src/new dir/ü.py", py("u")),
                     lambda: repo.commit("c2")):
            loud()
            nv = live.sync().version
            assert nv > v
            v = nv
    finally:
        live.close()
    svc = Service(home)
    try:
        assert svc.register(repo.root / "src") is svc.register(repo.root)
    finally:
        svc.close()


def test_linked_worktree(repo, home, tmp_path):
    """A linked worktree's state follows its own HEAD and index (in its own git directory)
    and the shared refs; the main worktree's commits do not move it."""
    from citegraph.graph.live_state import LiveRepo

    repo.write("src/a.py", py("a"))
    repo.commit("c1")
    wt = tmp_path / "linked"
    repo.git("worktree", "add", "-q", "-b", "feature", str(wt))
    live = LiveRepo(wt)
    try:
        assert live.gitdir != live.commondir and str(live.gitdir).startswith(str(live.commondir))
        v0 = live.sync()
        repo.write("src/b.py", py("b"))
        repo.commit("main moves on")  # the main worktree's HEAD: not ours
        assert live.sync().state.head == v0.state.head
        (wt / "src" / "a.py").write_text(py("a", 3))
        v1 = live.sync()
        assert v1.state.dirty and v1.state.head == v0.state.head
        subprocess.run(["git", "commit", "-qam", "feature commit"], cwd=wt, check=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})
        v2 = live.sync()
        assert not v2.state.dirty and v2.state.head != v0.state.head
    finally:
        live.close()
