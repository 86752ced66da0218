"""Checkpoint benchmark (issue 24): export size against the snapshot file it holds (target
≤ 1.2×) and import time against the cold index of the same commit (target ≤ 5 %).

    python -m citegraph.bench.checkpoint_bench REPO --work DIR [--rev HEAD]
    python -m citegraph.bench.checkpoint_bench --synthetic 250000 --work DIR   (bench/monorepo.py)

In one run: a cold index of the commit in a fresh data home (the floor: wall and CPU),
``export --parquet`` of it (time; bytes against the snapshot's DuckDB file), and ``import
--parquet`` into another fresh data home (wall and CPU, verification included), which must
give the same snapshot id and content id. ``REPO`` is read only (a worktree or a clone; the
snapshot is of ``--rev``, read from the object database). Load average recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.memory.exchange.checkpoints import export_checkpoint, import_checkpoint


def timed(fn):
    c0, t0 = time.process_time(), time.perf_counter()
    value = fn()
    return value, round(time.perf_counter() - t0, 2), round(time.process_time() - c0, 2)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m citegraph.bench.checkpoint_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo", nargs="?", help="a git worktree or clone (read only)")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--synthetic", type=int, help="generate a synthetic monorepo of this many files instead")
    ap.add_argument("--work", required=True, help="a new directory for the data homes and the checkpoint")
    args = ap.parse_args(argv)
    work = Path(args.work)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    repo = args.repo
    if args.synthetic:
        from citegraph.bench.monorepo import generate

        repo = str(generate(work / "monorepo", files=args.synthetic, seed=0))
    if not repo:
        ap.error("pass REPO or --synthetic N")
    load0 = os.getloadavg()
    home = Home.open(work / "home-built")
    built, cold_wall, cold_cpu = timed(lambda: build_snapshot(repo, home, rev=args.rev))
    entry = home.repo(built.repository_id).entry(built.snapshot_id)
    ckpt = work / "ckpt"
    report, export_wall, _ = timed(lambda: export_checkpoint(home, str(ckpt), repo_paths=[repo], rev=args.rev,
                                                             memories=False))
    fresh = Home.open(work / "home-imported")
    imported, import_wall, import_cpu = timed(lambda: import_checkpoint(fresh, str(ckpt)))
    again = fresh.repo(built.repository_id).entry(built.snapshot_id)
    assert again and again["state"] == "ready" and again["content_id"] == built.content_id
    load1 = os.getloadavg()
    snapshot_bytes = int(entry["bytes"])
    out = {"repo": repo, "commit": built.commit, "files": built.files, "symbols": built.symbols,
           "cold_index": {"wall_s": cold_wall, "cpu_s": cold_cpu},
           "export": {"wall_s": export_wall, "bytes": report.bytes, "snapshot_bytes": snapshot_bytes,
                      "size_ratio": round(report.bytes / snapshot_bytes, 3), "target_size_ratio": 1.2},
           "import": {"wall_s": import_wall, "cpu_s": import_cpu, "imported_bytes": int(again["bytes"]),
                      "time_ratio": round(import_wall / cold_wall, 3), "target_time_ratio": 0.05},
           "loadavg_before": [round(x, 2) for x in load0], "loadavg_after": [round(x, 2) for x in load1]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
