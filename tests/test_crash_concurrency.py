"""Crashes and concurrency (SPEC §4): kill -9 at any stage of a build leaves every ready
snapshot intact and nothing half-built ready; readers never wait for a builder; two
builders of one repository both succeed."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from stall_launcher import stalled_argv, stalled_compaction_argv

from citegraph.graph import queries, retention
from citegraph.graph.build_hooks import STAGES
from citegraph.graph.compaction import COMPACT_STAGES, compact
from citegraph.graph.retention import collect
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def index_json(run_cli, repo_root: Path, *extra: str) -> dict:
    proc = run_cli("index", "--json", *extra, str(repo_root))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


@contextmanager
def stalled_index(home: Home, repo_root: Path, stage: str, marker: Path, *extra: str,
                  stall_seconds: float = 120) -> Iterator[subprocess.Popen]:
    """An ``index`` subprocess stalled at ``stage``; always killed at the end."""
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    proc = subprocess.Popen(stalled_argv(stage, marker, stall_seconds, "index", "--json", *extra, str(repo_root)),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_marker(proc, marker)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


def wait_for_marker(proc: subprocess.Popen, marker: Path, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    # The hook creates the marker, then writes the stage name: wait for the name.
    while not (marker.exists() and marker.read_text()):
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"build exited ({proc.returncode}) before reaching its stall: {err or out}")
        if time.monotonic() > deadline:
            pytest.fail("build never reached its stall point")
        time.sleep(0.02)


def catalog_entry(home: Home, repository_id: str, snapshot_id: str) -> dict:
    return json.loads(home.repo(repository_id).catalog_path(snapshot_id).read_text())


@pytest.mark.parametrize("stage", STAGES)
def test_kill_9_at_any_stage_leaves_ready_snapshots_intact(stage, repo, home, run_cli, tmp_path):
    repo.write("pkg/a.py", "def a():\n    return 1\n")
    repo.write("pkg/b.py", "class B:\n    def m(self):\n        return a()\n")
    repo.write("notes.txt", "notes\n")
    repo.commit("c1")
    s1 = build_snapshot(repo.root, home, jobs=1).to_json()
    rs = home.repo(s1["repository_id"])
    s1_file = rs.snapshot_path(s1["snapshot_id"])
    s1_hash = sha256(s1_file)
    s1_entry = catalog_entry(home, s1["repository_id"], s1["snapshot_id"])

    repo.write("pkg/a.py", "def a():\n    return 2\n\n\ndef extra():\n    pass\n")
    repo.write("pkg/new.py", "def new():\n    pass\n")
    c2 = repo.commit("c2")
    marker = tmp_path / f"stall-{stage}"
    with stalled_index(home, repo.root, stage, marker) as proc:
        assert marker.read_text() == stage
        building = [s for s in queries.status(repo.root, home)["snapshots"] if s["commit"] == c2]
        assert len(building) == 1
        killed_id = building[0]["snapshot_id"]
        expected_during = "ready" if stage == "published" else "building"
        assert building[0]["state"] == expected_during
        killed_pid = proc.pid
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGKILL

    # S1 is untouched: catalog entry and bytes.
    assert rs.entry(s1["snapshot_id"])["state"] == "ready"
    assert catalog_entry(home, s1["repository_id"], s1["snapshot_id"]) == s1_entry
    assert sha256(s1_file) == s1_hash

    killed = rs.entry(killed_id)
    if stage == "published":
        assert killed["state"] == "ready"
        assert rs.snapshot_files(killed_id)
    else:
        assert killed["state"] != "ready"
        assert killed["state"] == "failed"
        assert not rs.snapshot_files(killed_id)

    st = run_cli("status", "--json", str(repo.root))
    assert st.returncode == 0, st.stderr
    status = json.loads(st.stdout)
    assert status["head"] == c2
    assert status["exact_current"] is (stage == "published")
    by_id = {s["snapshot_id"]: s for s in status["snapshots"]}
    assert by_id[s1["snapshot_id"]]["state"] == "ready"

    s2 = index_json(run_cli, repo.root)
    assert s2["state"] == "ready"
    assert s2["commit"] == c2
    assert s2["snapshot_id"] == killed_id
    assert s2["reused"] is (stage == "published")
    assert rs.entry(killed_id)["state"] == "ready"
    assert sha256(s1_file) == s1_hash
    names = sorted(s["name"] for s in queries.symbols_of_file(repo.root / "pkg" / "a.py", home))
    assert names == ["a", "extra"]
    # The builder's leftovers are collectable and never confuse a later build.
    collect(home)
    assert [p.name for p in (rs.root / "tmp").iterdir() if f".{killed_pid}." in p.name] == []
    assert rs.entry(s1["snapshot_id"])["state"] == "ready"


def test_readers_are_not_blocked_by_a_stalled_build(repo, home, run_cli, tmp_path):
    repo.write("svc.py", "def handler():\n    return 1\n\n\nclass Retry:\n    def next_delay(self):\n"
                         "        return 2\n")
    c1 = repo.commit("c1")
    s1 = index_json(run_cli, repo.root)
    # A linked worktree at C1 stays clean: its exact-current snapshot is S1.
    wt = tmp_path / "clean-wt"
    repo.git("worktree", "add", "-q", "--detach", str(wt), c1)

    repo.write("svc.py", "def handler():\n    return 'dirty'\n")  # overlay build
    marker = tmp_path / "stall-extract"
    with stalled_index(home, repo.root, "extract", marker) as proc:
        st = run_cli("status", "--json", str(repo.root))
        assert st.returncode == 0, st.stderr
        status = json.loads(st.stdout)
        assert status["dirty"] is True
        assert status["exact_current"] is False
        assert status["snapshot_id"] is None
        states = {s["snapshot_id"]: s["state"] for s in status["snapshots"]}
        assert states[s1["snapshot_id"]] == "ready"
        assert sorted(states.values()) == ["building", "ready"]

        # Reusing a ready snapshot does not wait for the build lock.
        again = index_json(run_cli, repo.root, "--rev", c1)
        assert again["reused"] is True
        assert again["snapshot_id"] == s1["snapshot_id"]

        # Readers of the ready snapshot (through the clean worktree) are served.
        st_wt = run_cli("status", "--json", str(wt))
        assert st_wt.returncode == 0, st_wt.stderr
        assert json.loads(st_wt.stdout)["snapshot_id"] == s1["snapshot_id"]
        sym = run_cli("symbols", str(wt / "svc.py"), "--json")
        assert sym.returncode == 0, sym.stderr
        assert [s["qualified_name"] for s in json.loads(sym.stdout)["symbols"]] == [
            "handler", "Retry", "Retry.next_delay"]
        found = run_cli("find", "next_delay", "--repo", str(wt), "--json")
        assert found.returncode == 0, found.stderr
        assert [s["qualified_name"] for s in json.loads(found.stdout)["symbols"]] == ["Retry.next_delay"]

        # In the dirty worktree the overlay is still building: a clear, retryable refusal.
        busy = run_cli("symbols", str(repo.root / "svc.py"), "--json")
        assert busy.returncode == 1
        assert busy.stderr.startswith("citegraph: ")
        assert "building" in busy.stderr
        assert "Traceback" not in busy.stderr
        assert proc.poll() is None  # the build was stalled the whole time


def test_two_concurrent_index_processes_both_succeed(repo, home, run_cli, tmp_path):
    repo.write("a.py", "def a():\n    pass\n")
    repo.commit("c1")
    marker = tmp_path / "stall-first"
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    second: subprocess.Popen | None = None
    # The first builder holds the lock for a few seconds: ample for the second one to
    # start and queue behind it (its "waiting" line proves it did).
    with stalled_index(home, repo.root, "extract", marker, stall_seconds=5) as first:
        try:
            second = subprocess.Popen([sys.executable, "-m", "citegraph.cli.main", "index",
                                       str(repo.root)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
            out2, err2 = second.communicate(timeout=120)
            out1, err1 = first.communicate(timeout=120)
        finally:
            if second is not None and second.poll() is None:
                second.kill()
                second.communicate()
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    r1 = json.loads(out1)
    assert r1["state"] == "ready" and r1["reused"] is False
    assert "waiting for another build" in err2
    assert "reused" in out2
    assert r1["snapshot_id"] in out2
    assert "Traceback" not in err1 + err2
    rs = home.repo(r1["repository_id"])
    entries = rs.entries()
    assert [(e["snapshot_id"], e["state"]) for e in entries] == [(r1["snapshot_id"], "ready")]


@pytest.mark.parametrize("stage", COMPACT_STAGES)
def test_kill_9_during_compaction_leaves_the_delta_readable(stage, repo, home, tmp_path, monkeypatch):
    """A compaction killed at any stage: the delta stays ready and reads as before (or,
    killed after its catalog update, the full snapshot reads the same), the base is
    untouched, leftovers are collected, and the next compaction succeeds."""
    repo.write("pkg/a.py", "def a():\n    return 1\n")
    repo.write("pkg/b.py", "class B:\n    def m(self):\n        return a()\n")
    repo.commit("c1")
    s1 = build_snapshot(repo.root, home, jobs=1)
    rs = home.repo(s1.repository_id)
    s1_file = rs.snapshot_path(s1.snapshot_id)
    s1_hash = sha256(s1_file)
    repo.write("pkg/a.py", "def a():\n    return 2\n\n\ndef extra():\n    pass\n")
    repo.write("pkg/new.py", "def new():\n    pass\n")
    repo.commit("c2")
    s2 = build_snapshot(repo.root, home, jobs=1)
    delta = rs.entry(s2.snapshot_id)
    assert delta["layout"] == "delta" and delta["container"] == "parquet"
    names = sorted(s["name"] for s in queries.symbols_of_file(repo.root / "pkg" / "a.py", home))
    assert names == ["a", "extra"]

    marker = tmp_path / f"stall-{stage}"
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    proc = subprocess.Popen(stalled_compaction_argv(stage, marker, 120, home.root, s2.repository_id,
                                                    s2.snapshot_id, repo.root),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_marker(proc, marker)
        # Readers are served while it runs (it holds no lock but at publish).
        assert sorted(s["name"] for s in queries.symbols_of_file(repo.root / "pkg" / "a.py", home)) == names
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    after = rs.entry(s2.snapshot_id)
    assert after["state"] == "ready"
    assert after["layout"] == ("full" if stage == "compacted" else "delta")
    assert sha256(s1_file) == s1_hash and rs.entry(s1.snapshot_id)["state"] == "ready"
    assert sorted(s["name"] for s in queries.symbols_of_file(repo.root / "pkg" / "a.py", home)) == names
    assert sorted(s["name"] for s in queries.symbols_of_file(repo.root / "pkg" / "new.py", home)) == ["new"]

    monkeypatch.setattr(retention, "SUPERSEDED_GRACE_S", 0.0)
    retention.collect(home, compact=False)
    assert [p.name for p in (rs.root / "tmp").iterdir() if f".{proc.pid}." in p.name] == []
    # Only the published container's file is left.
    assert rs.snapshot_files(s2.snapshot_id) == [rs.published_path(rs.entry(s2.snapshot_id))]
    if stage != "compacted":
        done = compact(rs, s2.snapshot_id, repo_path=str(repo.root))
        assert done is not None and done["layout"] == "full"
    full = rs.entry(s2.snapshot_id)
    assert full["content_id"] == delta["content_id"] and full["symbols"] == delta["symbols"]
    assert sorted(s["name"] for s in queries.symbols_of_file(repo.root / "pkg" / "a.py", home)) == names
    # The next build layers over the compacted snapshot.
    repo.write("pkg/b.py", "class B:\n    def m(self):\n        return 3\n")
    repo.commit("c3")
    s3 = build_snapshot(repo.root, home, jobs=1)
    assert rs.entry(s3.snapshot_id)["base"] == s2.snapshot_id
    assert s3.stats.parses == 1
    assert sorted(s["name"] for s in queries.symbols_of_file(repo.root / "pkg" / "a.py", home)) == names
