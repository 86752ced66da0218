"""The service in the foreground: ``citegraph serve`` and ``citegraph watch``.

The builder runs in the main thread, so that a stop signal can abandon a running build
safely: the first SIGINT/SIGTERM lets it finish for a grace period, a second one (or the
end of the grace period) interrupts it — the builder marks it failed and publishes
nothing. Readers are never blocked: builds publish atomically.

Builds in lanes and compactions run in threads that a signal cannot interrupt, often inside
DuckDB. One still running at the stop is abandoned as with kill -9: its repository is named
in the log, and the process ends through the injected ``exit_now`` (``os._exit`` from the
CLI) once everything of its own is flushed and closed — an interpreter exit would unwind
those threads through DuckDB's C++ frames and abort the process.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.server.service import Endpoint, Log, Service

STOP_GRACE_S = 1.5


def run(home: Home, paths: list[str], *, log: Log, debounce_ms: int, max_wait_ms: int | None = None,
        jobs: int | None = None, gc_keep: int = 0, listen: bool = True,
        until: Callable[[], bool] | None = None, stop_grace_s: float = STOP_GRACE_S,
        read_wait_ms: int | None = None, exit_now: Callable[[int], Any] | None = None) -> int:
    """Watch ``paths`` (and whatever a read registers) until a stop signal; exit code.
    ``exit_now``: how the process ends at once when threads are still working at the stop
    (the module docstring); without it, ``run`` returns and they are left running."""
    from citegraph.server.service_ops import HANDLERS

    svc = Service(home, debounce_ms=debounce_ms, max_wait_ms=max_wait_ms, build_jobs=jobs, log=log,
                  gc_keep=gc_keep, **({"read_wait_s": read_wait_ms / 1000} if read_wait_ms is not None else {}))
    endpoint = Endpoint(svc, HANDLERS) if listen else None
    # The signal handlers come first: a stop signal that arrives as soon as the socket
    # answers must still end the service cleanly (exit 0, record and socket removed).
    with _signals(svc, stop_grace_s) as closing:
        try:
            if endpoint is not None:
                endpoint.open()
            for p in paths:
                svc.register(p)
            svc.start(builder_thread=False)
            if endpoint is not None:
                log("listening", f"listening on {endpoint.path}", socket=str(endpoint.path))
            try:
                svc.run_builds(until)
            except KeyboardInterrupt:
                svc.abandoned = True
        finally:
            closing.set()  # from here a stop signal hurries the close, it raises nothing
            svc.close(lane_grace_s=stop_grace_s)
            if endpoint is not None:
                endpoint.close()
    for what, root in svc.unfinished():
        log("abandoned", f"stopped during a {what} of {root}; nothing of it was published "
            "(the next run does it again)", repo=root, work=what)
    totals = {k: sum(w.stats[k] for w in svc.watched.values()) for k in ("published", "reused", "failed")}
    log("stopped", f"stopped ({totals['published']} published, {totals['failed']} failed)", **totals)
    if exit_now is not None and any(t.is_alive() for t in threading.enumerate() if t is not threading.current_thread()):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        exit_now(0)
    return 0


def once(home: Home, paths: list[str], *, log: Log, jobs: int | None = None) -> int:
    """Build (or reuse) the current state of every path once, without watching; exit code."""
    from citegraph.graph.snapshot_builder import build_snapshot

    code = 0
    for p in paths:
        try:
            res = build_snapshot(p, home, jobs=jobs)
        except CitegraphError as err:
            log("error", err.line().removeprefix("citegraph: "), message=err.line(), code=err.code)
            code = code or err.code
            continue
        data = {**res.to_json(), "repo": p}
        what = "reused" if res.reused else "published"
        tail = "(already built and ready)" if res.reused else f"symbols={res.symbols} seconds={res.seconds:.3f}"
        log(what, f"{what} {res.snapshot_id} commit={res.commit[:12]} dirty={str(res.dirty).lower()} "
            f"files={res.files} {tail} repo={p}", **data)
    return code


@contextlib.contextmanager
def _signals(svc: Service, grace_s: float) -> Any:
    closing = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield closing
        return

    def on_stop(_signum: int, _frame: Any) -> None:
        if closing.is_set():
            svc.hurry()
            return
        if svc.stop.is_set():
            if svc.building:
                raise KeyboardInterrupt
            return
        svc.request_stop()
        if svc.building:
            with contextlib.suppress(ValueError):
                signal.setitimer(signal.ITIMER_REAL, grace_s)

    def on_alarm(_signum: int, _frame: Any) -> None:
        if closing.is_set():
            svc.hurry()
            return
        if svc.building and svc.stop.is_set():
            raise KeyboardInterrupt

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGALRM, on_alarm)
    try:
        yield closing
    finally:
        with contextlib.suppress(ValueError):
            signal.setitimer(signal.ITIMER_REAL, 0)
        for s, h in old.items():
            signal.signal(s, h)
