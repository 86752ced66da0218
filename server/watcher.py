"""The background indexer: keep the exact-current snapshot of each watched repository ready.

One thread collects filesystem events (watchfiles), filters them and marks repositories
*pending*; the main thread builds. Per repository there is at most one build running and
one pending (a boolean, not a queue), so a burst of any size collapses into at most one
extra build and memory does not grow with the number of events.

Builds run in the main thread so that a stop signal can abandon one safely (the builder
marks an interrupted build ``failed`` and never publishes it); a first SIGINT/SIGTERM lets
the current build finish for a short grace period, a second one (or the end of the grace
period) abandons it. Builds publish atomically, so readers are never blocked.

See docs/watch.md.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import pygit2

from citegraph.graph.snapshot_builder import BuildResult, build_snapshot
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.config import CONFIG_FILE, DEFAULT_EXCLUDES, parse_config
from citegraph.indexer.errors import CitegraphError

DEFAULT_DEBOUNCE_MS = 100
WAIT_S = 0.2  # bounded wait of the main loop: stop signals are honoured within this
RUST_TIMEOUT_MS = 500  # bounded wait of the event thread
BURST_EVENTS = 512  # a batch this large is re-checked once it has settled (lost events)
STOP_GRACE_S = 1.5  # a running build may finish for this long after a stop signal
GC_INTERVAL_S = 60.0
RETRY_MIN_S, RETRY_MAX_S = 0.2, 10.0

# Files inside the git directory whose change can change the worktree state.
GIT_STATE_FILES = ("HEAD", "index", "packed-refs", "info/exclude")


@dataclass
class WatchedRepo:
    """One repository under watch and its pending/build bookkeeping."""

    arg: str
    root: Path  # worktree root (real path)
    gitdir: Path  # the worktree's git directory (real path)
    commondir: Path  # the shared git directory (== gitdir for the main worktree)
    excludes: tuple[str, ...]
    extra_excludes: tuple[str, ...]
    repo: pygit2.Repository | None = None  # event-thread handle (ignore checks)
    pending: bool = False
    event_at: float | None = None  # wall time of the first batch not yet built
    event_mono: float | None = None
    not_before: float = 0.0  # retry backoff (monotonic)
    failures: int = 0
    recheck_at: float | None = None  # monotonic; a settled burst is verified once
    last_logged: str | None = None
    stats: dict[str, int] = field(default_factory=lambda: {"published": 0, "reused": 0, "failed": 0,
                                                           "batches": 0, "events": 0})

    def watch_paths(self) -> list[Path]:
        paths = [self.root]
        for p in (self.commondir, self.gitdir):  # a linked worktree's gitdir lies in commondir
            if not any(_inside(p, q) for q in paths):
                paths.append(p)
        return paths


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def _rel(path: str, root: str) -> str | None:
    if path == root:
        return ""
    if path.startswith(root + os.sep):
        return path[len(root) + 1:].replace(os.sep, "/")
    return None


def excluded(rel: str, patterns: Iterable[str]) -> bool:
    """True when ``rel`` (or everything below it, for a directory) matches an exclude glob."""
    for pat in patterns:
        if fnmatch.fnmatchcase(rel, pat) or fnmatch.fnmatchcase(rel + "/", pat):
            return True
    return False


def load_excludes(root: Path, repo: pygit2.Repository | None = None) -> tuple[str, ...]:
    """The ``[index] exclude`` globs of the worktree's ``.citegraph.toml`` (HEAD's if absent)."""
    data: bytes | None = None
    try:
        data = (root / CONFIG_FILE).read_bytes()
    except OSError:
        if repo is not None and not repo.head_is_unborn:
            with contextlib.suppress(Exception):
                data = gitrepo.commit_tree_file(repo, str(repo.head.target), CONFIG_FILE)
    try:
        return parse_config(data).exclude
    except CitegraphError:
        return tuple(DEFAULT_EXCLUDES)


def open_watched(path: str, extra_excludes: tuple[str, ...] = ()) -> WatchedRepo:
    repo = gitrepo.open_repository(path)
    root = Path(os.path.realpath(gitrepo.workdir(repo)))
    gitdir = Path(os.path.realpath(repo.path))
    commondir = Path(os.path.realpath(gitrepo.common_dir(repo)))
    return WatchedRepo(path, root, gitdir, commondir, load_excludes(root, repo), tuple(extra_excludes),
                       repo=repo)


class Logger:
    """One line per thing that happened: text on stderr, or JSON lines on stdout."""

    def __init__(self, as_json: bool = False, stream: TextIO | None = None) -> None:
        self.as_json = as_json
        self.stream = stream or (sys.stdout if as_json else sys.stderr)
        self.lock = threading.Lock()

    def __call__(self, event: str, text: str, **data: Any) -> None:
        if self.as_json:
            line = json.dumps({"event": event, "at": round(time.time(), 4), **data}, default=str)
        else:
            line = f"citegraph watch: {text}"
        with self.lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (BrokenPipeError, ValueError):
                pass


class Watcher:
    def __init__(self, paths: list[str], home: Home, *, debounce_ms: int = DEFAULT_DEBOUNCE_MS,
                 max_wait_ms: int | None = None, excludes: tuple[str, ...] = (),
                 log: Logger | None = None, gc_keep: int = 0, jobs: int | None = None,
                 stop_grace_s: float = STOP_GRACE_S) -> None:
        if debounce_ms < 1:
            raise CitegraphError(f"--debounce-ms {debounce_ms} is not positive", "pass a value ≥ 1", code=2)
        self.home = home
        self.debounce_ms = int(debounce_ms)
        self.max_wait_ms = int(max_wait_ms or max(10 * self.debounce_ms, 1000))
        self.log = log or Logger()
        self.gc_keep = gc_keep
        self.jobs = jobs
        self.stop_grace_s = stop_grace_s
        self.repos: list[WatchedRepo] = []
        seen: set[Path] = set()
        for p in paths or ["."]:
            wr = open_watched(p, excludes)
            if wr.root in seen:
                continue
            seen.add(wr.root)
            self.repos.append(wr)
        self.home_root = os.path.realpath(home.root)
        self.stop = threading.Event()
        self.cond = threading.Condition()
        self.building = False
        self.abandoned = False
        self.event_error: BaseException | None = None
        self._pid = os.getpid()
        self._last_gc = 0.0
        self._thread: threading.Thread | None = None

    # --- events ----------------------------------------------------------------------------

    def _event_loop(self) -> None:
        import watchfiles

        paths = sorted({str(p) for r in self.repos for p in r.watch_paths()})
        try:
            for changes in watchfiles.watch(*paths, watch_filter=None, debounce=self.max_wait_ms,
                                            step=self.debounce_ms, stop_event=self.stop,
                                            rust_timeout=RUST_TIMEOUT_MS, yield_on_timeout=True,
                                            raise_interrupt=False, ignore_permission_denied=True):
                if self.stop.is_set():
                    break
                if changes:
                    self._absorb(changes)
        except BaseException as exc:  # noqa: BLE001 - reported by the main loop
            self.event_error = exc
            self.stop.set()

    def _absorb(self, changes: set[tuple[Any, str]]) -> None:
        wall, mono = time.time(), time.monotonic()
        hit: set[int] = set()
        for _change, path in changes:
            if len(hit) == len(self.repos):
                break  # every repository has to build anyway: no need to look further
            for i, r in enumerate(self.repos):
                if i in hit:
                    continue
                if self._relevant(r, path):
                    hit.add(i)
        n = len(changes)
        with self.cond:
            for i, r in enumerate(self.repos):
                r.stats["events"] += n
                if n >= BURST_EVENTS:  # the kernel may have dropped events: verify once settled
                    r.recheck_at = mono + 2 * self.debounce_ms / 1000 + 0.5
                if i not in hit:
                    continue
                r.stats["batches"] += 1
                # New events supersede a retry backoff: the state moved on, so the next
                # build (after the debounce) is worth trying at once.
                r.not_before, r.failures = 0.0, 0
                if not r.pending:
                    r.pending = True
                    r.event_at, r.event_mono = wall, mono
            if hit:
                self.cond.notify_all()

    def _relevant(self, r: WatchedRepo, path: str) -> bool:
        """Can a change at ``path`` change the state of repository ``r``?"""
        path = os.path.normpath(path)
        if _rel(path, self.home_root) is not None:
            return False  # our own writes (a data home inside the worktree)
        for gd, own in ((str(r.gitdir), True), (str(r.commondir), r.commondir == r.gitdir)):
            rel = _rel(path, gd)
            if rel is None:
                continue
            if rel.endswith(".lock"):
                return False
            if rel.startswith("refs/") or rel == "packed-refs":
                return True
            return own and rel in GIT_STATE_FILES
        rel = _rel(path, str(r.root))
        if rel is None or rel == "":
            return False
        if rel == ".git" or rel.startswith(".git/"):
            return False  # the main worktree's git dir is handled above; a linked one's .git file
        if rel == CONFIG_FILE:
            r.excludes = load_excludes(r.root)
            return True
        if excluded(rel, r.excludes) or excluded(rel, r.extra_excludes):
            return False
        if r.repo is not None:
            try:
                if r.repo.path_is_ignored(rel):
                    return False
            except (pygit2.GitError, ValueError, OSError):
                pass
        return True

    # --- builds ----------------------------------------------------------------------------

    def _due(self) -> list[WatchedRepo]:
        now = time.monotonic()
        out = []
        for r in self.repos:
            if r.recheck_at is not None and now >= r.recheck_at and not r.pending:
                r.pending, r.recheck_at = True, None
                r.event_at, r.event_mono = time.time(), now
            if r.pending and now >= r.not_before:
                out.append(r)
        return out

    def build(self, r: WatchedRepo) -> BuildResult | None:
        with self.cond:
            event_at, event_mono = r.event_at, r.event_mono
            r.pending, r.event_at, r.event_mono = False, None, None
        told = False

        def waiting() -> None:
            nonlocal told
            if not told:
                self.log("waiting", f"waiting for another build of {r.root}…", repo=str(r.root))
                told = True

        self.building = True
        try:
            res = build_snapshot(r.root, self.home, progress=None, jobs=self.jobs, on_wait=waiting)
        except KeyboardInterrupt:
            self.building = False
            self.abandoned = True
            self.stop.set()
            self.log("abandoned", f"stopped during a build of {r.root}; nothing was published "
                     "(the next run builds it again)", repo=str(r.root))
            return None
        except CitegraphError as err:
            self.building = False
            self._failed(r, err.line(), err.retryable, err.code)
            return None
        except Exception as exc:  # noqa: BLE001 - the watcher keeps running
            self.building = False
            self._failed(r, f"citegraph: build failed: {type(exc).__name__}: {exc}", True, 3)
            return None
        finally:
            self.building = False
            with contextlib.suppress(ValueError):
                signal.setitimer(signal.ITIMER_REAL, 0)
        r.failures, r.not_before = 0, 0.0
        latency = (time.monotonic() - event_mono) if event_mono is not None else None
        data = {**res.to_json(), "repo": str(r.root), "event_at": event_at,
                "latency": round(latency, 4) if latency is not None else None}
        if res.reused:
            r.stats["reused"] += 1
            if r.last_logged != res.snapshot_id:
                self.log("reused", f"reused {res.snapshot_id} commit={res.commit[:12]} "
                         f"dirty={str(res.dirty).lower()} files={res.files} (already built and ready) "
                         f"repo={r.root}", **data)
        else:
            r.stats["published"] += 1
            lat = f" latency={latency:.3f}s" if latency is not None else ""
            self.log("published", f"published {res.snapshot_id} commit={res.commit[:12]} "
                     f"dirty={str(res.dirty).lower()} files={res.files} symbols={res.symbols} "
                     f"seconds={res.seconds:.3f}{lat} repo={r.root}", **data)
            self._maybe_gc()
        r.last_logged = res.snapshot_id
        return res

    def _failed(self, r: WatchedRepo, line: str, retryable: bool, code: int) -> None:
        r.stats["failed"] += 1
        r.failures += 1
        msg = line.removeprefix("citegraph: ")
        if retryable:
            delay = min(RETRY_MIN_S * (2 ** (r.failures - 1)), RETRY_MAX_S)
            with self.cond:
                r.pending = True
                r.not_before = time.monotonic() + delay
                r.event_at = r.event_at or time.time()
                r.event_mono = r.event_mono or time.monotonic()
            self.log("retry", f"{msg} (retrying in {delay:.1f}s) repo={r.root}", repo=str(r.root),
                     message=line, code=code, retry_in=delay)
        else:
            self.log("error", f"{msg} (waiting for the next change) repo={r.root}", repo=str(r.root),
                     message=line, code=code)
        r.last_logged = None

    def _maybe_gc(self) -> None:
        if self.gc_keep <= 0 or time.monotonic() - self._last_gc < GC_INTERVAL_S:
            return
        self._last_gc = time.monotonic()
        from citegraph.graph.retention import collect

        try:
            res = collect(self.home, keep_last=self.gc_keep)
        except (CitegraphError, OSError) as exc:
            self.log("gc", f"gc skipped: {exc}", error=str(exc))
            return
        if res["retired"]:
            self.log("gc", f"gc retired {len(res['retired'])} old snapshot(s)", retired=res["retired"])

    # --- signals ---------------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if os.getpid() != self._pid:  # a forked build worker: behave like the default
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if self.stop.is_set():
            if self.building:
                raise KeyboardInterrupt
            return
        self.stop.set()
        if self.building:
            with contextlib.suppress(ValueError):
                signal.setitimer(signal.ITIMER_REAL, self.stop_grace_s)

    def _on_alarm(self, _signum: int, _frame: Any) -> None:
        if self.building and self.stop.is_set():
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def _signals(self) -> Any:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGALRM, self._on_alarm)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError):
                signal.setitimer(signal.ITIMER_REAL, 0)
            for s, h in old.items():
                signal.signal(s, h)

    # --- entry points ----------------------------------------------------------------------

    def run_once(self) -> int:
        """Build (or reuse) the current state of every repository once; exit code."""
        code = 0
        with self._signals():
            for r in self.repos:
                if self.stop.is_set():
                    break
                r.pending = True
                if self.build(r) is None and not self.abandoned:
                    code = code or 1
        return code

    def run(self, until: Callable[[], bool] | None = None) -> int:
        """Watch until a stop signal (or ``until()``); returns the exit code (0 on a clean stop)."""
        with self._signals():
            self._thread = threading.Thread(target=self._event_loop, name="citegraph-watch-events",
                                            daemon=True)
            self._thread.start()
            for r in self.repos:
                self.log("watching", f"watching {r.root} (debounce {self.debounce_ms} ms)", repo=str(r.root),
                         debounce_ms=self.debounce_ms)
            with self.cond:
                for r in self.repos:  # the initial state: reused when already built
                    r.pending = True
                    r.event_at, r.event_mono = time.time(), time.monotonic()
            try:
                while not self.stop.is_set():
                    if until is not None and until():
                        break
                    with self.cond:
                        due = self._due()
                        if not due:
                            self.cond.wait(WAIT_S)
                            due = self._due()
                    for r in due:
                        if self.stop.is_set():
                            break
                        self.build(r)
            except KeyboardInterrupt:
                self.abandoned = True
            finally:
                self.stop.set()
                if self._thread is not None:
                    self._thread.join(timeout=3)
        if self.event_error is not None and not isinstance(self.event_error, KeyboardInterrupt):
            err = self.event_error
            raise CitegraphError(f"file watching failed: {type(err).__name__}: {err}",
                                 "check the paths and the inotify limits (fs.inotify.max_user_watches)",
                                 code=3) from err
        totals = {k: sum(r.stats[k] for r in self.repos) for k in ("published", "reused", "failed")}
        self.log("stopped", f"stopped ({totals['published']} published, {totals['failed']} failed)", **totals)
        return 0
