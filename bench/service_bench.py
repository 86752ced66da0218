"""Resident-service benchmark: reads through the service against the one-shot path and a
peer, all measured in one run and printed as ratios.

    python -m citegraph.bench.service_bench --repo PATH [--runs 30] [--memories 10000]
        [--repos32] [--edits 20] [--memcite /tmp/memcite/bin/am] [--home DIR] [--json]

PATH is a git worktree (ruff-size, or the synthetic monorepo of citegraph.bench.monorepo).
It is never modified except for the edit figure, which appends to one file and restores it
with ``git checkout``. ``--home`` reuses a data home that already holds PATH's snapshot (a
cold index of the 254k-file monorepo takes minutes).

Before any whole-process timing the package is compiled (``compileall``: this machine sets
PYTHONDONTWRITEBYTECODE=1, and a process without ``.pyc`` files pays for compiling); the
output says so, with the load average at the start and the end.

Figures (p50/p95 over ``--runs``):
- one-shot: the validation of the mixed 96 citations (32 symbols, 32 spans, 32 files;
  pipeline, git-status scan before and after, no observation cache) — and its floor, the
  two state reads alone;
- through the service: the mixed 96 as a `validate` request over the socket (warm
  observation cache, as every repeated read is), with the service's CPU per request
  (``/proc/<pid>/stat`` utime+stime of the service and its descendants, before and after
  the ``--runs`` requests); the same for the 96 spans of the memcite comparison;
- whole process, paired with memcite: the SAME 96 spans stored in citegraph (12 memories
  of 8 spans) and added to memcite (in a clone of PATH: memcite writes its database into
  the worktree), run in alternating rounds — `citegraph validate` through the service,
  `am validate`, `citegraph validate --no-service` — each round gives the ratios of both
  citegraph forms to the memcite run of the same round; p50/p95 of those ratios, wall and
  CPU of each process, and the service's CPU per whole-process `validate`;
- whole process, the mixed 96 through the service (a separate, labelled figure: memcite
  cannot cite symbols or files);
- `remember` of 8 citations through the service; brief over ``--memories`` memories;
- 96 citations over 32 small repositories through the service;
- edit → exact-current: append a line to a cited file, then wait — without polling — for
  the service's own ``published`` event (``serve --json`` on a pipe, read by a blocked
  thread): the bench-side wall from the write to the event, the service-side latency (its
  file event → published) and build seconds, and the service's CPU per edit (write →
  published; and the whole cycle — edit, restore, any compaction — until the service is
  idle again);
- the service's resident memory (VmRSS, VmHWM).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from citegraph.bench.index_bench import pyc_present
from citegraph.bench.scale_bench import ProcRun, children_map, run_measured
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


def pick(home: Home, repo: str, n: int, seed: int = 11) -> list[str]:
    """96 mixed refs: 1/3 symbols, 1/3 spans, 1/3 files."""
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
    refs = []
    for i in range(n):
        h, path, s, e = syms[i]
        refs.append(h if i % 3 == 0 else f"{path}#L{s}-L{min(e, s + 5)}" if i % 3 == 1 else files[i])
    return refs


def pick_spans(home: Home, repo: str, n: int, seed: int = 13) -> list[tuple[str, int, int]]:
    """``n`` spans (≤ 6 lines from the start of distinct definitions, random over the
    repository) — the one list both citegraph and memcite validate."""
    cur = current_state(repo, home)
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        rows = snap.query("SELECT DISTINCT path, start_line, least(end_line, start_line + 5) FROM symbols "
                          "WHERE end_line > start_line ORDER BY 1, 2")
    random.Random(seed).shuffle(rows)
    return [tuple(r) for r in rows[:n]]


def start_service(home: Home, repos: list[str]) -> tuple[subprocess.Popen, queue.Queue]:
    """``serve --json`` with its log on a pipe; a thread blocked on the pipe puts each event
    on the queue (so waiting for an event costs nothing and polls nothing)."""
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    p = subprocess.Popen([*CLI, "serve", "--json", "--debounce-ms", "10", *repos], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    events: queue.Queue = queue.Queue()

    def read() -> None:
        assert p.stdout is not None
        for line in p.stdout:
            try:
                events.put((time.perf_counter(), json.loads(line)))
            except ValueError:
                continue

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 120
    while client.call(home, "ping", {}) is None:
        if p.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the service did not start")
        time.sleep(0.05)
    return p, events


def wait_exact(home: Home, repo: str, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        st = client.call(home, "status", {"path": repo})
        if st["exact_current"]:
            return st
        if time.monotonic() > deadline:
            raise SystemExit(f"{repo}: no exact-current snapshot through the service")
        time.sleep(0.05)


def tree_cpu_s(pid: int) -> float:
    """utime+stime (and reaped children's) of a process and its live descendants, seconds."""
    kids = children_map()
    todo, total = [pid], 0
    while todo:
        q = todo.pop()
        try:
            stat = Path(f"/proc/{q}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        todo.extend(kids.get(q, ()))
    return total / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            out[line.split(":")[0]] = int(line.split()[1])
    return out


def proc_run(cmd: list[str], env: dict | None = None, cwd: str | None = None) -> ProcRun:
    """One whole process: wall and CPU (wait4); exit 0 or 1 (1: something stale)."""
    r = run_measured([cmd], env=env, cwd=cwd, sample=False, check=False)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr[-400:]}")
    return r


def whole_process(cmd: list[str], runs: int, env: dict | None = None, cwd: str | None = None) -> list[float]:
    proc_run(cmd, env, cwd)  # one warm-up
    return [proc_run(cmd, env, cwd).wall for _ in range(runs)]


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


def memcite_clone(am: str, repo: str, spans: list[tuple[str, int, int]], work: Path) -> Path:
    """A shared clone of the worktree holding memcite's database of the spans."""
    clone = work / "memcite-clone"
    subprocess.run(["git", "clone", "-q", "--shared", repo, str(clone)], check=True)
    for path, s, e in spans:
        subprocess.run([am, "add", f"span {path}:{s}", "--file", path, "--lines", f"{s}-{e}"], cwd=clone,
                       check=True, capture_output=True)
    return clone


def paired_with_memcite(am: str, clone: Path, cg_service: list[str], cg_one_shot: list[str], env: dict,
                        service_pid: int, runs: int) -> dict[str, Any]:
    """Alternating rounds (citegraph via the service, memcite, citegraph one-shot): per-round
    ratios to the memcite run of the same round, wall and CPU of every process, and the
    service's CPU per whole-process validate."""
    for cmd, cwd in ((cg_service, None), ([am, "validate"], str(clone)), (cg_one_shot, None)):
        proc_run(cmd, env, cwd)  # warm-ups (page cache, the service's observation cache)
    rows: dict[str, list[float]] = {k: [] for k in ("svc_wall", "svc_cpu", "svc_service_cpu", "am_wall", "am_cpu",
                                                   "one_wall", "one_cpu")}
    for _ in range(runs):
        c0 = tree_cpu_s(service_pid)
        r = proc_run(cg_service, env)
        rows["svc_service_cpu"].append(tree_cpu_s(service_pid) - c0)
        rows["svc_wall"].append(r.wall)
        rows["svc_cpu"].append(r.cpu)
        r = proc_run([am, "validate"], env, str(clone))
        rows["am_wall"].append(r.wall)
        rows["am_cpu"].append(r.cpu)
        r = proc_run(cg_one_shot, env)
        rows["one_wall"].append(r.wall)
        rows["one_cpu"].append(r.cpu)
    svc_ratio = [a / b for a, b in zip(rows["svc_wall"], rows["am_wall"], strict=True)]
    one_ratio = [a / b for a, b in zip(rows["one_wall"], rows["am_wall"], strict=True)]
    med = statistics.median
    return {
        "rounds": runs, "order": "citegraph via service, memcite, citegraph --no-service (repeated)",
        "memcite": {**summary(rows["am_wall"]), "cpu_ms_p50": round(med(rows["am_cpu"]) * 1000, 1)},
        "citegraph_service": {**summary(rows["svc_wall"]), "cpu_ms_p50": round(med(rows["svc_cpu"]) * 1000, 1),
                              "service_cpu_ms_per_process": round(1000 * sum(rows["svc_service_cpu"]) / runs, 1)},
        "citegraph_one_shot": {**summary(rows["one_wall"]), "cpu_ms_p50": round(med(rows["one_cpu"]) * 1000, 1)},
        "ratio_service_to_memcite": {"p50": round(med(svc_ratio), 3), "p95": round(pct(svc_ratio, 0.95), 3),
                                     "target": 0.35, "met": pct(svc_ratio, 0.95) <= 0.35 and med(svc_ratio) <= 0.35},
        "ratio_one_shot_to_memcite": {"p50": round(med(one_ratio), 3), "p95": round(pct(one_ratio, 0.95), 3),
                                      "target": 1.0, "met": med(one_ratio) <= 1.0},
    }


def service_cpu_per_request(home: Home, pid: int, args: dict, runs: int) -> dict[str, Any]:
    """``runs`` validate requests over the socket: latency, and the service's CPU per request."""
    client.call(home, "validate", args)  # warms the observation cache
    c0 = tree_cpu_s(pid)
    lat = timed(lambda: client.call(home, "validate", args), runs)
    return {**summary(lat), "service_cpu_ms_per_request": round(1000 * (tree_cpu_s(pid) - c0) / runs, 2)}


def next_event(events: queue.Queue, want: Callable[[dict], bool], timeout: float = 120) -> tuple[float, dict]:
    """The next event of the service's log that ``want`` accepts (blocks; no polling)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            at, ev = events.get(timeout=max(deadline - time.monotonic(), 0.001))
        except queue.Empty:
            raise SystemExit("the service published nothing for the edit") from None
        if want(ev):
            return at, ev


def wait_idle(pid: int, step: float = 0.25, timeout: float = 60) -> None:
    """Until the service's CPU stops moving (two quiet samples, ``step`` apart: sparse)."""
    deadline = time.monotonic() + timeout
    last, quiet = tree_cpu_s(pid), 0
    while quiet < 2 and time.monotonic() < deadline:
        time.sleep(step)
        now = tree_cpu_s(pid)
        quiet = quiet + 1 if now - last < 0.02 else 0
        last = now


def edit_figure(home: Home, repo: str, edit_path: str, pid: int, events: queue.Queue, edits: int) -> dict[str, Any]:
    """Edit → exact-current through the service, from the service's own ``published`` events."""
    full = Path(repo) / edit_path
    wall, latency, build, cpu_publish, cpu_cycle, compactions = [], [], [], [], [], 0
    wait_idle(pid)
    for k in range(edits):
        while not events.empty():  # events of earlier work
            compactions += events.get()[1].get("event") == "compact"
        before = full.read_bytes()
        c0 = tree_cpu_s(pid)
        t0 = time.perf_counter()
        tmp = full.with_name(f".{full.name}.bench")
        # unique per run: a state seen before (a reused --home) would be "reused", never "published"
        tmp.write_bytes(before + f"\n# bench edit {k} {uuid.uuid4().hex}\n".encode())
        shutil.copymode(full, tmp)
        os.replace(tmp, full)  # one change of state (an editor's atomic save), not truncate + write
        at, ev = next_event(events, lambda e: e.get("event") == "published" and e.get("dirty") is True)
        cpu_publish.append(tree_cpu_s(pid) - c0)
        wall.append(at - t0)
        latency.append(ev.get("latency") or 0.0)
        build.append(ev.get("seconds") or 0.0)
        st = client.call(home, "status", {"path": repo})  # after the event: not a poll
        if not (st["exact_current"] and st["dirty"]):
            raise SystemExit(f"published, but status says exact_current={st['exact_current']} dirty={st['dirty']}")
        subprocess.run(["git", "checkout", "--", edit_path], cwd=repo, check=True)
        next_event(events, lambda e: e.get("event") in ("published", "reused") and e.get("dirty") is False)
        wait_idle(pid)
        cpu_cycle.append(tree_cpu_s(pid) - c0)
    while not events.empty():
        compactions += events.get()[1].get("event") == "compact"
    return {"edited_file": edit_path, "edits": edits, "how": "service-side: serve --json 'published' events read "
            "from a pipe by a blocked thread (no polling); one status call after each event",
            "write_to_published_event": summary(wall), "service_latency_first_event_to_published": summary(latency),
            "service_build_seconds": summary(build),
            "service_cpu_ms_per_edit_to_publish": {"p50": round(statistics.median(cpu_publish) * 1000, 1),
                                                   "p95": round(pct(cpu_publish, 0.95) * 1000, 1)},
            "service_cpu_ms_per_edit_cycle": {"p50": round(statistics.median(cpu_cycle) * 1000, 1),
                                              "p95": round(pct(cpu_cycle, 0.95) * 1000, 1)},
            "cycle": "the edit, its restore (git checkout) and any compaction, until the service is idle again "
                     "(CPU sampled every 250 ms)",
            "compactions": compactions,
            "target": {"service_cpu_ms": 30, "p95_ms": 100,
                       "met": pct(cpu_publish, 0.95) <= 0.030 and pct(wall, 0.95) <= 0.100}}


def compile_package() -> bool:
    """``compileall`` over the package (whole-process timings depend on ``.pyc`` files)."""
    root = str(Path(__file__).resolve().parents[1])  # the package root (an editable install maps it)
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-x", r"/\.venv/|/\.git/", root], check=False,
                   capture_output=True)
    return pyc_present()


def run(args: argparse.Namespace) -> dict[str, Any]:
    repo = os.path.realpath(args.repo)
    out: dict[str, Any] = {"repo": repo, "runs": args.runs, "load_start": [round(x, 2) for x in os.getloadavg()],
                           "pyc_compiled_before_whole_process_timings": compile_package()}
    tmp = Path(tempfile.mkdtemp(prefix="cg-svcbench-"))
    home = Home.open(args.home or tmp / "home")
    proc = None
    try:
        t0 = time.perf_counter()
        build_snapshot(repo, home)
        out["index_s"] = round(time.perf_counter() - t0, 2)
        refs = pick(home, repo, args.citations)
        spans = pick_spans(home, repo, args.citations)
        span_refs = [f"{p}#L{s}-L{e}" for p, s, e in spans]
        items = [MemoryInput(f"cgm_sb{i:03d}", capture(home, repo, refs[i:i + 8])) for i in range(0, len(refs), 8)]
        ids = [api.remember(home, f"service bench claim {i}", repo=repo, refs=refs[i:i + 8], project="svcbench",
                            topic=f"m{i:03d}")["id"] for i in range(0, len(refs), 8)]
        span_ids = [api.remember(home, f"service bench spans {i}", repo=repo, refs=span_refs[i:i + 8],
                                 project="svcspans", topic=f"s{i:03d}")["id"] for i in range(0, len(span_refs), 8)]
        out["workloads"] = {"mixed96": "32 symbols, 32 spans, 32 files (12 memories)",
                            "spans96": f"{len(spans)} spans of ≤ 6 lines over {len({p for p, _, _ in spans})} files "
                                       "(12 memories) — the same spans memcite validates"}

        # one-shot (no service): the validation itself, and its floor (the two state reads)
        def one_shot() -> None:
            rep = validate(home, items, resolve_scope(home, [repo], source=ScanSource()))
            assert all(v.freshness == "fresh" for v in rep.verdicts)

        out["one_shot_validation_mixed96"] = summary(timed(one_shot, args.runs))
        scan = ScanSource()
        out["one_shot_floor_two_reads"] = summary(timed(lambda: scan.moved(scan.read(repo, home)), args.runs))

        proc, events = start_service(home, [repo])
        wait_exact(home, repo)
        args_v = {"memory_ids": ids, "repo_paths": [repo]}
        out["service_validate_mixed96"] = service_cpu_per_request(home, proc.pid, args_v, args.runs)
        out["service_validate_spans96"] = service_cpu_per_request(
            home, proc.pid, {"memory_ids": span_ids, "repo_paths": [repo]}, args.runs)
        # dependency-changed advisories (SPEC §21): depth 1 is the default above; 0 turns the
        # check off, 3 is the deepest — the same 96 citations, ratios to depth 0
        for depth in (0, 3):
            a = {**args_v, "dependency_depth": depth}
            client.call(home, "validate", a)
            out[f"service_validate_mixed96_depth{depth}"] = summary(
                timed(lambda a=a: client.call(home, "validate", a), args.runs))
        base0 = out["service_validate_mixed96_depth0"]["p50_ms"]
        out["ratio_advisories_depth1_to_off"] = round(out["service_validate_mixed96"]["p50_ms"] / base0, 3)
        out["ratio_advisories_depth3_to_off"] = round(out["service_validate_mixed96_depth3"]["p50_ms"] / base0, 3)
        rep = client.call(home, "validate", args_v)
        out["recorded_dependencies"] = sum(len(r.dependencies) for it in items for r in it.receipts)
        out["advisories_depth1"] = sum(len(c.get("advisories", ())) for m in rep["memories"] for c in m["citations"])
        out["service_ping"] = summary(timed(lambda: client.call(home, "ping", {}), args.runs))

        env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
        cmd = [*CLI, "validate", "--format", "json", "--repo", repo]
        out["process_validate_service_mixed96"] = summary(whole_process([*cmd, "--project", "svcbench"], args.runs,
                                                                         env=env))
        if args.memcite:
            clone = memcite_clone(args.memcite, repo, spans, tmp)
            out["process_spans96_paired_with_memcite"] = paired_with_memcite(
                args.memcite, clone, [*cmd, "--project", "svcspans"], [*cmd, "--project", "svcspans", "--no-service"],
                env, proc.pid, args.runs)

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

        # edit -> exact-current (the overlay), then back: a cited file
        if args.edits:
            edit_path = next(r for r in refs if "#" not in r and "::" not in r and not r.startswith("cgs_"))
            out["edit_to_exact_current"] = edit_figure(home, repo, edit_path, proc.pid, events, args.edits)

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
    out["load_end"] = [round(x, 2) for x in os.getloadavg()]
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
