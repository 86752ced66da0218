"""Processes that die with their parent, however it dies (SPEC §12.1), including the
``forkserver`` the service's extraction pools start from (issue 20, item 7).

The service is multi-threaded, so its pools use the ``forkserver`` start method: the pool
workers are children of a fork server, itself a child of the service. Without help a
``kill -9`` of the service orphans them for good: each worker holds the write end of the
fork server's "alive" pipe (so the fork server never sees EOF and never exits), the
workers wait on a queue they hold both ends of, and the resource tracker waits for them.

This module is preloaded by the fork server (``preload_for_forkserver``). Imported there,
and only there, it arms ``PR_SET_PDEATHSIG`` in the fork server (it dies with the
service) and registers an after-fork hook that arms it in every child right after the
fork, before anything else runs (they die with the fork server). The resource tracker
then sees EOF on its pipe and exits by itself. Kept free of heavy imports: the fork server
imports it first, which makes the window before it is armed as short as the interpreter's
start.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
GUARD_MODULE = __name__


def die_with_parent(parent_pid: int) -> None:
    """Make this (forked) process die when its parent does, however the parent died.

    Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``; elsewhere a daemon thread polls the
    parent pid. Checked once more after arming: a parent that died before is noticed."""
    armed = False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        armed = False
    if not armed:
        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True, name="citegraph-parent-watch").start()
    if os.getppid() != parent_pid:
        os._exit(1)


def preload_for_forkserver(context: object) -> None:
    """Have the fork server of ``context`` (a ``forkserver`` multiprocessing context)
    import this module first. Takes effect when the fork server starts (once a process)."""
    context.set_forkserver_preload([GUARD_MODULE, "__main__"])  # type: ignore[attr-defined]


def start_forkserver() -> None:
    """Start the fork server now, from the calling thread. ``PR_SET_PDEATHSIG`` fires when
    the *thread* that started a process ends, not only the process: the service calls this
    from its main thread at start, so that a request thread that happens to run the first
    pooled build (and then ends) does not take the fork server, and the pool of a build
    running meanwhile in the builder thread, down with it."""
    import multiprocessing as mp
    from multiprocessing import forkserver

    preload_for_forkserver(mp.get_context("forkserver"))
    forkserver.ensure_running()


def _imported_by_forkserver() -> bool:
    """True when this import runs inside ``multiprocessing.forkserver.main`` (the fork
    server's preload), never in the service or any other importer."""
    from multiprocessing import forkserver

    code = forkserver.main.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def _arm_forkserver() -> None:
    parent = os.getppid()
    if parent == 1:  # the service died before the fork server got here
        os._exit(1)
    die_with_parent(parent)
    server = os.getpid()
    os.register_at_fork(after_in_child=lambda: die_with_parent(server))


if _imported_by_forkserver():
    _arm_forkserver()
