"""The resident service as a real process (SPEC §17): reads go through its socket, an
edit is captured with no `citegraph index`, every git operation reaches exact-current,
`kill -9` of the service leaves the CLI working (one-shot) and a new service starts
cleanly, one service per data home, owner-only socket."""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from pathlib import Path

import pytest
from service_helpers import TIMEOUT, js, wait_exact

from citegraph.indexer.tree_watch import AVAILABLE
from citegraph.server.locator import read_record, service_dir

LAUNCHER = str(Path(__file__).parent / "stall_launcher.py")

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="inotify (Linux) only")


PY = "def f():\n    return 1\n"


def test_an_edit_is_captured_with_no_index(repo, home, run_cli, serve):
    repo.write("a.py", PY)
    c1 = repo.commit("c1")
    serve(str(repo.root))
    st = wait_exact(run_cli, repo.root, c1, False)
    assert st["service"]["used"] is True
    repo.write("a.py", PY + "\n\ndef g():\n    return 2\n")  # no index, no wait
    mem = js(run_cli("remember", "--text", "g returns two", "--repo", str(repo.root), "--code-ref", "a.py::g",
                     "--json", timeout=TIMEOUT))
    assert [(c["ref"], c["dirty"]) for c in mem["citations"]] == [("a.py::g", True)]
    # validate through the service equals the one-shot answer for the same state
    via = js(run_cli("validate", "--format", "json", "--repo", str(repo.root), timeout=TIMEOUT))
    one = js(run_cli("validate", "--format", "json", "--repo", str(repo.root), "--no-service", timeout=TIMEOUT))
    assert via == one and via["memories"][0]["freshness"] == "fresh"
    assert js(run_cli("status", "--json", "--no-service", str(repo.root)))["service"]["used"] is False


def test_git_operations_reach_exact_current(repo, home, run_cli, serve):
    repo.write("a.py", PY)
    repo.write("b.py", "def b():\n    return 2\n")
    c1 = repo.commit("c1")
    serve(str(repo.root))
    wait_exact(run_cli, repo.root, c1, False)
    repo.write("a.py", "def f():\n    return 3\n")
    c2 = repo.commit("c2")  # a commit
    wait_exact(run_cli, repo.root, c2, False)
    repo.git("checkout", "-q", "-b", "feature")  # a branch, a commit on it
    repo.write("c.py", "def c():\n    return 4\n")
    c3 = repo.commit("c3")
    wait_exact(run_cli, repo.root, c3, False)
    repo.git("checkout", "-q", "main")  # a branch switch
    wait_exact(run_cli, repo.root, c2, False)
    repo.write("a.py", "def f():\n    return 9\n")
    wait_exact(run_cli, repo.root, c2, True)  # an edit: the overlay
    repo.git("stash", "-q")  # stash
    wait_exact(run_cli, repo.root, c2, False)
    repo.git("stash", "pop", "-q")
    wait_exact(run_cli, repo.root, c2, True)
    repo.git("reset", "-q", "--hard", c1)  # reset --hard to an older commit
    wait_exact(run_cli, repo.root, c1, False)
    repo.git("checkout", "-q", c3)  # detached HEAD
    wait_exact(run_cli, repo.root, c3, False)


def test_kill9_of_the_service(repo, home, run_cli, serve):
    repo.write("a.py", PY)
    c1 = repo.commit("c1")
    s = serve(str(repo.root))
    wait_exact(run_cli, repo.root, c1, False)
    mem = js(run_cli("remember", "--text", "f returns one", "--repo", str(repo.root), "--code-ref", "a.py::f",
                     "--json", timeout=TIMEOUT))
    s.stop(signal.SIGKILL)
    # The CLI falls back to the one-shot path at once (the record names a dead pid).
    t0 = time.monotonic()
    res = run_cli("validate", "--format", "json", "--repo", str(repo.root), timeout=10)
    assert time.monotonic() - t0 < 10
    data = js(res)
    assert [(m["id"], m["freshness"]) for m in data["memories"]] == [(mem["id"], "fresh")]
    assert js(run_cli("status", "--json", str(repo.root)))["service"]["used"] is False
    # A new service starts cleanly over the dead one's lock, record and socket.
    s2 = serve(str(repo.root))
    st = wait_exact(run_cli, repo.root, c1, False)
    assert st["service"]["used"] is True and st["service"]["pid"] == s2.p.pid
    assert [m["id"] for m in js(run_cli("list", "--json"))["memories"]] == [mem["id"]]  # nothing lost


def test_one_service_per_home_and_an_owner_only_socket(repo, home, run_cli, serve):
    repo.write("a.py", PY)
    repo.commit("c1")
    serve(str(repo.root))
    second = run_cli("serve", str(repo.root), timeout=TIMEOUT)
    assert second.returncode == 1 and "already runs" in second.stderr and "Traceback" not in second.stderr
    rec = read_record(home)
    assert stat.S_IMODE(os.stat(rec["socket"]).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(service_dir(home)).st_mode) == 0o700


def test_a_read_registers_its_repository(make_repo, home, run_cli, serve):
    a = make_repo("a")
    a.write("a.py", PY)
    a.commit("c1")
    b = make_repo("b")
    b.write("b.py", PY)
    cb = b.commit("c1")
    serve(str(a.root))  # b is not named
    st = wait_exact(run_cli, b.root, cb, False)  # its first read registers it; the service builds it
    assert st["service"]["used"] is True
    b.write("b.py", PY + "\n\ndef h():\n    return 5\n")
    mem = js(run_cli("remember", "--text", "h", "--repo", str(b.root), "--code-ref", "b.py::h", "--json",
                     timeout=TIMEOUT))
    assert mem["citations"][0]["dirty"] is True


def test_serve_stops_cleanly(repo, home, serve):
    repo.write("a.py", PY)
    repo.commit("c1")
    s = serve(str(repo.root))
    assert s.stop(signal.SIGTERM) == 0
    assert "stopped" in s.log()
    assert read_record(home) is None


@pytest.mark.parametrize("signals", [1, 2])
def test_serve_stopped_while_a_lane_builds_inside_duckdb_exits_cleanly(repo, home, serve, tmp_path, signals):
    """A stop while a build runs in a lane thread inside DuckDB (tests/stall_launcher.py's
    ``db:`` stall): the lane is left to die with the process, as with kill -9 — exit 0, the
    build named as abandoned, record and socket removed. Before, the interpreter's exit
    unwound the lane thread through DuckDB's C++ frames and the process aborted (SIGABRT,
    "FATAL: exception not rethrown"; CI saw it as exit -6 of test_serve_stops_cleanly).
    A second signal (``signals=2``) ends the grace at once; it once interrupted the wait
    for the lane, which CPython 3.11 then took for finished — and the process aborted."""
    repo.write("a.py", PY)
    repo.commit("c1")
    marker = tmp_path / "stalled"
    s = serve(str(repo.root), launcher=[sys.executable, LAUNCHER, "extract", str(marker), "db:60"])
    deadline = time.monotonic() + TIMEOUT
    while not marker.exists():
        assert time.monotonic() < deadline, s.log()
        time.sleep(0.05)
    if signals == 2:
        s.p.send_signal(signal.SIGTERM)
        time.sleep(0.3)  # inside the grace period: the service is waiting for the lane
    assert s.stop(signal.SIGTERM) == 0, s.log()
    log = s.log()
    assert f"stopped during a build of {repo.root}; nothing of it was published" in log, log
    assert "stopped (0 published" in log
    assert read_record(home) is None


def test_the_service_compacts_a_grown_delta_in_the_background(repo, home, run_cli, serve):
    """A published delta holding COMPACT_MIN_PATHS paths is compacted by the service
    after the publish (graph/compaction.py): the same snapshot becomes a full one that
    reads the same, and the next commit's delta is layered over it."""
    from citegraph.graph.compaction import COMPACT_MIN_PATHS

    n = COMPACT_MIN_PATHS + 8
    for i in range(n):
        repo.write(f"m/f{i}.py", f"def f{i}():\n    return 1\n")
    c1 = repo.commit("c1")
    s = serve(str(repo.root))
    wait_exact(run_cli, repo.root, c1, False)
    for i in range(COMPACT_MIN_PATHS):
        repo.write(f"m/f{i}.py", f"def f{i}():\n    return 2\n\n\ndef g{i}():\n    return 3\n")
    c2 = repo.commit("c2")
    st = wait_exact(run_cli, repo.root, c2, False)
    from citegraph.graph.store import Home

    rs = Home.open(home.root).repo(st["repository_id"])
    deadline = time.monotonic() + TIMEOUT
    # The compaction publishes the full entry, then logs it: wait for both.
    while rs.entry(st["snapshot_id"]).get("layout") != "full" or "compacted" not in s.log():
        assert time.monotonic() < deadline, s.log()
        time.sleep(0.1)
    entry = rs.entry(st["snapshot_id"])
    assert entry["compacted_from"] and "base" not in entry and entry["files"] == n
    sym = js(run_cli("symbols", str(repo.root / "m" / "f3.py"), "--json", timeout=TIMEOUT))
    assert [x["name"] for x in sym["symbols"]] == ["f3", "g3"]
    repo.write("m/f1.py", "def only():\n    pass\n")
    c3 = repo.commit("c3")
    st3 = wait_exact(run_cli, repo.root, c3, False)
    top = rs.entry(st3["snapshot_id"])
    assert top["base"] == st["snapshot_id"] and top["delta_paths"] == 1
