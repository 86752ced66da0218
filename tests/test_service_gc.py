"""The service's garbage collection stays off the edit path (issue 21, "Compaction never
sits in front of an edit"): it runs in a thread of its own, compacts nothing, and keeps the
exact-current snapshot of each watched worktree from what the service knows — it reads no
worktree's state (a status scan takes seconds on a large monorepo)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from citegraph.graph import retention
from citegraph.graph.current import current_state
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.tree_watch import AVAILABLE
from citegraph.server.service import Service

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="inotify (Linux) only")

A = "def f():\n    return 1\n"


def settled(home, repo, svc) -> str:
    """The exact-current snapshot id once the service has built the worktree's state."""
    deadline = time.monotonic() + 60
    while True:
        cur = current_state(repo.root, home)
        w = svc.watched[str(repo.root)]
        if cur.exact_current and w.last.get("snapshot_id") == cur.snapshot_id and not w.want and not w.busy:
            return cur.snapshot_id
        assert time.monotonic() < deadline, (cur.snapshot_id, w.last)
        time.sleep(0.05)


def test_the_service_gc_runs_in_its_own_thread_and_keeps_what_the_service_knows_is_current(
        repo, home, monkeypatch):
    repo.write("a.py", A)
    repo.commit("c1")
    svc = Service(home, debounce_ms=5, pool_context="fork", gc_keep=1)
    svc.start()
    try:
        svc._last_gc = time.monotonic()  # no collection while the states below are built
        svc.register(repo.root)
        settled(home, repo, svc)
        repo.write("a.py", A + "\n\ndef g():\n    return 2\n")
        s_edit = settled(home, repo, svc)
        repo.write("a.py", A + "\n\ndef k():\n    return 4\n")
        s_mid = settled(home, repo, svc)
        repo.write("a.py", A + "\n\ndef h():\n    return 3\n")
        s_newest = settled(home, repo, svc)
        repo.write("a.py", A + "\n\ndef g():\n    return 2\n")  # back to the first edit: found ready
        assert settled(home, repo, svc) == s_edit
        rs = current_state(repo.root, home).store
        assert rs.entry(s_edit)["published_at"] < rs.entry(s_newest)["published_at"]

        def no_scan(*_a, **_kw):
            raise CitegraphError("test", "the service's gc read a worktree's state")

        monkeypatch.setattr("citegraph.graph.current.current_state", no_scan)
        svc._last_gc = float("-inf")
        svc._maybe_gc()
        t = svc._gc_thread
        assert t is not None and t is not threading.current_thread() and t.name == "citegraph-gc"
        t.join(60)
        assert not t.is_alive()
        # keep_last=1 keeps the newest published state; the exact-current one (older) is kept
        # because the service knows it — a scan would have raised, and it would be retired
        assert rs.entry(s_newest)["state"] == "ready"
        assert rs.entry(s_edit)["state"] == "ready"
        assert rs.entry(s_mid)["state"] == "retired"
    finally:
        svc.close()


def test_known_current_ids_are_used_instead_of_a_scan(repo, home):
    from citegraph.graph.snapshot_builder import build_snapshot

    repo.write("a.py", A)
    repo.commit("c1")
    res = build_snapshot(repo.root, home)
    wt = os.path.realpath(repo.root)
    assert retention._exact_current_ids(home, [str(repo.root)]) == {res.snapshot_id}  # scanned
    assert retention._exact_current_ids(home, [str(repo.root)], {wt: "cgsnap_known"}) == {"cgsnap_known"}
    assert retention._exact_current_ids(home, [str(repo.root)], {"/elsewhere": "cgsnap_known"}) == {res.snapshot_id}
