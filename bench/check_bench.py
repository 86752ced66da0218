"""`citegraph check` benchmark (SPEC §14: ruff, 10k memories, ≤ 1 s beyond indexing) and the
batch-validation floor (SPEC §6.6: ≥ 100k citations/s, against a bare DuckDB join of the
same rows measured in the same run).

    python -m citegraph.bench.check_bench --repo PATH [--head HEAD~1] [--ranges 1,100]
        [--memories 10000] [--runs 5] [--home DIR] [--json]

Setup (not timed as "check"): a data home (``--home`` keeps and reuses one); the commit
snapshots of the head and of each base ``head~N`` (built from the object database; the
build time is reported as indexing); ``--memories`` memories written in bulk whose
citations were captured at the oldest base (2 symbols, 1 span, 1 file each, from distinct
random definitions — receipts as capture writes them). Timed: ``run_check`` per range with
both snapshots ready (p50 / max over ``--runs``), and its parts; floors: the tree diff
alone, and a bare memory-store open with one count query.

Batch: every symbol of the head snapshot as a citation (76,540 on ruff), through
``pipeline.validate`` (plan → run → aggregate, the batch path), against the floor: the
same rows' handles joined with the snapshot's symbols in DuckDB and fetched into Python.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pygit2

from citegraph.graph.snapshot_builder import build_snapshot, resolve_target
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.memory.lifecycle.store import MemoryStore, bulk_insert
from citegraph.memory.review.check import run_check
from citegraph.validator.capture import receipt_id
from citegraph.validator.diff_scope import tree_changes
from citegraph.validator.model import Receipt
from citegraph.validator.pipeline import MemoryInput, Scope, validate
from citegraph.validator.spans import hash_bytes, line_count, line_starts, span_bytes


def receipts_at(home: Home, repo_path: str, commit: str, n_memories: int, seed: int = 11) -> list[list[Receipt]]:
    """``n_memories`` citation lists captured at ``commit`` (as capture would write them)."""
    t = resolve_target(repo_path, commit)
    rs = home.repo(t.identity.repository_id)
    rnd = random.Random(seed)
    out: list[list[Receipt]] = []
    with Snapshot.open(rs, t.snapshot_id, t.repo) as snap:
        extractor = snap.entry["extractor_version"]
        syms = snap.dicts("SELECT s.*, f.content_hash, f.dirty FROM symbols s JOIN files f USING (path) "
                          "WHERE f.status = 'indexed' ORDER BY s.handle")
        files = snap.dicts("SELECT * FROM files WHERE status = 'indexed' ORDER BY path")
        rnd.shuffle(syms)
        rnd.shuffle(files)
        base = {"repository_id": t.identity.repository_id, "repository_kind": t.identity.kind,
                "snapshot_id": t.snapshot_id, "commit": t.commit, "dirty": False, "extractor_version": extractor}
        blobs: dict[str, bytes] = {}
        for i in range(n_memories):
            cites = []
            for row in (syms[(2 * i) % len(syms)], syms[(2 * i + 1) % len(syms)]):
                f = dict(base, ref=f"{row['path']}::{row['qualified_name']}", kind="symbol", path=row["path"],
                         blob_id=row["blob_id"], content_hash=row["content_hash"], start_line=row["start_line"],
                         end_line=row["end_line"], handle=row["handle"], language=row["language"],
                         symbol_kind=row["kind"], name=row["name"], qualified_name=row["qualified_name"],
                         ordinal=row["ordinal"], start_byte=row["start_byte"], end_byte=row["end_byte"],
                         fragment_hash=row["fragment_hash"], body_hash=row["body_hash"])
                cites.append(f)
            frow = files[i % len(files)]
            srow = files[(i + len(files) // 2) % len(files)]
            if srow["blob_id"] not in blobs:
                blobs[srow["blob_id"]] = snap.blob_bytes(srow["blob_id"]) or b""
            data = blobs[srow["blob_id"]]
            n = line_count(data)
            if n:
                s = 1 + (i % n)
                e = min(n, s + 4)
                starts = line_starts(data)
                cites.append(dict(base, ref=f"{srow['path']}#L{s}-L{e}", kind="span", path=srow["path"],
                                  blob_id=srow["blob_id"], content_hash=srow["content_hash"], start_line=s,
                                  end_line=e, span_hash=hash_bytes(span_bytes(data, s, e, starts)),
                                  first_line_hash=hash_bytes(span_bytes(data, s, s, starts))))
            cites.append(dict(base, ref=frow["path"], kind="file", path=frow["path"], blob_id=frow["blob_id"],
                              content_hash=frow["content_hash"]))
            rs_ = []
            for f in cites:
                f["id"] = receipt_id(f)
                rs_.append(Receipt(**f))
            out.append(rs_)
    return out


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


def batch_figures(home: Home, repo_path: str, head: str, runs: int) -> dict[str, Any]:
    """Batch throughput of ``pipeline.validate`` vs a bare DuckDB join of the same rows."""
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

    def full() -> dict[str, int]:
        return validate(home, items, Scope.for_paths([repo_path], at=t.commit)).summary()

    floor_xs, n = timed(floor, runs)
    full_xs, summary = timed(full, runs)
    assert n == len(receipts)
    f50, v50 = statistics.median(floor_xs), statistics.median(full_xs)
    return {"citations": len(receipts), "outcomes": summary, "validate": stats(full_xs),
            "citations_per_s_p50": round(len(receipts) / v50), "citations_per_s_best": round(len(receipts) / min(full_xs)),
            "floor_bare_join": stats(floor_xs), "floor_citations_per_s": round(len(receipts) / f50),
            "ratio_to_floor_p50": round(v50 / f50, 2)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--head", default="HEAD~1")
    ap.add_argument("--ranges", default="1,100", help="commits between each base and the head")
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--home", help="a data home to keep and reuse (default: a temporary one)")
    ap.add_argument("--no-batch", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    ranges = [int(x) for x in args.ranges.split(",")]
    res: dict[str, Any] = {"repo": args.repo, "head": args.head, "memories": args.memories}
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
            res["batch"] = batch_figures(home, args.repo, head, args.runs)
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:24} {v}")


if __name__ == "__main__":
    main()
