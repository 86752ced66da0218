"""``citegraph serve``: the resident service of one data home.

It watches the repositories registered with it (``serve PATH…``, ``watch``, or the first
read of a repository through it), keeps each worktree's state from file-system events
(``graph.live_state``), publishes the exact-current snapshot after each debounced change,
and answers reads over a local socket (``server.client``). See docs/service.md.

Threads: one watcher thread per repository (inotify), one dispatcher (the builder thread,
or the main thread under ``serve``/``watch``) that starts each due build in its
repository's lane — at most one build per repository, at most ``lanes`` at once, so a
repository whose build is slow or misbehaves never holds up another's (issue 20) —
(extraction pools use the ``forkserver`` start method, never ``fork`` from this
multi-threaded process), a supervisor that restarts dead watchers, and one thread per
client connection.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socketserver
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from citegraph.graph import compaction
from citegraph.graph.live_source import LiveSource, current_for_state
from citegraph.graph.live_state import LiveRepo, LiveView
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_builder import warm as warm_build
from citegraph.graph.store import Home, atomic_write_json, process_start
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.escape import visible
from citegraph.schemas import iso_time, to_output
from citegraph.server.locator import (
    Untrusted,
    check_private_dir,
    peer_uid,
    read_record,
    service_dir,
    socket_path,
)

DEFAULT_DEBOUNCE_MS = 20
DEFAULT_LANES = 2  # builds of different repositories at once (each may run an extraction pool)
LANE_JOIN_S = 0.5  # at close, a lane still building is left to die with the process (as kill -9):
# server/foreground.py then ends the process without unwinding it (see ``Service.unfinished``)
SUPERVISE_S = 0.5
DEFAULT_READ_WAIT_S = 2.0  # a read waits this long for the build of a change already seen
STORE_LINGER_S = 0.25  # the memory store stays open this long after a request (see memory.store)
PROTOCOL = 1
MAX_REQUEST_BYTES = 32 << 20

Log = Callable[..., None]


def _quiet(event: str, text: str, **data: Any) -> None:
    pass


class Logger:
    """One line per thing that happened: ``citegraph <name>: …`` on stderr, or JSON lines
    on stdout (``--json``)."""

    def __init__(self, name: str = "serve", as_json: bool = False, stream: TextIO | None = None) -> None:
        self.name = name
        self.as_json = as_json
        self.stream = stream or (sys.stdout if as_json else sys.stderr)
        self.lock = threading.Lock()

    def __call__(self, event: str, text: str, **data: Any) -> None:
        if self.as_json:
            line = json.dumps(to_output({"event": event, **data, "at": iso_time(time.time())}), default=str)
        else:
            line = f"citegraph {self.name}: {visible(text)}"  # paths are data: controls shown, never obeyed
        with self.lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (BrokenPipeError, ValueError):
                pass


# --- the service ---------------------------------------------------------------------------------

@dataclass
class Watched:
    """A registered worktree and its build bookkeeping."""

    live: LiveRepo
    built: tuple[int, int] | None = None  # the view token last built (or found ready)
    changed_mono: float = 0.0
    want: bool = True
    failures: int = 0
    not_before: float = 0.0
    first_mono: float | None = None  # when the oldest unbuilt change arrived (max wait)
    last: dict[str, Any] = field(default_factory=dict)
    last_error: str | None = None
    logged: str | None = None  # the snapshot id last logged (a reused state is logged once)
    busy: bool = False  # its lane is building it now
    unbuilt_since: float | None = None  # when the oldest change not yet published arrived
    stats: dict[str, int] = field(default_factory=lambda: {"published": 0, "reused": 0, "failed": 0})


class Service:
    """The resident owner of the current state of every registered worktree."""

    def __init__(self, home: Home, *, auto_build: bool = True, debounce_ms: int = DEFAULT_DEBOUNCE_MS,
                 max_wait_ms: int | None = None, build_jobs: int | None = None, pool_context: str = "forkserver",
                 log: Log | None = None, sync_timeout_s: float = 2.0, gc_keep: int = 0,
                 lanes: int = DEFAULT_LANES, read_wait_s: float = DEFAULT_READ_WAIT_S) -> None:
        if debounce_ms < 0:
            raise CitegraphError(f"--debounce-ms {debounce_ms} is negative", "pass a value ≥ 0", code=2)
        self.home = home
        self.auto_build = auto_build
        self.debounce_s = debounce_ms / 1000
        self.max_wait_s = (max_wait_ms if max_wait_ms is not None else max(10 * debounce_ms, 1000)) / 1000
        self.gc_keep = gc_keep
        self._last_gc = 0.0
        self.lanes = max(int(lanes), 1)  # 1: builds run in the dispatcher's own thread, one at a time
        self._active = 0  # builds running now
        self._lane_threads: dict[str, threading.Thread] = {}
        self._gc_lock = threading.Lock()
        self._gc_thread: threading.Thread | None = None
        self.abandoned = False
        self.build_jobs = build_jobs
        self.pool_context = pool_context
        self.log = log or _quiet
        self.sync_timeout_s = sync_timeout_s
        # How long a read waits for the build of a change the service has seen (then
        # unknown/racing, "still indexing"): a service setting (`serve --read-wait-ms`).
        self.read_wait_s = max(float(read_wait_s), 0.0)
        self.watched: dict[str, Watched] = {}
        self._roots: dict[str, str] = {}  # a path given -> the worktree root it lies in
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self.stop = threading.Event()
        self._hurry = threading.Event()  # a second stop signal: ``close`` waits no longer for lanes
        self._threads: list[threading.Thread] = []
        self._compacting: dict[str, tuple[str, threading.Thread]] = {}  # repository id -> (root, thread)
        self.started_mono = time.monotonic()
        self.requests = 0

    # --- registration ------------------------------------------------------------------------

    def register(self, path: str | os.PathLike[str]) -> Watched:
        """The watched worktree holding ``path`` (registered and scanned on first use)."""
        key = os.path.realpath(os.fspath(path))
        with self._lock:
            root = self._roots.get(key)
            if root is not None and root in self.watched:
                return self.watched[root]
        repo = gitrepo.open_repository(key)
        root = os.path.realpath(gitrepo.workdir(repo))
        with self._lock:
            if root in self.watched:
                self._roots[key] = root
                return self.watched[root]
            live = LiveRepo(root, exclude_abs=(str(self.home.root),), on_change=self._changed,
                            sync_timeout_s=self.sync_timeout_s)
            w = Watched(live, changed_mono=time.monotonic())
            self.watched[root] = w
            self._roots[key] = root
            self._roots[root] = root
            self._cond.notify_all()
        self.log("watching", f"watching {root}", repo=root)
        return w

    def lookup(self, path: str) -> LiveRepo:
        return self.register(path).live

    def source(self, wait_s: float = 0.0) -> LiveSource:
        from citegraph.graph.current import ScanSource

        return LiveSource(self.lookup, self.home, wait_ready=self.wait_ready, wait_s=wait_s, fallback=ScanSource(),
                          indexing=self.indexing_for)

    def _changed(self, live: LiveRepo) -> None:
        with self._cond:
            w = self.watched.get(str(live.root))
            if w is not None:
                now = time.monotonic()
                w.want = True
                w.changed_mono = now
                if w.first_mono is None:
                    w.first_mono = now
                if w.unbuilt_since is None:
                    w.unbuilt_since = now
                # New events supersede a retry backoff: the state moved on.
                w.not_before, w.failures = 0.0, 0
                self._cond.notify_all()

    # --- builds -----------------------------------------------------------------------------

    @property
    def building(self) -> bool:
        """Is any build running now (a stop signal then gives it a grace period)?"""
        return self._active > 0

    def _due(self) -> tuple[list[Watched], float]:
        now = time.monotonic()
        due, wait = [], 0.2
        for w in self.watched.values():
            if not w.want or w.busy:  # a repository's lane builds one state at a time
                continue
            at = w.changed_mono + self.debounce_s
            if w.first_mono is not None:
                at = min(at, w.first_mono + self.max_wait_s)  # a stream of writes cannot starve builds
            at = max(at, w.not_before)
            if at <= now:
                due.append(w)
            else:
                wait = min(wait, at - now)
        return due, wait

    def _builder(self) -> None:
        self.run_builds()

    def run_builds(self, until: Callable[[], bool] | None = None) -> None:
        """Build what is due until ``stop`` (or ``until()``): the builder thread's loop, or
        the main thread's in the foreground (``watch``), where a stop signal can abandon a
        build safely."""
        while not self.stop.is_set():
            if until is not None and until():
                return
            with self._cond:
                due, wait = self._due()
                if self.lanes > 1:
                    free = self.lanes - sum(1 for x in self.watched.values() if x.busy)
                    due = due[:max(free, 0)]
                if not due:
                    self._cond.wait(wait)
                    continue
                for w in due:
                    w.want = False
                    w.first_mono = None
                    if self.auto_build and self.lanes > 1:
                        w.busy = True
            if not self.auto_build:
                continue
            for w in due:
                if self.stop.is_set():
                    with self._cond:
                        w.busy, w.want = False, True
                    continue
                if self.lanes > 1:
                    self._start_lane(w)
                    continue
                try:
                    self.build(w)
                except Exception as exc:  # noqa: BLE001 - a bug in one build must not end the builder
                    self._failed(w, f"citegraph: build failed: {type(exc).__name__}: {exc}", True)

    def _start_lane(self, w: Watched) -> None:
        """Build ``w`` in its own thread: a slow or misbehaving repository holds its lane only."""
        def lane() -> None:
            try:
                self.build(w)
            except Exception as exc:  # noqa: BLE001 - a bug in one build must not end the service
                self._failed(w, f"citegraph: build failed: {type(exc).__name__}: {exc}", True)
            try:
                # off the next edit's path: the repository it builds through, its base's diff
                w.live.warm_build_repository(lambda repo: warm_build(w.live.root, self.home, w.live.view().state, repo))
            except Exception:  # noqa: BLE001, S110 - an optimisation: the next build opens its own
                pass
            finally:
                with self._cond:
                    w.busy = False
                    self._cond.notify_all()

        root = str(w.live.root)
        t = threading.Thread(target=lane, name=f"citegraph-lane-{os.path.basename(root)[:16]}", daemon=True)
        self._lane_threads[root] = t
        t.start()

    def build(self, w: Watched) -> dict[str, Any] | None:
        """Build (or find ready) the snapshot of the worktree's state as the watcher knows it."""
        live = w.live
        try:
            view = live.apply()
        except CitegraphError as err:
            self._failed(w, err.line(), err.retryable)
            return None
        t0 = time.monotonic()
        with self._lock:
            self._active += 1
        try:
            with live.build_repository() as repo:
                res = build_snapshot(live.root, self.home, state=view.state, jobs=self.build_jobs,
                                     pool_context=self.pool_context, repo=repo)
        except KeyboardInterrupt:
            self.abandoned = True
            self.stop.set()
            self.log("abandoned", f"stopped during a build of {live.root}; nothing was published "
                     "(the next run builds it again)", repo=str(live.root))
            return None
        except CitegraphError as err:
            self._failed(w, err.line(), err.retryable)
            return None
        except Exception as exc:  # noqa: BLE001 - the service keeps running
            self._failed(w, f"citegraph: build failed: {type(exc).__name__}: {exc}", True)
            return None
        finally:
            with self._lock:
                self._active -= 1
        w.failures, w.not_before, w.last_error = 0, 0.0, None
        w.built = view.token
        with self._cond:
            if not w.want:  # no change arrived since this build's view: nothing left unbuilt
                w.unbuilt_since = None
        latency = time.monotonic() - w.changed_mono if w.changed_mono else None
        data = {**res.to_json(), "repo": str(live.root), "seconds": round(time.monotonic() - t0, 4),
                "latency": round(latency, 4) if latency is not None else None}
        w.last = data
        w.stats["reused" if res.reused else "published"] += 1
        if not res.reused:
            self.log("published", f"published {res.snapshot_id} commit={res.commit[:12]} dirty="
                     f"{str(res.dirty).lower()} files={res.files} symbols={res.symbols} "
                     f"seconds={res.seconds:.3f} repo={live.root}", **data)
            self._maybe_gc()
            self._maybe_compact(res.repository_id, res.snapshot_id, str(live.root))
        elif w.logged != res.snapshot_id:
            self.log("reused", f"reused {res.snapshot_id} commit={res.commit[:12]} dirty={str(res.dirty).lower()} "
                     f"files={res.files} (already built and ready) repo={live.root}", **data)
        w.logged = res.snapshot_id
        with self._cond:
            self._cond.notify_all()
        return data

    def _maybe_gc(self) -> None:
        """Retire old snapshots (at most once a minute), in a thread of its own: never in
        the lane, in front of the next edit's build. It compacts nothing (``_maybe_compact``
        does, in the background) and reads no worktree's state: the exact-current snapshot
        of each watched worktree is the one the service last built or found ready for it
        (a status scan of a large monorepo takes seconds)."""
        if self.gc_keep <= 0 or time.monotonic() - self._last_gc < 60.0:
            return
        if not self._gc_lock.acquire(blocking=False):  # another lane is collecting
            return
        self._last_gc = time.monotonic()
        known = {os.path.realpath(root): w.last["snapshot_id"] for root, w in list(self.watched.items())
                 if w.last.get("snapshot_id")}

        def run() -> None:
            from citegraph.graph.retention import collect

            try:
                res = collect(self.home, keep_last=self.gc_keep, compact=False, known_current=known)
            except Exception as exc:  # noqa: BLE001 - a thread of its own: logged, the service goes on
                self.log("gc", f"gc skipped: {exc}", error=str(exc))
                return
            finally:
                self._gc_lock.release()
            if res["retired"]:
                self.log("gc", f"gc retired {len(res['retired'])} old snapshot(s)", retired=res["retired"])

        self._gc_thread = threading.Thread(target=run, name="citegraph-gc", daemon=True)
        self._gc_thread.start()

    def _maybe_compact(self, repository_id: str, snapshot_id: str, root: str) -> None:
        """Compact a published delta that has grown past the threshold into a new base, in a
        background thread (graph/compaction.py): builds and reads go on meanwhile."""
        rs = self.home.repo(repository_id)
        entry = rs.entry(snapshot_id)
        if not entry or not compaction.due(entry):
            return
        with self._lock:
            running = self._compacting.get(repository_id)
            if running is not None and running[1].is_alive():
                return

            def run() -> None:
                # Then whatever became due meanwhile (a delta published during this one).
                sid: str | None = snapshot_id
                seen: set[str] = set()
                while sid is not None and sid not in seen and not self.stop.is_set():
                    seen.add(sid)
                    t0 = time.monotonic()
                    try:
                        done = compaction.compact(rs, sid, repo_path=root)
                    except Exception as exc:  # noqa: BLE001 - an optimisation: the delta stays usable
                        self.log("compact", f"compaction of {sid} skipped: {exc}", error=str(exc))
                        return
                    if done:
                        self.log("compact", f"compacted {sid} into a full snapshot seconds="
                                 f"{time.monotonic() - t0:.3f} repo={root}", snapshot_id=sid)
                    sid = compaction.newest_due(rs)

            t = threading.Thread(target=run, name=f"citegraph-compact-{repository_id[:8]}", daemon=True)
            self._compacting[repository_id] = (root, t)
            t.start()

    def _failed(self, w: Watched, line: str, retryable: bool) -> None:
        w.stats["failed"] += 1
        w.failures += 1
        w.last_error = line.removeprefix("citegraph: ")
        with self._cond:
            if retryable:
                w.want = True
                w.not_before = time.monotonic() + min(0.1 * 2 ** min(w.failures - 1, 8), 10.0)
            self._cond.notify_all()
        self.log("retry" if retryable else "error", f"{line.removeprefix('citegraph: ')} repo={w.live.root}",
                 repo=str(w.live.root), message=line)

    def wait_ready(self, live: LiveRepo, view: LiveView, timeout_s: float) -> None:
        """Wait (bounded) until the snapshot of ``view`` is ready, kicking the builder."""
        deadline = time.monotonic() + timeout_s
        w = self.watched.get(str(live.root))
        while time.monotonic() < deadline:
            cur = current_for_state(live.root, self.home, view.state, view.token)
            if cur.exact_current:
                return
            state = (cur.entry or {}).get("state")
            if state == "failed" and w is not None and w.failures > 3:
                return
            with self._cond:
                if w is not None and self.auto_build:
                    w.want = True
                    w.changed_mono = min(w.changed_mono, time.monotonic() - self.debounce_s)
                    self._cond.notify_all()
                self._cond.wait(min(0.02, max(deadline - time.monotonic(), 0)))

    def indexing_for(self, live: LiveRepo, view: LiveView) -> float | None:
        """Seconds the service has been indexing ``view`` (a change it has seen and not
        yet published), or None when no build of it is coming: builds are off, the service
        stops, the view was built already, or its builds failed and are not retried."""
        with self._lock:
            w = self.watched.get(str(live.root))
            if w is None or not self.auto_build or self.stop.is_set() or w.built == view.token:
                return None
            if (w.last_error is not None and not (w.want or w.busy)) or w.failures > 3:
                return None
            since = w.unbuilt_since
        return max(time.monotonic() - since, 0.0) if since is not None else 0.0

    # --- supervision --------------------------------------------------------------------------

    def _supervise(self) -> None:
        while not self.stop.wait(SUPERVISE_S):
            for w in list(self.watched.values()):
                if not w.live.watching():
                    reason = w.live.watch_error or "stopped"
                    self.log("watcher", f"the watcher of {w.live.root} stopped ({reason}); restarting",
                             repo=str(w.live.root))
                    try:
                        w.live.start_watcher()
                    except Exception as exc:  # noqa: BLE001 - tried again next round
                        w.live.watch_error = f"{type(exc).__name__}: {exc}"
                    self._changed(w.live)

    # --- life cycle ---------------------------------------------------------------------------

    def start(self, builder_thread: bool = True) -> None:
        """Start the supervisor (and the builder thread, unless the caller runs
        ``run_builds`` itself in the main thread)."""
        from citegraph.memory.lifecycle import read_memo
        from citegraph.memory.lifecycle.store import MemoryStore

        MemoryStore.keep_open_between_calls(STORE_LINGER_S)
        if self.pool_context == "forkserver":
            from citegraph.graph.forkserver_guard import start_forkserver

            start_forkserver()  # from this (long-lived) thread: see its docstring
        read_memo.enable(True)  # a request that changes nothing opens no store (read_memo's docstring)
        targets = [(self._supervise, "citegraph-supervisor")]
        if builder_thread:
            targets.append((self._builder, "citegraph-builder"))
        for target, name in targets:
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def request_stop(self) -> None:
        """Stop watching and building (safe from a signal handler)."""
        self.stop.set()
        with self._cond:
            self._cond.notify_all()

    def hurry(self) -> None:
        """End ``close``'s wait for running lanes now (safe from a signal handler)."""
        self._hurry.set()
        self.request_stop()

    def close(self, lane_grace_s: float = LANE_JOIN_S) -> None:
        """Stop; builds running in lanes get ``lane_grace_s`` to finish (``hurry`` ends the
        wait), then are left running: see ``unfinished``. The wait is on the condition the
        lanes notify, never an interruptible ``Thread.join`` (CPython 3.11 marks a thread
        whose join a signal interrupted as stopped while it still runs)."""
        from citegraph.memory.lifecycle import read_memo
        from citegraph.memory.lifecycle.store import MemoryStore

        MemoryStore.keep_open_between_calls(0.0)  # and close what lingers
        read_memo.enable(False)
        self.stop.set()
        with self._cond:
            self._cond.notify_all()
        for t in self._threads:
            t.join(timeout=5)
        deadline = time.monotonic() + lane_grace_s
        with self._cond:
            while (any(t.is_alive() for t in self._lane_threads.values()) and not self._hurry.is_set()
                   and (left := deadline - time.monotonic()) > 0):
                self._cond.wait(min(left, 0.05))
        for w in list(self.watched.values()):
            w.live.close()

    def unfinished(self) -> list[tuple[str, str]]:
        """After ``close``: the work still running, as (what, repository path) — lanes still
        building and compactions still writing. Their threads may be inside DuckDB, which
        cannot be interrupted; an interpreter exit would unwind them through its C++ frames
        and abort the process, so the foreground ends it without unwinding (as kill -9:
        nothing of theirs was published, their temporaries are collected later)."""
        left = [("build", root) for root, t in self._lane_threads.items() if t.is_alive()]
        left += [("compaction", root) for root, t in self._compacting.values() if t.is_alive()]
        return left

    def status(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "protocol": PROTOCOL, "uptime_s": round(time.monotonic() - self.started_mono, 3),
                "requests": self.requests, "auto_build": self.auto_build,
                "repos": [{"root": root, "watching": w.live.watching(), "generation": w.live.generation,
                           "version": w.live.version, "events": w.live.events, "rescans": w.live.rescans,
                           "rehashed": w.live.rehashed, "watches": w.live.watcher.watches if w.live.watcher else 0,
                           "last_build": w.last or None, **w.stats}
                          for root, w in sorted(self.watched.items())]}


# --- the socket -------------------------------------------------------------------------------------

Handler = Callable[[Service, dict[str, Any]], dict[str, Any]]


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = False


def private_dir(path: Any) -> None:
    """Create ``path`` (mode 0700) or accept it only when it is already this uid's own with
    mode 0700; anything else is refused (exit 3). A directory another user created first
    (``/tmp/citegraph-<uid>``) would let them replace the socket with their own."""
    os.makedirs(os.path.dirname(os.fspath(path)), exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    try:
        check_private_dir(path)
    except (Untrusted, OSError) as why:
        raise CitegraphError(f"refusing to serve: {why}",
                             "remove that directory (another user may have created it to take over the service's "
                             "socket) or make it yours with mode 0700, then start the service again", code=3,
                             kind="socket-untrusted") from None


class Endpoint:
    """The local socket of a running service: one per data home (a lock file says so)."""

    def __init__(self, service: Service, handlers: dict[str, Handler]) -> None:
        self.service = service
        self.handlers = handlers
        self.home = service.home
        self.dir = service_dir(self.home)
        self.path = socket_path(self.home)
        self._lock_fd: int | None = None
        self.server: _Server | None = None
        self.thread: threading.Thread | None = None

    def acquire(self) -> None:
        """Take the one-service-per-home lock or say which service already runs."""
        private_dir(self.dir)
        fd = os.open(self.dir / "service.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                rec = read_record(self.home) or {}
                raise CitegraphError(f"a citegraph service already runs for {self.home.root} "
                                     f"(pid {rec.get('pid', '?')})", "use it, or stop it first", code=1,
                                     kind="service-running") from None
            raise
        self._lock_fd = fd

    def open(self) -> None:
        try:
            self._open()
        except BaseException:
            self.close()  # the lock too: a refused start leaves nothing that says "running"
            raise

    def _open(self) -> None:
        self.acquire()
        private_dir(self.path.parent)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a dead service's socket (we hold the lock: nobody uses it)
        endpoint = self

        class Handle(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                endpoint._serve_connection(self)

        old = os.umask(0o177)
        try:
            self.server = _Server(str(self.path), Handle)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        atomic_write_json(self.dir / "service.json", {
            "pid": os.getpid(), "pid_start": process_start(os.getpid()), "socket": str(self.path),
            "protocol": PROTOCOL, "started_at": time.time(), "home": str(self.home.root)})
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="citegraph-socket", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop answering and remove what this endpoint created (nothing, if it never got
        the lock: another service's socket and record stay untouched)."""
        if self._lock_fd is None:
            return
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
            with contextlib.suppress(OSError):
                self.path.unlink()  # only a socket this endpoint bound
        with contextlib.suppress(OSError):
            rec = json.loads((self.dir / "service.json").read_text())
            if rec.get("pid") == os.getpid():
                (self.dir / "service.json").unlink()
        os.close(self._lock_fd)
        self._lock_fd = None

    def _serve_connection(self, h: socketserver.StreamRequestHandler) -> None:
        uid = peer_uid(h.connection)
        if uid != os.getuid():  # unknown credentials are refused too
            _send(h, {"ok": False, "error": _error_json(CitegraphError(
                "the service accepts requests only from its own user", "", code=3, kind="forbidden"))})
            return
        while not self.service.stop.is_set():
            line = h.rfile.readline(MAX_REQUEST_BYTES + 1)
            if not line:
                return
            if len(line) > MAX_REQUEST_BYTES:
                _send(h, {"ok": False, "error": _error_json(CitegraphError(
                    "request too large", "", code=2, kind="usage"))})
                return
            _send(h, self.dispatch(line))

    def dispatch(self, line: bytes) -> dict[str, Any]:
        self.service.requests += 1
        try:
            req = json.loads(line)
        except (ValueError, RecursionError):
            return {"ok": False, "error": _error_json(CitegraphError("malformed request", "", code=2, kind="usage"))}
        if not isinstance(req, dict) or not isinstance(req.get("op"), str):
            return {"ok": False, "error": _error_json(CitegraphError("malformed request", "", code=2, kind="usage"))}
        handler = self.handlers.get(req["op"])
        if handler is None:
            return {"ok": False, "error": _error_json(CitegraphError(f"unknown request {req['op']!r}", "",
                                                                     code=2, kind="usage"))}
        args = req.get("args")
        args = {} if args is None else args
        try:
            check_args(args)
            return {"ok": True, "data": handler(self.service, args)}
        except CitegraphError as err:
            return {"ok": False, "error": _error_json(err)}
        except OSError as exc:
            fname = f"{shorten(os.fsdecode(exc.filename))}: " if exc.filename else ""
            if exc.errno == errno.ENAMETOOLONG:
                err = CitegraphError(f"{fname}{exc.strerror}", "pass a shorter path", code=2, kind="usage")
            else:
                err = CitegraphError(f"{fname}{exc.strerror or exc}", "check disk space and permissions, then retry",
                                     code=3, kind="environment")
            return {"ok": False, "error": _error_json(err)}
        except Exception as exc:  # noqa: BLE001 - a bug in one request must not kill the service
            err = CitegraphError(f"internal error in {req['op']}: {type(exc).__name__}: {exc}", "", code=3,
                                 kind="internal")
            return {"ok": False, "error": _error_json(err)}


MAX_ARG_DEPTH = 8


def shorten(text: str, keep: int = 160) -> str:
    """``text`` cut to ``keep`` characters (an error line never echoes a 100 kB path)."""
    return text if len(text) <= keep else f"{text[:keep]}… ({len(text)} characters)"


def check_args(args: Any) -> None:
    """A request's ``args`` are a JSON object whose strings are text a path or a name can
    hold: no NUL, no lone surrogate (JSON can spell ``\\ud800``). Anything else is one
    usage error naming the argument — never an internal error from deep inside a call."""
    if not isinstance(args, dict):
        raise CitegraphError(f"malformed request: args must be a JSON object, not {type(args).__name__}",
                             "send {\"op\": ..., \"args\": {...}}", code=2, kind="usage")

    def walk(v: Any, where: str, depth: int) -> None:
        if depth > MAX_ARG_DEPTH:
            raise CitegraphError(f"request argument {where} is nested too deeply", "", code=2, kind="usage")
        if isinstance(v, str):
            if "\0" in v:
                raise CitegraphError(f"request argument {where} holds a NUL character", "", code=2, kind="usage")
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise CitegraphError(f"request argument {where} is not valid UTF-8 (it holds a lone surrogate)",
                                     "", code=2, kind="usage") from None
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k, where, depth + 1)
                walk(x, f"{where}.{k}" if where else str(k), depth + 1)
        elif isinstance(v, list):
            for i, x in enumerate(v):
                walk(x, f"{where}[{i}]", depth + 1)

    walk(args, "", 0)


def _error_json(err: CitegraphError) -> dict[str, Any]:
    return {"what": err.what, "todo": err.todo, "code": err.code, "kind": err.kind, "retryable": err.retryable}


def _send(h: socketserver.StreamRequestHandler, msg: dict[str, Any]) -> None:
    try:
        h.wfile.write(json.dumps(msg, default=str).encode("utf-8") + b"\n")
        h.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass
