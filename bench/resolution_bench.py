"""Edge-resolution benchmark (graph/edge_resolution.py): rate per language and cost.

    python -m citegraph.bench.resolution_bench PATH [--rev REV] [--jobs 2] [--json]

For one repository at ``REV`` (default HEAD), in a fresh data home:
- a cold build, with the time spent in ``write_resolution`` measured apart: resolution
  cost as a ratio to the cold build that contains it;
- a delta build of REV over its first parent's snapshot (what ``watch`` and the next
  commit pay), ``--repeat`` times (median), with its resolution time: resolution as a
  ratio to that delta build;
- per language and edge kind: edges, and the share resolved / name-only / unresolved.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pygit2

from citegraph.graph import edge_resolution
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home


class _Timed:
    """Wraps ``write_resolution`` to record how long each call took (bench only)."""

    def __init__(self) -> None:
        self.inner = edge_resolution.write_resolution
        self.seconds: list[float] = []

    def __call__(self, *args: Any, **kwargs: Any) -> int:
        t = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - t)


def rates(home: Home, result: Any) -> list[dict[str, Any]]:
    with Snapshot.open(home.repo(result.repository_id), result.snapshot_id) as snap:
        rows = snap.query(
            "SELECT f.language, r.kind, count(*) AS n, "
            "count(*) FILTER (WHERE r.tier = 'resolved'), count(*) FILTER (WHERE r.tier = 'name-only') "
            "FROM resolved_edges r JOIN files f ON f.path = r.path GROUP BY ALL ORDER BY n DESC")
    return [{"language": lang, "kind": kind, "edges": n, "resolved": round(res / n, 3),
             "name_only": round(name / n, 3), "unresolved": round((n - res - name) / n, 3)}
            for lang, kind, n, res, name in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="resolution_bench")
    ap.add_argument("path")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="delta builds measured (median)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    repo = pygit2.Repository(args.path)
    head = repo.revparse_single(args.rev).peel(pygit2.Commit)
    parent = str(head.parents[0].id) if head.parents else None
    timed = _Timed()
    edge_resolution.write_resolution = timed  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory(prefix="cg-resbench-") as tmp:
            home = Home.open(Path(tmp) / "home")
            t = time.perf_counter()
            cold = build_snapshot(args.path, home, rev=str(head.id), jobs=args.jobs)
            cold_s = time.perf_counter() - t
            cold_res = timed.seconds[-1]
            out: dict[str, Any] = {"repository": args.path, "commit": str(head.id), "files": cold.files,
                                   "symbols": cold.symbols, "cold_build_s": round(cold_s, 2),
                                   "cold_resolution_s": round(cold_res, 2),
                                   "resolution_to_cold": round(cold_res / cold_s, 3)}
            out["rates"] = rates(home, cold)
            if parent:
                base_home = Path(tmp) / "home2"
                build_snapshot(args.path, Home.open(base_home), rev=parent, jobs=args.jobs)
                builds, res = [], []
                for i in range(args.repeat):  # each in a copy of the home holding only the parent
                    home_i = Path(tmp) / f"home2-{i}"
                    shutil.copytree(base_home, home_i)
                    t = time.perf_counter()
                    build_snapshot(args.path, Home.open(home_i), rev=str(head.id), jobs=args.jobs)
                    builds.append(time.perf_counter() - t)
                    res.append(timed.seconds[-1])
                    shutil.rmtree(home_i)
                b, r = statistics.median(builds), statistics.median(res)
                out.update(delta_runs=args.repeat, delta_build_s=round(b, 2), delta_resolution_s=round(r, 2),
                           delta_resolution_all_s=[round(x, 2) for x in res],
                           resolution_to_delta=round(r / b, 3))
    finally:
        edge_resolution.write_resolution = timed.inner  # type: ignore[assignment]
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            if k != "rates":
                print(f"{k}: {v}")
        for r in out["rates"]:
            print(f"  {r['language']:<12} {r['kind']:<11} {r['edges']:>8}  resolved {r['resolved']:.1%}  "
                  f"name-only {r['name_only']:.1%}  unresolved {r['unresolved']:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
