"""`citegraph check` benchmark (SPEC §14: ruff, 10k memories, ≤ 1 s beyond indexing) and the
batch-validation floor (SPEC §6.6: ≥ 100k citations/s, against a bare DuckDB join of the
same rows measured in the same run).

    python -m citegraph.bench.check_bench --repo PATH [--head HEAD~1] [--ranges 1,100]
        [--memories 10000] [--runs 5] [--mix-memories 25000] [--home DIR] [--json]

Setup (not timed as "check"): a data home (``--home`` keeps and reuses one); the commit
snapshots of the head and of each base ``head~N`` (built from the object database; the
build time is reported as indexing); ``--memories`` memories written in bulk whose
citations were captured at the oldest base (2 symbols, 1 span, 1 file each, from distinct
random definitions — receipts as capture writes them). Timed: ``run_check`` per range with
both snapshots ready (p50 / max over ``--runs``), and its parts; floors: the tree diff
alone, and a bare memory-store open with one count query.

Batch: every symbol of the head snapshot as a citation (76,540 on ruff), through
``pipeline.validate`` (plan → run → aggregate, the batch path), against the floor: the
same rows' handles joined with the snapshot's symbols in DuckDB and fetched into Python. Beside it,
in alternating runs, the realistic mix of bench/mix.py (``--mix-memories`` × 4 stored
citations, every outcome; its histogram printed): citations/s of both, each against its
target (≥ 300k/s all-exact, ≥ 100k/s mix), met or missed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pygit2

from citegraph.bench.mix import batch_rates, build_mix, receipts_at
from citegraph.graph.snapshot_builder import build_snapshot, resolve_target
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.memory.lifecycle.store import MemoryStore, bulk_insert
from citegraph.memory.review.check import run_check
from citegraph.validator.capture import receipt_id
from citegraph.validator.diff_scope import tree_changes
from citegraph.validator.model import Receipt
from citegraph.validator.pipeline import MemoryInput, Scope


def symbol_receipts(home: Home, repo_path: str, commit: str) -> list[Receipt]:
    """Every symbol of the commit's snapshot as a citation captured there."""
    t = resolve_target(repo_path, commit)
    out = []
    with Snapshot.open(home.repo(t.identity.repository_id), t.snapshot_id, t.repo) as snap:
        extractor = snap.entry["extractor_version"]
        for row in snap.dicts("SELECT s.*, f.content_hash FROM symbols s JOIN files f USING (path) ORDER BY s.handle"):
            f = dict(ref=row["handle"], kind="symbol", repository_id=t.identity.repository_id,
                     repository_kind=t.identity.kind, snapshot_id=t.snapshot_id, commit=t.commit, dirty=False,
                     extractor_version=extractor, path=row["path"], blob_id=row["blob_id"],
                     content_hash=row["content_hash"], start_line=row["start_line"], end_line=row["end_line"],
                     handle=row["handle"], language=row["language"], symbol_kind=row["kind"], name=row["name"],
                     qualified_name=row["qualified_name"], ordinal=row["ordinal"], start_byte=row["start_byte"],
                     end_byte=row["end_byte"], fragment_hash=row["fragment_hash"], body_hash=row["body_hash"])
            f["id"] = receipt_id(f)
            out.append(Receipt(**f))
    return out


def timed(fn: Any, runs: int) -> tuple[list[float], Any]:
    xs, last = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        last = fn()
        xs.append(time.perf_counter() - t0)
    return xs, last


def stats(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(xs) * 1000, 1), "max_ms": round(max(xs) * 1000, 1)}


def batch_figures(home: Home, repo_path: str, head: str, runs: int, work: Path, mix_memories: int) -> dict[str, Any]:
    """Batch throughput of ``pipeline.validate``: the all-exact batch against a bare DuckDB
    join of the same rows, and the realistic mix (``bench/mix.py``) in alternating runs."""
    t = resolve_target(repo_path, head)
    receipts = symbol_receipts(home, repo_path, head)
    items = [MemoryInput(f"cgm_b{i}", receipts[i:i + 8]) for i in range(0, len(receipts), 8)]
    rs = home.repo(t.identity.repository_id)

    def floor() -> int:
        with Snapshot.open(rs, t.snapshot_id, t.repo) as snap:
            snap.con.register("_c", pa.table({"h": [r.handle for r in receipts],
                                              "fh": [r.fragment_hash for r in receipts]}))
            rows = snap.con.execute("SELECT c.h, s.fragment_hash = c.fh, s.path, s.start_line, s.end_line "
                                    "FROM _c c LEFT JOIN symbols s ON s.handle = c.h").fetchall()
            snap.con.unregister("_c")
            return len(rows)

    floor_xs, n = timed(floor, runs)
    assert n == len(receipts)
    mix = build_mix(home, repo_path, work, mix_memories)
    rates = batch_rates(home, items, lambda: Scope.for_paths([repo_path], at=t.commit), mix,
                        lambda: Scope.for_paths([str(mix.clone)], at=mix.head), runs)
    f50 = statistics.median(floor_xs)
    exact = rates["all_exact"]
    return {"workload_all_exact": f"every symbol of {head[:12]}, validated at that commit (the fast path)",
            "workload_mix": f"{mix.citations} stored citations captured at {mix.base[:12]}, validated at the "
                            f"edited commit {mix.head[:12]} of a clone",
            **rates, "floor_bare_join": stats(floor_xs), "floor_citations_per_s": round(len(receipts) / f50),
            "ratio_all_exact_to_floor_p50": round(exact["p50_seconds"] / f50, 2)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--head", default="HEAD~1")
    ap.add_argument("--ranges", default="1,100", help="commits between each base and the head")
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--home", help="a data home to keep and reuse (default: a temporary one)")
    ap.add_argument("--no-batch", action="store_true")
    ap.add_argument("--mix-memories", type=int, default=25000, help="memories of the realistic mix (4 citations each)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    ranges = [int(x) for x in args.ranges.split(",")]
    res: dict[str, Any] = {"repo": args.repo, "head": args.head, "memories": args.memories,
                           "load_average_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="cg-checkbench-") as tmp:
        home = Home.open(args.home or Path(tmp) / "home")
        repo = pygit2.Repository(args.repo)
        head = str(repo.revparse_single(args.head).peel(pygit2.Commit).id)
        bases = {n: str(repo.revparse_single(f"{head}~{n}").peel(pygit2.Commit).id) for n in ranges}
        index = {}
        for name, rev in [("head", head)] + [(f"base~{n}", b) for n, b in bases.items()]:
            t0 = time.perf_counter()
            built = build_snapshot(args.repo, home, rev=rev)
            index[name] = {"seconds": round(time.perf_counter() - t0, 2), "reused": built.reused}
        res["indexing"] = index
        oldest = bases[max(ranges)]
        t0 = time.perf_counter()
        with MemoryStore.open(home) as ms:
            have = ms.con.execute("SELECT count(*) FROM memories").fetchone()[0]
            if have != args.memories:
                ms.con.execute("DELETE FROM memories; DELETE FROM citations; DELETE FROM revisions; DELETE FROM terms")
                lists = receipts_at(home, args.repo, oldest, args.memories)
                bulk_insert(ms, [{"text": f"bench claim {i} about the code", "topic": f"bench{i}", "receipts": rs}
                                 for i, rs in enumerate(lists)])
            res["citations"] = ms.con.execute("SELECT count(*) FROM citations").fetchone()[0]
        res["setup_memories_seconds"] = round(time.perf_counter() - t0, 2)
        for n, base in bases.items():
            xs, rep = timed(lambda b=base: run_check(home, base=b, head=head, repo_path=args.repo), args.runs)
            diff_xs, _ = timed(lambda b=base: tree_changes(repo, b, head), args.runs)

            def store_floor() -> None:
                with MemoryStore.open(home, read_only=True) as ms:
                    ms.con.execute("SELECT count(*) FROM citations").fetchone()

            store_xs, _ = timed(store_floor, args.runs)
            s = rep.summary()
            res[f"check_{n}_commit"] = {"check": stats(xs), "diff_paths": rep.diff.get("paths"),
                                        "affected_citations": s.get("affected_citations"),
                                        "untouched_citations": s.get("untouched_citations"),
                                        "findings": s["findings"], "stale": s["stale"], "relocated": s["relocated"],
                                        "unknown": s["unknown"], "unchanged": s["unchanged"],
                                        "floor_tree_diff": stats(diff_xs), "floor_store_open": stats(store_xs)}
        if not args.no_batch:
            res["batch"] = batch_figures(home, args.repo, head, args.runs, Path(tmp), args.mix_memories)
    res["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:24} {v}")


if __name__ == "__main__":
    main()
