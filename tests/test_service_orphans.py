"""Issue 20, item 7: ``kill -9`` of ``citegraph serve`` during a build leaves nothing
behind — not the fork server its extraction pool starts from, not the pool workers, not
multiprocessing's resource tracker (graph/forkserver_guard.py). Before the fix all of
them were reparented to init and stayed alive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from citegraph.graph.store import process_start
from citegraph.indexer.tree_watch import AVAILABLE

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="inotify (Linux) only")

TIMEOUT = 120
GONE_WITHIN_S = 20


def descendants(pid: int) -> dict[int, tuple[float | None, str]]:
    """Every live descendant of ``pid``: pid -> (start time, command line)."""
    out: dict[int, tuple[float | None, str]] = {}
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            kids = []
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    kids += [int(k) for k in fh.read().split()]
        except OSError:
            continue
        for k in kids:
            try:
                with open(f"/proc/{k}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            out[k] = (process_start(k), cmd)
            todo.append(k)
    return out


def alive(pid: int, start: float | None) -> bool:
    """The same process (not a reused pid) still runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X") and process_start(pid) == start


def test_kill9_of_serve_during_a_build_leaves_no_process(make_repo, home, tmp_path):
    repo = make_repo()
    for i in range(1500):  # enough blobs for the extraction pool (and a build that lasts)
        repo.write(f"pkg{i % 30}/m{i}.py", f"def f{i}(x):\n    return x + {i}\n\n\nclass C{i}:\n"
                                           f"    def m(self):\n        return f{i}(1)\n")
    repo.commit("many files")
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    log = open(tmp_path / "serve.log", "w")  # noqa: SIM115 - closed below
    p = subprocess.Popen([sys.executable, "-m", "citegraph.cli.main", "serve", "--jobs", "2", str(repo.root)],
                         env=env, stdout=subprocess.DEVNULL, stderr=log)
    seen: dict[int, tuple[float | None, str]] = {}
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:  # until the pool runs: the fork server and at least one worker forked from it
            assert p.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, f"no extraction pool seen: {seen}"
            seen = descendants(p.pid)
            if sum("multiprocessing.forkserver" in cmd for _, cmd in seen.values()) >= 2:
                break
            time.sleep(0.02)
        assert any("resource_tracker" in cmd for _, cmd in seen.values()), seen
        p.send_signal(signal.SIGKILL)
        p.wait(TIMEOUT)
        deadline = time.monotonic() + GONE_WITHIN_S
        while True:
            left = {pid: cmd for pid, (start, cmd) in seen.items() if alive(pid, start)}
            if not left:
                break
            assert time.monotonic() < deadline, f"survived the service by {GONE_WITHIN_S}s: {left}"
            time.sleep(0.1)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(TIMEOUT)
        for pid, (start, _) in seen.items():  # never leak what a failed run left
            if alive(pid, start):
                os.kill(pid, signal.SIGKILL)
        log.close()
    # the data home is usable at once: the next one-shot index succeeds
    res = subprocess.run([sys.executable, "-m", "citegraph.cli.main", "index", str(repo.root), "--no-service"],
                         env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr


def test_the_fork_server_outlives_the_thread_of_a_request(make_repo, home):
    """PR_SET_PDEATHSIG follows the *thread* that started a process. The service starts its
    fork server from the thread that calls ``start`` (its main thread), so a request thread
    that runs a pooled build and ends does not take the fork server down — nor the pool of
    a build the builder thread runs meanwhile."""
    import threading
    from multiprocessing import forkserver

    from citegraph.graph.snapshot_builder import build_snapshot
    from citegraph.server.service import Service

    repo = make_repo()
    for i in range(120):
        repo.write(f"m{i}.py", f"def f{i}():\n    return {i}\n")
    repo.commit("c1")
    svc = Service(home, auto_build=False)  # pool_context="forkserver", as in serve
    svc.start()
    try:
        out: dict = {}

        def request() -> None:  # as a connection thread runs `index --rev`
            out["res"] = build_snapshot(repo.root, home, rev="HEAD", jobs=2, pool_context=svc.pool_context)

        t = threading.Thread(target=request)
        t.start()
        t.join(TIMEOUT)
        assert out["res"].files == 120
        pid = forkserver._forkserver._forkserver_pid  # the fork server the pool came from
        assert pid is not None
        time.sleep(0.5)  # a signal on the thread's end would have arrived by now
        assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # still running (not killed with the thread)
    finally:
        svc.close()
