"""Index benchmark: cold and incremental indexing of any repository, against a floor.

    python -m citegraph.bench.index_bench PATH [--replay 10] [--jobs 2] [--json]

Prints, for one run on this machine:
- floor: pure tree-sitter parse + tags query over exactly the blobs the index parses
  (same process-pool width), i.e. the work no indexer can avoid;
- cold: ``citegraph index --rev BASE`` in a fresh data home (subprocess: wall, peak RSS);
- incremental: the last N first-parent commits replayed one by one, both warm (in one
  process, what ``watch`` does) and from a cold process (``citegraph index --rev C``).
  Real commits touch any number of files: each replayed commit is listed with the number of
  paths it changes, and the p50 is also given over the commits that change exactly one
  file. A synthetic one-file commit (one appended definition) is
  ``scale_bench --figures commit``, not this figure.
Figures are reported as ratios to the floor measured in the same run. Run
``python -m compileall`` first: whole-process times depend on ``.pyc`` files (said in the
output, with the load average).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

import pygit2
from tree_sitter import QueryCursor

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.blob_facts import skip_reason_for_content
from citegraph.indexer.config import CONFIG_FILE, parse_config
from citegraph.indexer.extract import compiled_query, parse
from citegraph.indexer.languages import language_for_path

_REPO: pygit2.Repository | None = None


def _init(path: str) -> None:
    global _REPO
    _REPO = pygit2.Repository(path)


def _floor_batch(batch: list[tuple[str, str]]) -> tuple[int, int]:
    """Parse + run the tags query over blobs; returns (bytes, matches)."""
    assert _REPO is not None
    nbytes = matches = 0
    for blob, lang in batch:
        try:
            data = _REPO.odb.read(blob)[1]
        except (KeyError, ValueError):
            continue
        if skip_reason_for_content(data):
            continue
        tree = parse(lang, data, 5.0)
        matches += len(QueryCursor(compiled_query(lang)).matches(tree.root_node))
        nbytes += len(data)
    return nbytes, matches


def parse_floor(repo_path: str, commit: str, jobs: int) -> dict:
    repo = pygit2.Repository(repo_path)
    cfg = parse_config(gitrepo.commit_tree_file(repo, commit, CONFIG_FILE))
    inv, _ = gitrepo.commit_inventory(repo, commit)
    work = []
    seen = set()
    for e in inv:
        lang = language_for_path(e.path)
        if lang is None or e.mode in (gitrepo.MODE_SYMLINK, gitrepo.MODE_GITLINK) or cfg.excluded(e.path):
            continue
        try:
            if repo.odb.read_header(e.blob_id)[1] > cfg.max_file_bytes:
                continue
        except KeyError:
            continue
        if (e.blob_id, lang) not in seen:
            seen.add((e.blob_id, lang))
            work.append((e.blob_id, lang))
    chunks = [work[i:i + 64] for i in range(0, len(work), 64)]
    t0 = time.perf_counter()
    if jobs > 1:
        import multiprocessing as mp

        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork"), initializer=_init,
                                 initargs=(repo_path,)) as pool:
            results = list(pool.map(_floor_batch, chunks))
    else:
        _init(repo_path)
        results = [_floor_batch(c) for c in chunks]
    secs = time.perf_counter() - t0
    return {"seconds": secs, "blobs": len(work), "bytes": sum(r[0] for r in results),
            "matches": sum(r[1] for r in results)}


def run_cli_index(repo: str, home: str, rev: str) -> dict:
    env = {**os.environ, "CITEGRAPH_HOME": home}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "citegraph.cli.main", "index", repo, "--rev", rev, "--json"],
                         capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"index failed: {out.stderr.strip()}")
    data = json.loads(out.stdout)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    data["wall"] = wall
    data["peak_rss_mib"] = max(rss, before) / 1024
    return data


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def _p50_ms(xs: list[float]) -> float | None:
    return round(statistics.median(xs) * 1000, 1) if xs else None


def pyc_present() -> bool:
    """Whether this package's modules have compiled ``.pyc`` files (``compileall`` was run)."""
    import importlib.util

    import citegraph.graph.snapshot_builder as mod

    return os.path.exists(importlib.util.cache_from_source(mod.__file__))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("repo")
    ap.add_argument("--replay", type=int, default=10, help="last N first-parent commits to replay")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    repo = pygit2.Repository(pygit2.discover_repository(args.repo))
    head = repo.revparse_single("HEAD").peel(pygit2.Commit)
    chain = [head]
    while len(chain) <= args.replay and chain[-1].parents:
        chain.append(chain[-1].parents[0])
    chain.reverse()
    base, replay = chain[0], chain[1:]
    path = repo.path

    floor = parse_floor(path, str(base.id), args.jobs)
    floor1 = parse_floor(path, str(base.id), 1)
    with tempfile.TemporaryDirectory(prefix="cg-bench-") as tmp:
        cold = run_cli_index(path, tmp, str(base.id))
        warm: list[float] = []
        home = Home.open(tmp)
        for c in replay:
            t0 = time.perf_counter()
            build_snapshot(path, home, rev=str(c.id))
            warm.append(time.perf_counter() - t0)
    with tempfile.TemporaryDirectory(prefix="cg-bench-") as tmp:
        run_cli_index(path, tmp, str(base.id))
        coldproc: list[float] = []
        rss = 0.0
        changed = [repo.diff(c.parents[0], c).stats.files_changed for c in replay]
        for c in replay:
            r = run_cli_index(path, tmp, str(c.id))
            coldproc.append(r["wall"])
            rss = max(rss, r["peak_rss_mib"])
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import citegraph.cli.main"], check=True)
        startup = time.perf_counter() - t0

    res = {
        "repository": args.repo, "base": str(base.id), "files": cold["files"], "symbols": cold["symbols"],
        "floor_seconds": round(floor["seconds"], 3), "floor_single_core_seconds": round(floor1["seconds"], 3),
        "floor_blobs": floor["blobs"], "floor_mb": round(floor["bytes"] / 1e6, 1),
        "cold_seconds": round(cold["wall"], 3), "cold_peak_rss_mib": round(cold["peak_rss_mib"], 1),
        "cold_over_floor": round(cold["wall"] / floor["seconds"], 2),
        "replayed_commits": len(replay),
        "replayed_paths_changed": changed,
        "replayed_warm_ms": [round(w * 1000, 1) for w in warm],
        "replayed_cold_process_ms": [round(w * 1000, 1) for w in coldproc],
        # Real commits of any size: labelled "replayed", never "one-file". Only the replayed
        # commits that change exactly one path are summarised as one-file figures here; the
        # synthetic one-file commit (exactly one file, checked) is scale_bench's figure.
        "replayed_one_file_commits": sum(1 for n in changed if n == 1),
        "replayed_one_file_warm_p50_ms": _p50_ms([w for w, n in zip(warm, changed, strict=True) if n == 1]),
        "replayed_one_file_cold_process_p50_ms": _p50_ms([w for w, n in zip(coldproc, changed, strict=True)
                                                          if n == 1]),
        "synthetic_one_file_commit": "python -m citegraph.bench.scale_bench --repo PATH --figures commit",
        "pyc_present": pyc_present(), "load_average": [round(x, 2) for x in os.getloadavg()],
        "replayed_all_warm_p50_ms": round(statistics.median(warm) * 1000, 1) if warm else None,
        "replayed_all_warm_p95_ms": round(pct(warm, 0.95) * 1000, 1) if warm else None,
        "replayed_all_cold_process_p50_ms": round(statistics.median(coldproc) * 1000, 1) if coldproc else None,
        "replayed_all_cold_process_p95_ms": round(pct(coldproc, 0.95) * 1000, 1) if coldproc else None,
        "python_import_floor_ms": round(startup * 1000, 1),
        "incremental_peak_rss_mib": round(rss, 1),
    }
    if args.json:
        print(json.dumps(res))
        return
    for k, v in res.items():
        print(f"{k:28} {v}")


if __name__ == "__main__":
    main()
