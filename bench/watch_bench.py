"""One-file commit (and edit) under ``citegraph watch``: time to an exact-current ready snapshot.

    python -m citegraph.bench.watch_bench --repo PATH --commits N [--debounce-ms 20] [--json]

The repository is cloned into a temporary directory (the original is never touched) and a
fresh data home is used (or ``--home``). ``citegraph watch --json`` runs as a subprocess;
its initial (cold) build is reported separately. Then, N times: one tracked file is edited
(the dirty overlay is awaited: "edit" figures), then committed ("commit" figures). For
each state the bench reports

* debounced events→ready: from the watcher's receipt of the (debounced) batch of
  filesystem events to the publish, as the watcher measures it;
* change→ready: from the moment the edit was written / ``git commit`` returned, to the
  moment the published snapshot was observed by the bench;
* build: the build's own seconds (``build_snapshot``), and the watch overhead:
  change→ready minus build (event delivery, debounce quiet period, state check, logging).

The floor, measured in the same run on the same clone, is a bare ``current_state`` check
(``git status`` plus a catalog read): no freshness answer can be cheaper than that. The
SPEC §14 target is ≤ 100 ms from a one-file commit to a ready snapshot (warm).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}


def git(repo: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True,
                         text=True)
    if res.returncode != 0:
        raise SystemExit(f"watch_bench: git {' '.join(args)} failed: {res.stderr.strip()}")
    return res.stdout.strip()


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100 * (len(s) - 1))))
    return s[k]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(pct(values, 50) * 1000, 1), "p95_ms": round(pct(values, 95) * 1000, 1),
            "mean_ms": round(statistics.fmean(values) * 1000, 1) if values else float("nan")}


class WatchLog:
    """Reads the watcher's JSON lines on a thread; waits for a published/reused state."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.q: queue.Queue[dict[str, Any]] = queue.Queue()
        self.proc = proc
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            ev["seen_at"] = time.time()
            self.q.put(ev)

    def wait_state(self, commit: str, dirty: bool, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(f"watch_bench: no snapshot for {commit[:12]} dirty={dirty} within {timeout}s")
            try:
                ev = self.q.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise SystemExit("watch_bench: the watcher exited") from None
                continue
            if ev.get("event") in ("published", "reused") and ev.get("commit") == commit \
                    and bool(ev.get("dirty")) == dirty:
                return ev


def pick_file(repo: Path) -> Path:
    files = [f for f in git(repo, "ls-files").splitlines() if f]
    for ext in (".py", ".rs", ".go", ".ts", ".js", ".java", ".c"):
        for f in files:
            if f.endswith(ext) and (repo / f).is_file() and not (repo / f).is_symlink():
                return repo / f
    for f in files:
        if (repo / f).is_file() and not (repo / f).is_symlink():
            return repo / f
    raise SystemExit("watch_bench: the repository has no regular tracked file")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="repository to measure (cloned, never modified)")
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--debounce-ms", type=int, default=20)
    ap.add_argument("--home", help="data home (default: a temporary one)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for one state")
    ap.add_argument("--keep", action="store_true", help="keep the temporary clone and home")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="citegraph-watch-bench-"))
    clone = tmp / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", os.path.abspath(args.repo), str(clone)], check=True)
    home = Path(args.home) if args.home else tmp / "home"
    env = {**os.environ, "CITEGRAPH_HOME": str(home)}
    target = pick_file(clone)
    comment = "# " if target.suffix == ".py" else "// "

    from citegraph.graph.current import current_state
    from citegraph.graph.store import Home

    h = Home.open(home)
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "citegraph.cli.main", "watch", str(clone), "--json",
                             "--debounce-ms", str(args.debounce_ms), "--gc-keep", "0"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    log = WatchLog(proc)
    results: dict[str, list[float]] = {k: [] for k in ("floor", "edit_event", "edit_change", "edit_build",
                                                       "edit_overhead", "commit_event", "commit_change",
                                                       "commit_build", "commit_overhead")}
    try:
        first = log.wait_state(git(clone, "rev-parse", "HEAD"), False, max(args.timeout, 1800))
        cold = first["seen_at"] - t0
        files = first.get("files")
        for i in range(args.commits):
            for _ in range(3):  # the floor: a bare exact-current check on the same clone
                f0 = time.perf_counter()
                current_state(clone, h)
                results["floor"].append(time.perf_counter() - f0)
            with open(target, "a", encoding="utf-8") as fh:
                fh.write(f"\n{comment}citegraph watch bench {i}\n")
            written = time.time()
            head = git(clone, "rev-parse", "HEAD")
            ev = log.wait_state(head, True, args.timeout)
            results["edit_change"].append(ev["seen_at"] - written)
            results["edit_event"].append(ev.get("latency") or float("nan"))
            results["edit_build"].append(ev.get("seconds") or 0.0)
            results["edit_overhead"].append(results["edit_change"][-1] - results["edit_build"][-1])
            time.sleep(0.05)
            git(clone, "commit", "-q", "-am", f"bench {i}")
            committed = time.time()
            head = git(clone, "rev-parse", "HEAD")
            ev = log.wait_state(head, False, args.timeout)
            results["commit_change"].append(ev["seen_at"] - committed)
            results["commit_event"].append(ev.get("latency") or float("nan"))
            results["commit_build"].append(ev.get("seconds") or 0.0)
            results["commit_overhead"].append(results["commit_change"][-1] - results["commit_build"][-1])
            time.sleep(0.05)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    figures = {k: summary(v) for k, v in results.items()}
    out = {"repo": os.path.abspath(args.repo), "files": files, "commits": args.commits,
           "debounce_ms": args.debounce_ms, "cold_initial_build_s": round(cold, 2), "figures": figures,
           "target_commit_to_ready_ms": 100}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"watch bench: {out['repo']} ({files} files), {args.commits} one-file edits + commits, "
          f"debounce {args.debounce_ms} ms")
    print(f"  watch process start + cold initial build → ready: {cold:.2f} s")
    rows = [("floor: current_state (git status + catalog)", "floor"),
            ("edit:   write → ready", "edit_change"),
            ("edit:   debounced events → ready (watcher)", "edit_event"),
            ("edit:   build_snapshot alone", "edit_build"),
            ("edit:   watch overhead (write → ready − build)", "edit_overhead"),
            ("commit: commit → ready", "commit_change"),
            ("commit: debounced events → ready (watcher)", "commit_event"),
            ("commit: build_snapshot alone", "commit_build"),
            ("commit: watch overhead (commit → ready − build)", "commit_overhead")]
    for label, key in rows:
        f = figures[key]
        print(f"  {label:50} p50 {f['p50_ms']:8.1f} ms   p95 {f['p95_ms']:8.1f} ms   (n={f['n']})")
    c = figures["commit_change"]["p95_ms"]
    fl = figures["floor"]["p50_ms"]
    print(f"  commit → ready p95 {c:.1f} ms vs target 100 ms; {c / fl:.1f} × the floor p50 ({fl:.1f} ms)"
          if fl else "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
