"""Batch validation benchmark (issue 24): a ``LocalCluster`` of N workers against the partition
function run in one process, as citations/s and their ratio (target: 2 workers ≥ 1.6×).

    python -m citegraph.bench.batch_bench --work DIR [--repos 1000] [--memories 100] [--workers 2]

The first run generates the repositories (bench/batch_repos.py: memories captured at one
commit, validated at the next, a realistic outcome mix) into ``DIR`` and exports them as one
checkpoint; later runs reuse both (the generation is reported, not compared). The floor is
the ``inline`` engine over the same checkpoint in this process (CPU beside wall); the
cluster is started before the clock starts (its start-up is reported apart) and the job is
timed end to end, results included. Both runs must give the same results (checked). The
load average is recorded before and after: on a shared machine the ratio is the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from citegraph.bench.batch_repos import generate
from citegraph.graph.store import Home
from citegraph.memory.batch import dask_engine
from citegraph.memory.batch.run import run_batch
from citegraph.memory.exchange.checkpoints import export_checkpoint


def prepare(work: Path, repos: int, memories: int, seed: int) -> dict:
    """The generated repositories and their checkpoint (made once, reused)."""
    meta = work / "batch-bench.json"
    if meta.exists():
        return json.loads(meta.read_text())
    work.mkdir(parents=True, exist_ok=True)
    home = Home.open(work / "home")
    t0 = time.perf_counter()
    made = generate(home, work / "repos", repos, memories, seed)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep = export_checkpoint(home, str(work / "ckpt"), all_repos=True)
    info = {"repos": repos, "memories": memories, "seed": seed, "generate_s": round(gen_s, 1),
            "export_s": round(time.perf_counter() - t0, 2), "checkpoint_bytes": rep.bytes,
            "paths": [r.path for r in made]}
    meta.write_text(json.dumps(info))
    return info


def _lines(report) -> list:
    return sorted(json.dumps(m, sort_keys=True) for m in report.memory_lines())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m citegraph.bench.batch_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="directory for the repositories, data home and checkpoint")
    ap.add_argument("--repos", type=int, default=1000)
    ap.add_argument("--memories", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-clones", action="store_true", help="validate without the clones (bytes unreadable)")
    args = ap.parse_args(argv)
    work = Path(args.work)
    info = prepare(work, args.repos, args.memories, args.seed)
    ckpt = str(work / "ckpt")
    repos = None if args.no_clones else info["paths"]
    load0 = os.getloadavg()
    # Each engine runs the job twice: the first run pays the imports and first DuckDB
    # instance of every process (a few seconds per worker, paid once however many
    # repositories follow), the second is the figure (the steady state of a large batch).
    first_floor = run_batch(ckpt, scheduler="inline", repos=repos).seconds
    c0, t0 = time.process_time(), time.perf_counter()
    floor = run_batch(ckpt, scheduler="inline", repos=repos)
    floor_wall, floor_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    with dask_engine.local_cluster(args.workers) as cluster:
        startup = time.perf_counter() - t0
        first_dask = run_batch(ckpt, scheduler=cluster.scheduler_address, repos=repos).seconds
        t0 = time.perf_counter()
        dask = run_batch(ckpt, scheduler=cluster.scheduler_address, repos=repos)
        dask_wall = time.perf_counter() - t0
    load1 = os.getloadavg()
    citations = floor.summary()["citations"]
    assert not floor.failed and not dask.failed, (floor.failed, dask.failed)
    assert _lines(floor) == _lines(dask), "the engines disagree"
    out = {"repos": info["repos"], "memories_per_repo": info["memories"], "citations": citations,
           "summary": floor.summary()["summary"], "generate_s": info["generate_s"], "export_s": info["export_s"],
           "checkpoint_bytes": info["checkpoint_bytes"], "clones": repos is not None,
           "inline": {"first_run_s": round(first_floor, 2), "wall_s": round(floor_wall, 2),
                      "cpu_s": round(floor_cpu, 2), "citations_per_s": round(citations / floor_wall, 1)},
           "local_cluster": {"workers": args.workers, "startup_s": round(startup, 2),
                             "first_run_s": round(first_dask, 2), "wall_s": round(dask_wall, 2),
                             "citations_per_s": round(citations / dask_wall, 1)},
           "ratio": round(floor_wall / dask_wall, 2), "target_ratio": 1.6,
           "loadavg_before": [round(x, 2) for x in load0], "loadavg_after": [round(x, 2) for x in load1]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
