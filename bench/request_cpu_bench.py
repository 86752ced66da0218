"""The resident service's CPU per ``validate`` request (issue 21: "reads cost their
citations"): what the service process itself spends per request, read from
``/proc/PID/stat`` (user + system ticks) around a run of identical requests — not wall
times of a client, which the shared machine's load dominates.

    python -m citegraph.bench.request_cpu_bench [--repo PATH] [--files 400] [--requests 40] [--json]

Without ``--repo`` a synthetic repository (citegraph.bench.monorepo, ``--files``) is
generated. 96 citations (12 memories of 8: symbols, spans and files, as service_bench's
``pick``) are remembered through the service, one ``validate`` warms the observation
cache, then:

- ``back_to_back``: requests one after another (the memory store's connection lingers
  between them);
- ``spaced``: a pause of ``--gap`` seconds between requests (longer than the store's
  linger: as a CLI process per request is, ~0.3 s to start);
- ``idle``: the same wall time with no request (the service's own threads: watcher
  loop, supervisor), subtracted from the figures above;
- (generated repository only) full worktree rescans the service made over ``--commits``
  commits (``git add`` + ``git commit``, each followed by a request): HEAD and index
  changes re-check only the paths they touch (graph/live_state.py), so none.

Figures are CPU milliseconds per request (service process, all threads), with the load
average at the start and end. Nothing here is a timed assertion.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from citegraph.bench.service_bench import pick, start_service, wait_exact
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.server import client

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of every thread of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def per_request(pid: int, n: int, gap: float, call: Any) -> float:
    """CPU ms per request over ``n`` requests ``gap`` seconds apart."""
    c0 = cpu_s(pid)
    for _ in range(n):
        call()
        if gap:
            time.sleep(gap)
    return (cpu_s(pid) - c0) * 1000 / n


def idle(pid: int, seconds: float) -> float:
    c0 = cpu_s(pid)
    time.sleep(seconds)
    return (cpu_s(pid) - c0) * 1000


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="cg-reqcpu-"))
    out: dict[str, Any] = {"load_start": os.getloadavg()}
    proc = None
    try:
        if args.repo:
            repo = os.path.realpath(args.repo)
        else:
            from citegraph.bench.monorepo import generate

            repo = str(generate(tmp / "repo", files=args.files, seed=3))
        home = Home.open(tmp / "home")
        build_snapshot(repo, home)
        refs, _ = pick(home, repo, 96)
        proc = start_service(home, [repo])
        wait_exact(home, repo)
        ids = [client.call(home, "remember", {"text": f"claim {i}", "repo": repo, "refs": refs[i:i + 8],
                                              "project": "reqcpu", "topic": f"m{i:03d}"})["id"]
               for i in range(0, len(refs), 8)]
        req = {"memory_ids": ids, "repo_paths": [repo], "project": "reqcpu"}
        rep = client.call(home, "validate", req)  # warms the observation cache
        out["citations"] = sum(len(m["citations"]) for m in rep["memories"])
        out["outcomes"] = rep["summary"]

        def call() -> None:
            client.call(home, "validate", req)

        n = args.requests
        pid = proc.pid
        b2b = per_request(pid, n, 0.0, call)
        spaced = per_request(pid, n, args.gap, call)
        idle_ms = idle(pid, n * args.gap) / n  # the idle threads' share per spaced request
        st = client.call(home, "ping", {})
        if not args.repo:  # our own repository: commits, each followed by a request
            import subprocess

            before = [r["rescans"] for r in st["repos"]]
            env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
                   "GIT_COMMITTER_EMAIL": "b@b"}
            for k in range(args.commits):
                Path(repo, "bench_note.txt").write_text(f"note {k}\n")
                subprocess.run(["git", "add", "bench_note.txt"], cwd=repo, check=True, env=env)
                subprocess.run(["git", "commit", "-qm", f"note {k}"], cwd=repo, check=True, env=env)
                call()
            st = client.call(home, "ping", {})
            out["full_rescans_over_commits"] = {"commits": args.commits, "before": before,
                                                "after": [r["rescans"] for r in st["repos"]]}
        out.update({"requests": n, "gap_s": args.gap,
                    "back_to_back_cpu_ms_per_request": round(b2b, 2),
                    "spaced_cpu_ms_per_request": round(spaced, 2),
                    "idle_cpu_ms_per_gap": round(idle_ms, 2),
                    "spaced_minus_idle_cpu_ms": round(spaced - idle_ms, 2),
                    "rescans": [r["rescans"] for r in st["repos"]],
                    "load_end": os.getloadavg()})
        return out
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except Exception:  # noqa: BLE001 - a bench: make sure it is gone
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo")
    ap.add_argument("--files", type=int, default=400)
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--gap", type=float, default=0.5)
    ap.add_argument("--commits", type=int, default=5, help="commits (git add + commit), each then a request")
    ap.add_argument("--json", action="store_true")
    res = run(ap.parse_args())
    print(json.dumps(res, indent=None if ap.parse_args().json else 2))


if __name__ == "__main__":
    main()
