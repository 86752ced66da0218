"""The current state as the resident service knows it: a ``StateSource`` whose reads sync
with the file watcher (no worktree scan) and whose racing check is a second sync.

The service owns the ``LiveRepo`` objects; this module only needs a way to find the one
for a path (``lookup``) and, optionally, a way to wait until the snapshot of a state is
published (``wait_ready``, used by ``remember`` after an edit).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from citegraph.graph.build_target import resolve_target
from citegraph.graph.current import CurrentState
from citegraph.graph.live_state import LiveRepo, LiveView, SyncFailed
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.worktree import ChangedWhileReading


def current_for_state(repo_path: str | os.PathLike[str], home: Home, state: gitrepo.WorktreeState,
                      token: tuple[int, int]) -> CurrentState:
    """The CurrentState of a known worktree state (its snapshot id and catalog entry);
    ``fence`` holds the view's (generation, version) for the racing check."""
    t = resolve_target(repo_path, None, state)
    rs = home.repo(t.identity.repository_id)
    return CurrentState(t.repo, t.identity, t.commit, t.state, t.snapshot_id, rs.entry(t.snapshot_id), rs,
                        path=os.fspath(repo_path), home=home, fence=("live", token), service=True)


WaitReady = Callable[[LiveRepo, LiveView, float], None]
Indexing = Callable[[LiveRepo, LiveView], float | None]


class LiveSource:
    """Reads of the service: ``read`` = sync (cookie fence) + the view's snapshot;
    ``moved`` = sync again and compare (generation, version).

    A read whose state is not built yet waits (``wait_ready``, at most ``wait_s``) for the
    build the service has in hand; past the bound, if the service is still indexing that
    state (``indexing``: for how long, or None), the read is racing (fence ``indexing``):
    every observation is unknown/racing, with a "still indexing" next step — never
    not-current with advice to index while the service runs."""

    def __init__(self, lookup: Callable[[str], LiveRepo], home: Home, *, wait_ready: WaitReady | None = None,
                 wait_s: float = 0.0, fallback: object | None = None, indexing: Indexing | None = None) -> None:
        self.lookup = lookup
        self.home = home
        self.wait_ready = wait_ready
        self.wait_s = wait_s
        self.fallback = fallback  # the source for --at REV (a commit: nothing to watch)
        self.indexing = indexing

    def read(self, repo_path: str | os.PathLike[str], home: Home, at: str | None = None) -> CurrentState:
        if at is not None:
            assert self.fallback is not None
            return self.fallback.read(repo_path, home, at)  # type: ignore[attr-defined]
        live = self.lookup(os.fspath(repo_path))
        try:
            view = live.sync()
        except ChangedWhileReading:
            # A file changed under the hashing (it grew while being read): the worktree is
            # moving. Answer for the last state the watcher knew, marked raced: every
            # observation of it is unknown/racing, a capture is refused — never an error,
            # never a stale state served as current.
            cur = current_for_state(live.root, home, live.view().state, live.view().token)
            cur.fence = ("sync-failed",)
            return cur
        except SyncFailed:
            # The watcher cannot vouch for the state (dead, restarting, stalled): read it
            # by a scan so the caller learns what there is, but mark the read raced, so
            # every observation of it is unknown/racing and a capture is refused.
            assert self.fallback is not None
            try:
                cur = self.fallback.read(live.root, home)  # type: ignore[attr-defined]
            except ChangedWhileReading:
                cur = current_for_state(live.root, home, live.view().state, live.view().token)
            cur.fence = ("sync-failed",)
            cur.service = True
            return cur
        cur = current_for_state(live.root, home, view.state, view.token)
        if not cur.exact_current and self.wait_ready is not None and self.wait_s > 0:
            self.wait_ready(live, view, self.wait_s)
            cur = current_for_state(live.root, home, view.state, view.token)
        if not cur.exact_current and self.indexing is not None:
            cur.indexing_s = self.indexing(live, view)
            if cur.indexing_s is not None:
                cur.fence = ("indexing", view.token)
        return cur

    def moved(self, cur: CurrentState) -> bool:
        if cur.fence == ("sync-failed",) or (isinstance(cur.fence, tuple) and cur.fence[:1] == ("indexing",)):
            return True  # the state read was not vouched for, or not built yet
        if not (isinstance(cur.fence, tuple) and cur.fence and cur.fence[0] == "live"):
            assert self.fallback is not None
            return self.fallback.moved(cur)  # type: ignore[attr-defined]
        try:
            view = self.lookup(cur.path).sync()
        except (SyncFailed, ChangedWhileReading):
            return True
        return view.token != cur.fence[1]
