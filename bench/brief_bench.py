"""Context Brief benchmark (SPEC §14): a brief over 10k memories with 96 citations, on one
repository and across 32 repositories, against floors measured in the same run.

    python -m citegraph.bench.brief_bench --repo PATH --memories 10000 --citations 96 [--runs 30]
    python -m citegraph.bench.brief_bench --repos 32 --memories 10000 --citations 96

Setup (not timed): a temporary data home; the repository indexed to exact-current (or, with
``--repos N``, N synthetic small repositories in a temporary directory, indexed and grouped
in a prepared workset); ``--citations`` distinct refs (symbols, files, spans) captured
against the exact-current snapshots; ``--memories`` memories written in bulk, of which
``citations/8`` *target* memories carry those citations and share the task's rare words,
and a quarter of the rest carry background citations.

Timed (p50 / p95 over ``--runs``):
- brief, observation cache cold (``use_cache=False``: every citation validated) — the
  headline figure — and warm (observations cached per (snapshot, citation));
- floors: the bare current-state check (``git status`` + catalog stat) per repository, a
  bare snapshot open, a bare memory-store open, recall alone, and ``validate`` alone over
  the same receipts (no cache).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from citegraph.graph.current import current_state
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.memory import api
from citegraph.memory.brief.recall import recall
from citegraph.memory.lifecycle.store import MemoryStore, bulk_insert
from citegraph.memory.worksets import workset as ws
from citegraph.validator.capture import capture
from citegraph.validator.model import Receipt
from citegraph.validator.pipeline import MemoryInput, resolve_scope, validate

TASK_WORDS = ("zephyrine", "quillback", "marrowset")
COMMON = "retry"
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null"}


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def timed(fn: Callable[[], object], runs: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT_ENV}, check=True, capture_output=True)


def synthetic_repo(root: Path, n: int, files: int = 24) -> Path:
    """A small Python repository with distinct symbols."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "remote", "add", "origin", f"https://bench.example.com/org/svc{n}.git")
    for f in range(files):
        body = [f"class Service{n}x{f}:"]
        for m in range(4):
            body += [f"    def op{m}(self, value):", f"        return value * {m + f + n + 1}", ""]
        body += ["", f"def helper{n}x{f}(a, b):", f"    return a + b + {f}", ""]
        (root / "pkg").mkdir(exist_ok=True)
        (root / "pkg" / f"mod{f}.py").write_text("\n".join(body))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def pick_refs(home: Home, repo: str, count: int, rnd: random.Random) -> list[str]:
    """``count`` distinct refs of the exact-current snapshot: ~2/3 symbols, files, spans."""
    cur = current_state(repo, home)
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        syms = snap.query("SELECT path, qualified_name FROM symbols s WHERE ordinal = 0 AND NOT EXISTS "
                          "(SELECT 1 FROM symbols t WHERE t.path = s.path AND t.qualified_name = s.qualified_name "
                          "AND t.handle <> s.handle) ORDER BY path, start_byte")
        files = snap.query("SELECT path FROM files WHERE status = 'indexed' AND size > 100 ORDER BY path")
    rnd.shuffle(syms)
    rnd.shuffle(files)
    n_sym = min(len(syms), count * 2 // 3)
    refs = [f"{p}::{q}" for p, q in syms[:n_sym]]
    rest = count - n_sym
    for (p,) in files[: (rest + 1) // 2]:
        refs.append(p)
    for (p,) in files[(rest + 1) // 2: rest]:
        refs.append(f"{p}#L1-L2")
    if len(refs) < count:
        raise SystemExit(f"{repo}: only {len(refs)} citable places, {count} wanted")
    return refs[:count]


def capture_all(home: Home, repo: str, refs: list[str]) -> list[Receipt]:
    out: list[Receipt] = []
    for i in range(0, len(refs), 8):
        out.extend(capture(home, repo, refs[i:i + 8]))
    return out


def fill_memories(home: Home, n: int, targets: list[list[Receipt]], background: list[Receipt],
                  rnd: random.Random) -> None:
    vocab = [f"w{i:04d}" for i in range(3000)]
    items = []
    for k, rs in enumerate(targets):
        words = " ".join(rnd.choice(vocab) for _ in range(12))
        items.append({"text": f"{' '.join(TASK_WORDS)} {COMMON} target claim {k} {words}",
                      "project": "bench", "topic": f"target{k}", "receipts": rs})
    for i in range(n - len(targets)):
        words = [rnd.choice(vocab) for _ in range(rnd.randint(6, 40))]
        cited = background and i % 4 == 0
        if not cited and i % 3 == 0:
            words.append(COMMON)  # a long posting list for the task's common word (uncited)
        items.append({"text": " ".join(words), "project": rnd.choice(["bench", "other", "misc"]),
                      "topic": f"bg{i}",
                      "receipts": rnd.sample(background, min(len(background), rnd.randint(1, 3))) if cited else []})
    with MemoryStore.open(home) as ms:
        ms.con.execute("BEGIN TRANSACTION")
        bulk_insert(ms, items)
        ms.con.execute("COMMIT")


def brief_runs(fn: Callable[[], object], runs: int, phases: dict[str, list[float]]) -> list[float]:
    """Time ``fn`` (a brief) and collect its per-phase timings into ``phases``."""
    def one() -> object:
        res = fn()
        for k, v in res.timings.items():  # type: ignore[attr-defined]
            phases.setdefault(k, []).append(v * 1000)
        return res

    out = timed(one, runs)
    for v in phases.values():
        del v[:-runs]
    return out


def print_phases(label: str, phases: dict[str, list[float]]) -> None:
    print(f"  {label} phases p50 ms: " + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in phases.items()))


def report(rows: list[tuple[str, list[float], str]]) -> list[dict]:
    out = []
    print(f"{'figure':58} {'p50 ms':>8} {'p95 ms':>8}  target/floor")
    for name, xs, note in rows:
        print(f"{name:58} {statistics.median(xs):8.1f} {pct(xs, 0.95):8.1f}  {note}")
        out.append({"figure": name, "p50_ms": round(statistics.median(xs), 2), "p95_ms": round(pct(xs, 0.95), 2),
                    "note": note})
    return out


def bench_one(args: argparse.Namespace, tmp: Path, rnd: random.Random) -> list[dict]:
    home = Home.open(tmp / "home")
    repo = os.path.realpath(args.repo)
    t = time.perf_counter()
    res = build_snapshot(repo, home)
    print(f"setup: indexed {repo} ({res.files} files, {res.symbols} symbols) in {time.perf_counter() - t:.1f}s")
    refs = pick_refs(home, repo, args.citations, rnd)
    receipts = capture_all(home, repo, refs)
    targets = [receipts[i:i + 8] for i in range(0, len(receipts), 8)]
    t = time.perf_counter()
    fill_memories(home, args.memories, targets, receipts, rnd)
    print(f"setup: {args.memories} memories ({len(targets)} targets with {len(receipts)} citations) "
          f"written in {time.perf_counter() - t:.1f}s")
    task = f"check {' '.join(TASK_WORDS)} {COMMON} behaviour before changing it"
    probe = api.brief(home, task, repo_paths=[repo], use_cache=False)
    d = probe.data
    print(f"probe: selected {d['selected']}, validated {d['limits']['validated_citations']} citations, "
          f"coverage {d['coverage']}, {d['estimated_tokens']} tokens, timings "
          + json.dumps({k: round(v * 1000, 1) for k, v in probe.timings.items()}))
    assert d["limits"]["validated_citations"] == len(receipts), d["limits"]
    cur = current_state(repo, home)
    mem_inputs = [MemoryInput(f"m{i}", rs) for i, rs in enumerate(targets)]
    cold: dict[str, list[float]] = {}
    warm: dict[str, list[float]] = {}
    rows = [
        ("brief, 10k memories, 96 citations (cache cold)" if args.memories == 10000 and args.citations == 96
         else f"brief, {args.memories} memories, {args.citations} citations (cache cold)",
         brief_runs(lambda: api.brief(home, task, repo_paths=[repo], use_cache=False), args.runs, cold),
         "p95 ≤ 150 ms"),
        ("brief, same (observation cache warm)",
         brief_runs(lambda: api.brief(home, task, repo_paths=[repo]), args.runs, warm), "p95 ≤ 150 ms"),
        ("floor: current-state check (git status + catalog)",
         timed(lambda: current_state(repo, home), args.runs), "floor"),
        ("floor: bare snapshot open + close",
         timed(lambda: Snapshot.open(cur.store, cur.snapshot_id, cur.repo).close(), args.runs), "floor"),
        ("floor: bare memory-store open + close (read-only)",
         timed(lambda: _open_store(home), args.runs), "floor"),
        ("part: recall alone (store open + BM25 + boosts)",
         timed(lambda: _recall(home, task), args.runs), "part"),
        ("part: validate alone, same 96 receipts, no cache",
         timed(lambda: validate(home, mem_inputs, resolve_scope(home, [repo])), args.runs),
         "part (includes 2 current-state checks)"),
    ]
    out = report(rows)
    print_phases("cold", cold)
    print_phases("warm", warm)
    return out


def _open_store(home: Home) -> None:
    with MemoryStore.open(home, read_only=True):
        pass


def _recall(home: Home, task: str) -> None:
    with MemoryStore.open(home, read_only=True) as ms:
        recall(ms, task)


def bench_many(args: argparse.Namespace, tmp: Path, rnd: random.Random) -> list[dict]:
    home = Home.open(tmp / "home")
    n = args.repos
    t = time.perf_counter()
    repos = [str(synthetic_repo(tmp / f"svc{i}", i)) for i in range(n)]
    ws.create(home, "fleet", repos)
    prep = ws.prepare(home, "fleet", jobs=2)
    assert prep["ready"], prep
    print(f"setup: {n} synthetic repositories created and prepared in {time.perf_counter() - t:.1f}s")
    per = max(1, args.citations // n)
    receipts: list[Receipt] = []
    for r in repos:
        receipts.extend(capture_all(home, r, pick_refs(home, r, per, rnd)))
    receipts = receipts[:args.citations]
    # spread each target's 8 citations over 8 repositories
    by_repo: dict[str, list[Receipt]] = {}
    for r in receipts:
        by_repo.setdefault(r.repository_id, []).append(r)
    order = [r for i in range(per) for rs in by_repo.values() if i < len(rs) for r in [rs[i]]]
    targets = [order[i:i + 8] for i in range(0, len(order), 8)]
    fill_memories(home, args.memories, targets, receipts, rnd)
    task = f"check {' '.join(TASK_WORDS)} {COMMON} behaviour across services"
    probe = api.brief(home, task, workset="fleet", use_cache=False)
    d = probe.data
    print(f"probe: selected {d['selected']}, validated {d['limits']['validated_citations']} citations in "
          f"{d['limits']['repositories']} repositories, coverage {d['coverage']}, timings "
          + json.dumps({k: round(v * 1000, 1) for k, v in probe.timings.items()}))
    curs = [current_state(r, home) for r in repos]

    def states_parallel() -> None:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda r: current_state(r, home), repos))

    def opens() -> None:
        for c in curs:
            Snapshot.open(c.store, c.snapshot_id, c.repo).close()

    runs = max(5, args.runs // 2)
    cold: dict[str, list[float]] = {}
    warm: dict[str, list[float]] = {}
    rows = [
        (f"brief, {args.memories} memories, {len(receipts)} citations / {n} repos (cache cold)",
         brief_runs(lambda: api.brief(home, task, workset="fleet", use_cache=False), runs, cold),
         "p95 ≤ 250 ms (validation)"),
        ("brief, same (observation cache warm)",
         brief_runs(lambda: api.brief(home, task, workset="fleet"), runs, warm), ""),
        (f"floor: {n} current-state checks, sequential",
         timed(lambda: [current_state(r, home) for r in repos], runs), "floor"),
        (f"floor: {n} current-state checks, 4 threads", timed(states_parallel, runs), "floor"),
        (f"floor: {n} bare snapshot opens, sequential", timed(opens, runs), "floor"),
    ]
    out = report(rows)
    print_phases("cold", cold)
    print_phases("warm", warm)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", help="Repository to cite (its current worktree state is indexed).")
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--citations", type=int, default=96)
    ap.add_argument("--repos", type=int, default=0, help="Also run the N-synthetic-repository figure.")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="Keep the temporary directory.")
    args = ap.parse_args(argv)
    if not args.repo and not args.repos:
        ap.error("pass --repo PATH and/or --repos N")
    rnd = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="citegraph-brief-bench-"))
    results: dict[str, list[dict]] = {}
    try:
        if args.repo:
            results["one_repository"] = bench_one(args, tmp / "one", rnd)
        if args.repos:
            results["many_repositories"] = bench_many(args, tmp / "many", rnd)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
