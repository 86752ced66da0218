"""Validation benchmark: latency of 96 citations (one repository, and 32 repositories) and
batch throughput over one snapshot, each printed with the floor measured in the same run.

    python -m citegraph.bench.validate_bench --repo PATH [--runs 30] [--batch 100000]
        [--batch-runs 5] [--mix-memories 25000] [--repos32] [--json]

PATH must be a git worktree (it is indexed into a temporary data home; nothing in the
repository is modified: the realistic mix edits a clone). Batch: the all-exact fast path
(every symbol of the snapshot) and the realistic mix of bench/mix.py, alternating runs,
citations/s and the outcome histogram of each, targets met or missed. Floors: the current-state check alone (``git status`` +
catalog), done twice per validation (before and after, for the racing check), and a bare
snapshot open.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from citegraph.bench.mix import batch_rates, build_mix
from citegraph.graph.current import current_state
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.validator.capture import capture, receipt_id
from citegraph.validator.model import Receipt
from citegraph.validator.pipeline import MemoryInput, resolve_scope, validate


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def ms(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(xs) * 1000, 1), "p95_ms": round(pct(xs, 0.95) * 1000, 1)}


def pick_refs(home: Home, repo: str, n: int, seed: int = 7) -> list[str]:
    """A mix of symbol (50 %), span (25 %) and file (25 %) refs from the current snapshot."""
    cur = current_state(repo, home)
    rnd = random.Random(seed)
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        syms = snap.query("SELECT handle, path, start_line, end_line FROM symbols s WHERE "
                          "(SELECT count(*) FROM symbols t WHERE t.handle = s.handle) = 1 "
                          "ORDER BY handle LIMIT 20000")
        files = [r[0] for r in snap.query("SELECT path FROM files WHERE status = 'indexed' ORDER BY path")]
    rnd.shuffle(syms)
    rnd.shuffle(files)
    refs: list[str] = []
    for i in range(n):
        h, path, s, e = syms[i]
        if i % 4 in (0, 1):
            refs.append(h)
        elif i % 4 == 2:
            refs.append(f"{path}#L{s}-L{min(e, s + 5)}")
        else:
            refs.append(files[i])
    return refs


def capture_all(home: Home, repo: str, refs: list[str]) -> list[MemoryInput]:
    items = []
    for i in range(0, len(refs), 8):
        receipts = capture(home, repo, refs[i:i + 8])
        items.append(MemoryInput(f"cgm_bench{i:04d}", receipts))
    return items


def time_validation(home: Home, repos: list[str], items: list[MemoryInput], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        scope = resolve_scope(home, repos)
        report = validate(home, items, scope)
        out.append(time.perf_counter() - t0)
        assert all(v.freshness == "fresh" for v in report.verdicts), "bench citations must be exact"
    return out


def batch_receipts(home: Home, repo: str, limit: int) -> list[Receipt]:
    """Receipts of every symbol and file (as capture would write them), for throughput."""
    cur = current_state(repo, home)
    out: list[Receipt] = []
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        for row in snap.dicts(f"SELECT s.*, f.content_hash, f.dirty FROM symbols s JOIN files f USING (path) "
                              f"ORDER BY s.handle LIMIT {int(limit)}"):
            fields = dict(ref=row["handle"], kind="symbol", repository_id=cur.identity.repository_id,
                          repository_kind=cur.identity.kind, snapshot_id=cur.snapshot_id, commit=cur.head,
                          dirty=bool(row["dirty"]), extractor_version=snap.entry["extractor_version"],
                          path=row["path"], blob_id=row["blob_id"], content_hash=row["content_hash"],
                          start_line=row["start_line"], end_line=row["end_line"], handle=row["handle"],
                          language=row["language"], symbol_kind=row["kind"], name=row["name"],
                          qualified_name=row["qualified_name"], ordinal=row["ordinal"],
                          start_byte=row["start_byte"], end_byte=row["end_byte"],
                          fragment_hash=row["fragment_hash"], body_hash=row["body_hash"])
            fields["id"] = receipt_id(fields)
            out.append(Receipt(**fields))
    return out


def make_small_repos(root: Path, n: int) -> list[str]:
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}
    paths = []
    for i in range(n):
        p = root / f"r{i:02d}"
        (p / "pkg").mkdir(parents=True)
        for j in range(20):
            (p / "pkg" / f"m{j}.py").write_text(
                f"class C{j}:\n    def run(self, x):\n        return x + {i * 100 + j}\n\n\n"
                f"def helper_{j}(y):\n    return C{j}().run(y)\n")
        subprocess.run(["git", "init", "-q"], cwd=p, check=True)
        subprocess.run(["git", "add", "."], cwd=p, check=True)
        subprocess.run(["git", "commit", "-qm", "init"], cwd=p, check=True, env={**os.environ, **env})
        paths.append(str(p))
    return paths


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--citations", type=int, default=96)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--batch", type=int, default=100000)
    ap.add_argument("--batch-runs", type=int, default=5, help="alternating runs of the all-exact batch and the mix")
    ap.add_argument("--mix-memories", type=int, default=25000, help="memories of the realistic mix (4 citations each)")
    ap.add_argument("--repos32", action="store_true", help="also 96 citations over 32 small repositories")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res: dict = {"load_average_start": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(prefix="cg-vbench-") as tmp:
        home = Home.open(Path(tmp) / "home")
        t0 = time.perf_counter()
        build_snapshot(args.repo, home)
        res["index_seconds"] = round(time.perf_counter() - t0, 2)
        refs = pick_refs(home, args.repo, args.citations)
        items = capture_all(home, args.repo, refs)
        res["citations"] = sum(len(i.receipts) for i in items)

        floor_state, floor_open = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            cur = current_state(args.repo, home)
            floor_state.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            Snapshot.open(cur.store, cur.snapshot_id, cur.repo).close()
            floor_open.append(time.perf_counter() - t0)
        lat = time_validation(home, [args.repo], items, args.runs)
        res["validate_96_one_repo"] = ms(lat)
        res["floor_current_state_x2"] = ms([2 * x for x in floor_state])
        res["floor_snapshot_open"] = ms(floor_open)
        res["validate_over_floor_p50"] = round(statistics.median(lat) /
                                               statistics.median([2 * x + y for x, y in zip(floor_state, floor_open, strict=True)]), 2)

        receipts = batch_receipts(home, args.repo, args.batch)
        chunk = [MemoryInput(f"cgm_b{i}", receipts[i:i + 8]) for i in range(0, len(receipts), 8)]
        mix = build_mix(home, args.repo, Path(tmp), args.mix_memories)
        res["batch_workloads"] = {
            "all_exact": f"{len(receipts)} symbols of the current snapshot, validated there (the fast path)",
            "mix": f"{mix.citations} citations captured at {mix.base[:12]} and read from the memory store, "
                   f"validated at the edited commit {mix.head[:12]} of a clone"}
        res.update({f"batch_{k}": v for k, v in batch_rates(
            home, chunk, lambda: resolve_scope(home, [args.repo]), mix,
            lambda: resolve_scope(home, [str(mix.clone)]), args.batch_runs).items()})

        if args.repos32:
            paths = make_small_repos(Path(tmp) / "repos", 32)
            for p in paths:
                build_snapshot(p, home)
            items32 = []
            for k, p in enumerate(paths):
                refs32 = [f"pkg/m{k % 20}.py::C{k % 20}.run", f"pkg/m{(k + 1) % 20}.py",
                          f"pkg/m{(k + 2) % 20}.py#L1-L3"]
                items32.append(MemoryInput(f"cgm_r{k}", capture(home, p, refs32)))
            lat32 = time_validation(home, paths, items32, max(5, args.runs // 3))
            floor32 = []
            for _ in range(max(5, args.runs // 3)):
                t0 = time.perf_counter()
                for p in paths:
                    current_state(p, home)
                floor32.append(time.perf_counter() - t0)
            res["validate_96_over_32_repos"] = ms(lat32)
            res["floor_32_current_state"] = ms(floor32)
    res["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:28} {v}")


if __name__ == "__main__":
    main()
