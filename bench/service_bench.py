"""Resident-service benchmark: reads through the service against the one-shot path and a
peer, all measured in one run and printed as ratios.

    python -m citegraph.bench.service_bench --repo PATH [--runs 30] [--memories 10000]
        [--repos32] [--edits 20] [--memcite AM] [--home DIR] [--json]

PATH is a git worktree (ruff-size, or the synthetic monorepo of citegraph.bench.monorepo).
It is never modified except for the edit figure, which appends to one file and restores it
with ``git checkout``. ``--home`` reuses a data home that already holds PATH's snapshot (a
cold index of the 254k-file monorepo takes minutes).

Figures (p50/p95 over ``--runs``):
- one-shot: the validation of 96 citations (pipeline, git-status scan before and after,
  no observation cache) — and its floor, the two state reads alone;
- through the service: the same 96 citations as a `validate` request over the socket
  (warm observation cache, as every repeated read is) and with the cache bypassed;
- whole process: `citegraph validate` through the service, `citegraph validate
  --no-service`, and memcite's `am validate` on the same 96 spans (in a copy of PATH:
  memcite writes its database into the worktree) — ratios to memcite;
- `remember` of 8 citations through the service; brief over ``--memories`` memories;
- 96 citations over 32 small repositories through the service;
- edit → exact-current ready: append a line, poll until the overlay is exact-current;
- the service's resident memory (VmRSS, VmHWM).
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
from pathlib import Path
from typing import Any

from citegraph.graph.current import ScanSource, current_state
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.memory import api
from citegraph.memory.lifecycle.store import MemoryStore, bulk_insert
from citegraph.server import client
from citegraph.validator.capture import capture
from citegraph.validator.pipeline import MemoryInput, resolve_scope, validate

CLI = [sys.executable, "-m", "citegraph.cli.main"]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(xs) * 1000, 2), "p95_ms": round(pct(xs, 0.95) * 1000, 2),
            "n": len(xs)}


def timed(fn: Any, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def pick(home: Home, repo: str, n: int, seed: int = 11) -> tuple[list[str], list[tuple[str, int, int]]]:
    """96 mixed refs (1/3 symbols, 1/3 spans, 1/3 files) and the spans alone (for memcite)."""
    cur = current_state(repo, home)
    rnd = random.Random(seed)
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        syms = snap.query("SELECT handle, path, start_line, end_line FROM symbols s WHERE "
                          "(SELECT count(*) FROM symbols t WHERE t.handle = s.handle) = 1 AND end_line > start_line "
                          "ORDER BY handle LIMIT 20000")
        files = [r[0] for r in snap.query("SELECT path FROM files WHERE status = 'indexed' AND NOT dirty "
                                          "ORDER BY path")]
    rnd.shuffle(syms)
    rnd.shuffle(files)
    refs, spans = [], []
    for i in range(n):
        h, path, s, e = syms[i]
        if i % 3 == 0:
            refs.append(h)
        elif i % 3 == 1:
            end = min(e, s + 5)
            refs.append(f"{path}#L{s}-L{end}")
            spans.append((path, s, end))
        else:
            refs.append(files[i])
    return refs, spans


def all_spans(home: Home, repo: str, n: int) -> list[tuple[str, int, int]]:
    """``n`` spans for the memcite comparison (same kind of evidence, same files)."""
    cur = current_state(repo, home)
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        rows = snap.query("SELECT path, start_line, least(end_line, start_line + 5) FROM symbols "
                          "WHERE end_line > start_line ORDER BY handle LIMIT ?", [n])
    return [tuple(r) for r in rows]


def start_service(home: Home, repos: list[str]) -> subprocess.Popen:
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    p = subprocess.Popen([*CLI, "serve", "--debounce-ms", "10", *repos], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while client.call(home, "ping", {}) is None:
        if p.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the service did not start")
        time.sleep(0.05)
    return p


def wait_exact(home: Home, repo: str, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        st = client.call(home, "status", {"path": repo})
        if st["exact_current"]:
            return st
        if time.monotonic() > deadline:
            raise SystemExit(f"{repo}: no exact-current snapshot through the service")
        time.sleep(0.05)


def rss_kib(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1])
    return out


def whole_process(cmd: list[str], runs: int, env: dict | None = None, cwd: str | None = None) -> list[float]:
    out = []
    for _ in range(runs + 1):  # one warm-up
        t0 = time.perf_counter()
        res = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True)
        out.append(time.perf_counter() - t0)
        if res.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed: {res.stderr.decode()[-400:]}")
    return out[1:]


def make_small_repos(root: Path, n: int) -> list[str]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}
    paths = []
    for i in range(n):
        p = root / f"r{i:02d}"
        (p / "pkg").mkdir(parents=True)
        for j in range(20):
            (p / "pkg" / f"m{j}.py").write_text(f"class C{j}:\n    def run(self, x):\n        return x + {i * 100 + j}\n")
        subprocess.run(["git", "init", "-q"], cwd=p, check=True)
        subprocess.run(["git", "add", "."], cwd=p, check=True)
        subprocess.run(["git", "commit", "-qm", "init"], cwd=p, check=True, env=env)
        paths.append(str(p))
    return paths


def memcite_figure(am: str, repo: str, spans: list[tuple[str, int, int]], runs: int, work: Path) -> list[float]:
    """memcite's `am validate` on the same spans, in a shared clone of the worktree."""
    clone = work / "memcite-clone"
    subprocess.run(["git", "clone", "-q", "--shared", repo, str(clone)], check=True)
    for path, s, e in spans:
        subprocess.run([am, "add", f"span {path}:{s}", "--file", path, "--lines", f"{s}-{e}"], cwd=clone,
                       check=True, capture_output=True)
    return whole_process([am, "validate"], runs, cwd=str(clone))


def run(args: argparse.Namespace) -> dict[str, Any]:
    repo = os.path.realpath(args.repo)
    out: dict[str, Any] = {"repo": repo, "runs": args.runs, "load_start": os.getloadavg()[0]}
    tmp = Path(tempfile.mkdtemp(prefix="cg-svcbench-"))
    home = Home.open(args.home or tmp / "home")
    proc = None
    try:
        t0 = time.perf_counter()
        build_snapshot(repo, home)
        out["index_s"] = round(time.perf_counter() - t0, 2)
        refs, spans = pick(home, repo, args.citations)
        items = [MemoryInput(f"cgm_sb{i:03d}", capture(home, repo, refs[i:i + 8])) for i in range(0, len(refs), 8)]
        ids = [api.remember(home, f"service bench claim {i}", repo=repo, refs=refs[i:i + 8], project="svcbench",
                            topic=f"m{i:03d}")["id"] for i in range(0, len(refs), 8)]

        # one-shot (no service): the validation itself, and its floor (the two state reads)
        def one_shot() -> None:
            rep = validate(home, items, resolve_scope(home, [repo], source=ScanSource()))
            assert all(v.freshness == "fresh" for v in rep.verdicts)

        out["one_shot_validation"] = summary(timed(one_shot, args.runs))
        scan = ScanSource()
        out["one_shot_floor_two_reads"] = summary(timed(lambda: scan.moved(scan.read(repo, home)), args.runs))

        proc = start_service(home, [repo])
        wait_exact(home, repo)
        args_v = {"memory_ids": ids, "repo_paths": [repo]}
        client.call(home, "validate", args_v)  # warms the observation cache
        out["service_validate_96"] = summary(timed(lambda: client.call(home, "validate", args_v), args.runs))
        # dependency-changed advisories (SPEC §21): depth 1 is the default above; 0 turns the
        # check off, 3 is the deepest — the same 96 citations, ratios to depth 0
        for depth in (0, 3):
            a = {**args_v, "dependency_depth": depth}
            client.call(home, "validate", a)
            out[f"service_validate_96_depth{depth}"] = summary(timed(lambda a=a: client.call(home, "validate", a),
                                                                     args.runs))
        base0 = out["service_validate_96_depth0"]["p50_ms"]
        out["ratio_advisories_depth1_to_off"] = round(out["service_validate_96"]["p50_ms"] / base0, 3)
        out["ratio_advisories_depth3_to_off"] = round(out["service_validate_96_depth3"]["p50_ms"] / base0, 3)
        rep = client.call(home, "validate", args_v)
        out["recorded_dependencies"] = sum(len(r.dependencies) for it in items for r in it.receipts)
        out["advisories_depth1"] = sum(len(c.get("advisories", ())) for m in rep["memories"] for c in m["citations"])
        out["service_ping"] = summary(timed(lambda: client.call(home, "ping", {}), args.runs))

        env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
        cmd = [*CLI, "validate", "--format", "json", "--project", "svcbench", "--repo", repo]
        out["process_validate_service"] = summary(whole_process(cmd, args.runs, env=env))
        out["process_validate_one_shot"] = summary(whole_process([*cmd, "--no-service"], args.runs, env=env))
        if args.memcite:
            msp = all_spans(home, repo, args.citations)
            out["process_memcite_validate_96_spans"] = summary(memcite_figure(args.memcite, repo, msp, args.runs, tmp))
            m = out["process_memcite_validate_96_spans"]["p50_ms"]
            out["ratio_process_service_to_memcite"] = round(out["process_validate_service"]["p50_ms"] / m, 3)
            out["ratio_process_one_shot_to_memcite"] = round(out["process_validate_one_shot"]["p50_ms"] / m, 3)

        # remember of 8 citations through the service (the same refs again: new revisions)
        def remember() -> None:
            client.call(home, "remember", {"text": "bench remember", "repo": repo, "refs": refs[:8],
                                           "project": "svcbench", "topic": "remember"})

        out["service_remember_8"] = summary(timed(remember, args.runs))

        # brief over many memories (BM25 over all; at most 24 selected, 96 citations)
        if args.memories:
            with MemoryStore.open(home) as ms:
                words = ["retry", "parser", "cache", "lint", "format", "rule", "config", "server", "token"]
                rnd = random.Random(5)
                tag = f"{int(time.time() * 1000) % 10**9}"  # a reused home already holds earlier runs'
                batch = [{"text": " ".join(rnd.choice(words) for _ in range(12)) + f" note {k}",
                          "project": "brief", "topic": f"b{tag}-{k:05d}"} for k in range(args.memories)]
                ms.con.execute("BEGIN TRANSACTION")
                bulk_insert(ms, batch)
                ms.con.execute("COMMIT")
            bargs = {"task": "change the retry cache parser rule", "repo_paths": [repo]}
            client.call(home, "brief", bargs)
            out["service_brief"] = summary(timed(lambda: client.call(home, "brief", bargs), args.runs))

        # edit -> exact-current (the overlay), then back
        target = refs[2] if "#" not in refs[2] and not refs[2].startswith("cgs_") else None
        edit_path = target or next(r for r in refs if "#" not in r and not r.startswith("cgs_"))
        lat = []
        for k in range(args.edits):
            full = Path(repo) / edit_path
            before = full.read_bytes()
            t0 = time.perf_counter()
            full.write_bytes(before + f"\n# bench edit {k}\n".encode())
            while True:
                st = client.call(home, "status", {"path": repo})
                if st["exact_current"] and st["dirty"]:
                    break
                if time.perf_counter() - t0 > 60:
                    raise SystemExit("the edit never became exact-current")
                time.sleep(0.002)
            lat.append(time.perf_counter() - t0)
            subprocess.run(["git", "checkout", "--", edit_path], cwd=repo, check=True)
            wait_exact(home, repo)
        if lat:
            out["edit_to_exact_current"] = summary(lat)

        if args.repos32:
            small = make_small_repos(tmp / "small", 32)
            for p in small:
                build_snapshot(p, home)
            refs32 = [f"pkg/m{j}.py::C{j}.run" for j in range(3)]
            ids32 = [api.remember(home, f"small {k}", repo=p, refs=refs32, project="r32", topic=f"s{k}")["id"]
                     for k, p in enumerate(small)]
            client.call(home, "register", {"paths": small})
            a32 = {"memory_ids": ids32, "repo_paths": small}
            client.call(home, "validate", a32)
            out["service_validate_96_over_32_repos"] = summary(timed(lambda: client.call(home, "validate", a32),
                                                                     args.runs))
        out["service_memory_kib"] = rss_kib(proc.pid)
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    out["load_end"] = os.getloadavg()[0]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--home", help="reuse this data home (it may already hold the repository's snapshot)")
    ap.add_argument("--citations", type=int, default=96)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--repos32", action="store_true")
    ap.add_argument("--memcite", help="path of memcite's `am` (installed in its own environment)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(args)
    if args.json:
        print(json.dumps(res, indent=2))
        return
    for k, v in res.items():
        print(f"{k:40} {v}")


if __name__ == "__main__":
    main()
