"""Scale benchmark: indexing figures on any repository, each against a floor from the same run.

    python -m citegraph.bench.scale_bench --repo PATH [--replay 10] [--json]
    python -m citegraph.bench.scale_bench --generate DEST --files 20000 [--seed 0] ...
    python -m citegraph.bench.scale_bench --generate DEST --source GITDIR --copies 23 ...

The repository is never modified: it is cloned (``git clone --shared``, objects borrowed,
then checked out) into ``--work-dir`` (default: a temporary directory, removed at the end
unless ``--keep``), and every build uses a fresh data home there. ``--generate`` first
runs the synthetic monorepo generator (``citegraph.bench.monorepo``) and keeps the result.

Figures (``--figures`` picks a subset; default all):

* ``cold`` — ``citegraph index CLONE --rev HEAD`` in a fresh home (subprocess): wall,
  peak RSS (largest process, from ``wait4``; and the whole process tree, sampled from
  /proc), CPU use (user+sys ÷ wall). Floor: a subprocess doing tree-sitter parse + tags
  query over exactly the blobs the index parses, on ``--jobs`` processes
  (``citegraph.bench.index_bench.parse_floor``); the ratio is cold wall ÷ the floor's
  parse seconds, as in index_bench.
* ``commit`` — one-file commits (an appended definition, a different file each time; each
  commit is checked to change exactly one path, else the run fails),
  p50/p95 over ``--replay`` commits: *warm* = ``build_snapshot`` in this process after the
  previous build (what a resident service does); *cold process* = ``citegraph index
  --rev C`` and ``citegraph index CLONE`` (the worktree form a user types, which also
  checks the worktree). Floors: tree diff + parse/query of the changed blobs + the
  minimum durable write (the captures, fsync + rename); in process for warm, as a fresh
  Python process for cold (+ ``git status`` for the worktree form).
* ``dirty`` — a one-file edit left uncommitted, then ``citegraph index CLONE`` (cold
  process). Floor: a process doing ``git status`` + parse/query of the edited file + the
  minimum write.
* ``switch`` — ``git checkout`` of a branch that differs in ``--switch-files`` files, then
  ``citegraph index CLONE`` (cold process); and the switch back to an indexed branch
  (a reused snapshot). Floors: status + tree diff + parse/query of the changed blobs +
  minimum write; status alone for the switch back.
* ``storage`` — bytes of the full snapshot, of each delta (commit, overlay, switch), of the
  facts cache and of the whole data home. Floor for a delta: the bytes of the minimum
  write, and (format floor) an empty snapshot file with the schema only.
* ``ctags`` — universal-ctags over the checked-out tree (``ctags -R --languages=…``), whole
  process, once on one process and once as two processes over the halves of the file
  list. Skipped with a message when ``ctags --version`` is not Universal Ctags.

The internal floor processes are ``python -m citegraph.bench.scale_bench floor …``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GIT_ENV = {"GIT_AUTHOR_NAME": "citegraph bench", "GIT_AUTHOR_EMAIL": "bench@citegraph.invalid",
           "GIT_COMMITTER_NAME": "citegraph bench", "GIT_COMMITTER_EMAIL": "bench@citegraph.invalid"}
FIGURES = ("cold", "commit", "dirty", "switch", "storage", "ctags")
EDIT_MAX_BYTES = 256 * 1024
CTAGS_LANGUAGES = {"python": "Python", "typescript": "TypeScript", "javascript": "JavaScript", "go": "Go",
                   "rust": "Rust", "java": "Java", "c": "C", "cpp": "C++", "csharp": "C#", "ruby": "Ruby",
                   "kotlin": "Kotlin", "php": "PHP", "scala": "Scala", "swift": "Swift"}


class BenchError(Exception):
    """A bad input or a failed step: one line for the user."""


# --- measured subprocesses ---------------------------------------------------------------

@dataclass
class ProcRun:
    """One subprocess (or several run side by side): wall, CPU, memory, output."""

    wall: float
    cpu: float  # user + sys of the process tree (reaped descendants included)
    max_rss_mib: float  # the largest single process of the tree (wait4)
    tree_rss_mib: float  # the largest sampled sum of RSS over the live tree
    returncode: int
    stdout: str
    stderr: str

    @property
    def cores(self) -> float:
        return self.cpu / self.wall if self.wall else 0.0


def children_map() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        out.setdefault(ppid, []).append(int(name))
    return out


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, IndexError, ValueError):
        return 0


class _TreeSampler:
    """Samples the summed RSS of some processes and all their descendants."""

    def __init__(self, roots: list[int], interval: float = 0.1) -> None:
        self.roots = roots
        self.interval = interval
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            kids = children_map()
            todo = [k for r in self.roots for k in kids.get(r, ())]  # below the launchers
            total = 0
            while todo:
                pid = todo.pop()
                total += _rss_kib(pid)
                todo.extend(kids.get(pid, ()))
            self.peak_kib = max(self.peak_kib, total)
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


# A tiny launcher forks the measured command: its wait4 figures are then the command's own.
# (A command started straight from this process inherits this process's RSS high-water
# mark through vfork + exec, which would inflate ru_maxrss once this process is large.)
_LAUNCHER = """
import json, os, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, ru = os.wait4(pid, 0)
t1 = time.clock_gettime(time.CLOCK_MONOTONIC)
code = os.waitstatus_to_exitcode(status)
with open(out, "w") as fh:
    json.dump({"start": t0, "end": t1, "cpu": ru.ru_utime + ru.ru_stime, "maxrss_kib": ru.ru_maxrss,
               "code": code}, fh)
sys.exit(code if 0 <= code < 256 else 1)
"""


def run_measured(cmds: Sequence[Sequence[str]], env: dict[str, str] | None = None, cwd: str | None = None,
                 sample: bool = True, check: bool = True) -> ProcRun:
    """Run the commands side by side; wall from the first start to the last exit, CPU and
    the largest process's peak RSS from wait4 (reaped descendants included)."""
    outs = [tempfile.TemporaryFile() for _ in cmds]
    errs = [tempfile.TemporaryFile() for _ in cmds]
    stats = [tempfile.NamedTemporaryFile(suffix=".json", delete=False) for _ in cmds]
    for st in stats:
        st.close()
    procs = [subprocess.Popen([sys.executable, "-I", "-S", "-c", _LAUNCHER, st.name, *c], stdout=o, stderr=e,
                              env=env, cwd=cwd) for c, o, e, st in zip(cmds, outs, errs, stats, strict=True)]
    sampler = _TreeSampler([p.pid for p in procs]) if sample else None
    for p in procs:
        p.wait()
    tree = sampler.peak_kib / 1024 if sampler else 0.0
    if sampler:
        sampler.stop()
    figures = []
    for st in stats:
        try:
            figures.append(json.loads(Path(st.name).read_text()))
        except (OSError, ValueError):
            figures.append({"start": 0.0, "end": 0.0, "cpu": 0.0, "maxrss_kib": 0, "code": 127})
        Path(st.name).unlink(missing_ok=True)
    code = next((f["code"] for f in figures if f["code"]), 0) or next((p.returncode for p in procs if p.returncode), 0)
    wall = max(f["end"] for f in figures) - min(f["start"] for f in figures)
    max_rss = max(f["maxrss_kib"] for f in figures) / 1024
    texts = []
    for fh in (*outs, *errs):
        fh.seek(0)
        texts.append(fh.read().decode(errors="replace"))
        fh.close()
    run = ProcRun(wall, sum(f["cpu"] for f in figures), max_rss, max(tree, max_rss), code,
                  "".join(texts[:len(cmds)]), "".join(texts[len(cmds):]))
    if check and code != 0:
        last = run.stderr.strip().splitlines()
        raise BenchError(f"{' '.join(cmds[0][:4])}… exited {code}: {last[-1] if last else 'no message'}")
    return run


def git(repo: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)
    if res.returncode != 0:
        raise BenchError(f"git {' '.join(args[:2])} failed: {res.stderr.strip().splitlines()[-1:]}")
    return res.stdout.strip()


# --- floors --------------------------------------------------------------------------------

def parse_query(language: str, data: bytes) -> list[tuple[int, int]]:
    """The floor's unit of work: tree-sitter parse + the tags query; the captured spans."""
    from tree_sitter import QueryCursor

    from citegraph.indexer.extract import compiled_query, parse

    tree = parse(language, data, 5.0)
    spans = []
    for _, caps in QueryCursor(compiled_query(language)).matches(tree.root_node):
        for nodes in caps.values():
            spans.extend((n.start_byte, n.end_byte) for n in nodes)
    return spans


def minimum_write(out_dir: Path, payload: bytes) -> int:
    """What any durable index must do for a change: write the new facts aside, fsync,
    rename into place, fsync the directory."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f"floor.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, out_dir / "floor.bin")
    fd = os.open(out_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return len(payload)


def git_status(repo: Path) -> list[tuple[str, str]]:
    """``git status`` (porcelain, untracked files listed one by one, as citegraph asks)."""
    raw = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"], cwd=repo,
                         capture_output=True, check=True).stdout
    out = []
    items = raw.split(b"\0")
    i = 0
    while i < len(items):
        rec = items[i]
        i += 1
        if len(rec) < 4:
            continue
        code, path = rec[:2].decode(), rec[3:].decode("utf-8", "surrogateescape")
        if "R" in code or "C" in code:
            i += 1  # the source path of a rename/copy
        out.append((code, path))
    return out


def _floor_blobs(repo_path: str, blobs: list[tuple[str, bytes]], out_dir: Path) -> dict[str, Any]:
    from citegraph.indexer.blob_facts import skip_reason_for_content
    from citegraph.indexer.languages import language_for_path

    t0 = time.perf_counter()
    records = []
    for path, data in blobs:
        lang = language_for_path(path)
        if lang is None or skip_reason_for_content(data):
            records.append([path, []])
            continue
        records.append([path, parse_query(lang, data)])
    t1 = time.perf_counter()
    nbytes = minimum_write(out_dir, json.dumps(records).encode())
    t2 = time.perf_counter()
    return {"parse_seconds": t1 - t0, "write_seconds": t2 - t1, "write_bytes": nbytes, "blobs": len(blobs)}


def commit_floor(repo_path: str, old: str, new: str, out_dir: Path, status: bool = False) -> dict[str, Any]:
    """Tree diff old→new, parse/query of the added or modified blobs, minimum write
    (and, for the worktree form, one ``git status``)."""
    import pygit2

    t0 = time.perf_counter()
    st = 0.0
    if status:
        git_status(Path(repo_path))
        st = time.perf_counter() - t0
    t1 = time.perf_counter()
    repo = pygit2.Repository(repo_path)
    diff = repo.diff(repo.revparse_single(old).peel(pygit2.Tree), repo.revparse_single(new).peel(pygit2.Tree))
    changed = [(d.new_file.path, str(d.new_file.id)) for d in diff.deltas
               if d.status in (pygit2.GIT_DELTA_ADDED, pygit2.GIT_DELTA_MODIFIED)]
    blobs = [(p, repo.odb.read(b)[1]) for p, b in changed]
    t2 = time.perf_counter()
    res = _floor_blobs(repo_path, blobs, out_dir)
    res.update(status_seconds=st, diff_seconds=t2 - t1, seconds=time.perf_counter() - t0)
    return res


def dirty_floor(repo_path: str, out_dir: Path) -> dict[str, Any]:
    """``git status``, read + parse/query of the modified or untracked files, minimum write."""
    t0 = time.perf_counter()
    root = Path(repo_path)
    blobs = []
    for code, path in git_status(root):
        full = root / path
        if "D" not in code and full.is_file():
            blobs.append((path, full.read_bytes()))
    t1 = time.perf_counter()
    res = _floor_blobs(repo_path, blobs, out_dir)
    res.update(status_seconds=t1 - t0, seconds=time.perf_counter() - t0)
    return res


def floor_main(argv: list[str]) -> None:
    """``floor cold|commit|dirty|status``: one floor measurement as a fresh process (JSON)."""
    ap = argparse.ArgumentParser(prog="python -m citegraph.bench.scale_bench floor")
    ap.add_argument("kind", choices=("cold", "commit", "dirty", "status"))
    ap.add_argument("repo")
    ap.add_argument("--rev")
    ap.add_argument("--old")
    ap.add_argument("--new")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--status", action="store_true")
    a = ap.parse_args(argv)
    if a.kind == "cold":
        from citegraph.bench.index_bench import parse_floor

        res = parse_floor(a.repo, a.rev, a.jobs)
    elif a.kind == "commit":
        res = commit_floor(a.repo, a.old, a.new, a.out, a.status)
    elif a.kind == "dirty":
        res = dirty_floor(a.repo, a.out)
    else:
        t0 = time.perf_counter()
        git_status(Path(a.repo))
        res = {"seconds": time.perf_counter() - t0}
    print(json.dumps(res))


# --- the benchmark -------------------------------------------------------------------------

EDITS = {
    "python": "\n\ndef cg_bench_edit_{i}(value):\n    return value + {i}\n",
    "typescript": "\nexport function cgBenchEdit{i}(value: number): number {{\n  return value + {i};\n}}\n",
    "tsx": "\nexport function cgBenchEdit{i}(value: number): number {{\n  return value + {i};\n}}\n",
    "javascript": "\nexport function cgBenchEdit{i}(value) {{\n  return value + {i};\n}}\n",
    "go": "\nfunc cgBenchEdit{i}(value int) int {{\n\treturn value + {i}\n}}\n",
    "rust": "\npub fn cg_bench_edit_{i}(value: i64) -> i64 {{\n    value + {i}\n}}\n",
    "java": "\nclass CgBenchEdit{i} {{\n    int value() {{ return {i}; }}\n}}\n",
}


def edited(data: bytes, language: str | None, i: int) -> bytes:
    """The file with one definition appended (a newline for languages without a template)."""
    tail = EDITS.get(language or "", "\n").format(i=i).encode()
    return data + (b"" if data.endswith(b"\n") or not data else b"\n") + tail


@dataclass
class Series:
    """Timings of one repeated figure and of its floor, in seconds."""

    values: list[float] = field(default_factory=list)
    floors: list[float] = field(default_factory=list)
    extra: dict[str, list[float]] = field(default_factory=dict)

    def add_extra(self, key: str, value: float) -> None:
        self.extra.setdefault(key, []).append(value)

    def summary(self) -> dict[str, Any]:
        from citegraph.bench.index_bench import pct

        if not self.values:
            return {"n": 0}
        out: dict[str, Any] = {"n": len(self.values),
                               "p50_ms": round(statistics.median(self.values) * 1000, 1),
                               "p95_ms": round(pct(self.values, 0.95) * 1000, 1)}
        if self.floors:
            f50, f95 = statistics.median(self.floors), pct(self.floors, 0.95)
            out.update(floor_p50_ms=round(f50 * 1000, 1), floor_p95_ms=round(f95 * 1000, 1),
                       ratio_p50=round(statistics.median(self.values) / f50, 2) if f50 else None,
                       ratio_p95=round(pct(self.values, 0.95) / f95, 2) if f95 else None)
        for k, v in self.extra.items():
            out[f"{k}_p50"] = round(statistics.median(v), 4)
            out[f"{k}_p95"] = round(pct(v, 0.95), 4)
        return out


class Bench:
    """Holds the clone, the data home and the collected figures of one run."""

    def __init__(self, clone: Path, home: Path, jobs: int, replay: int, seed: int, log: bool) -> None:
        self.clone = clone
        self.home = home
        self.jobs = jobs
        self.replay = replay
        self.rng = random.Random(seed)
        self.log_enabled = log
        self.env = {**os.environ, **GIT_ENV, "CITEGRAPH_HOME": str(home)}
        self.py = sys.executable
        self.figures: dict[str, Any] = {}
        self.sizes: dict[str, list[int]] = {}
        self.min_writes: dict[str, list[int]] = {}  # bytes the floor wrote, per figure
        self.edit_no = 0
        self._candidates: list[str] | None = None
        self.floor_dir = home.parent / "floor-out"

    def log(self, msg: str) -> None:
        if self.log_enabled:
            print(f"[scale_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    # helpers
    def index(self, *args: str) -> tuple[ProcRun, dict[str, Any]]:
        run = run_measured([[self.py, "-m", "citegraph.cli.main", "index", str(self.clone), "--json",
                             "--quiet", *args]], env=self.env)
        return run, json.loads(run.stdout)

    def floor(self, *args: str) -> tuple[ProcRun, dict[str, Any]]:
        run = run_measured([[self.py, "-m", "citegraph.bench.scale_bench", "floor", *args]], env=self.env)
        return run, json.loads(run.stdout.strip().splitlines()[-1])

    def head(self) -> str:
        return git(self.clone, "rev-parse", "HEAD")

    def snapshot_file(self, res: dict[str, Any]) -> tuple[Path, str]:
        from citegraph.graph.store import Home

        rs = Home.open(self.home).repo(res["repository_id"])
        entry = rs.entry(res["snapshot_id"]) or {}
        layout = str(entry.get("layout", "?")) + ("-parquet" if entry.get("container") == "parquet" else "")
        return rs.published_path(entry) if entry else rs.snapshot_path(res["snapshot_id"]), layout

    def record_size(self, key: str, res: dict[str, Any]) -> None:
        path, layout = self.snapshot_file(res)
        if path.exists():
            self.sizes.setdefault(f"{key}_{layout}", []).append(path.stat().st_size)

    def candidates(self) -> list[str]:
        """Files to edit: a language we parse, not too large, in a stable random order."""
        if self._candidates is None:
            from citegraph.indexer.languages import language_for_path

            rows = git(self.clone, "ls-tree", "-r", "-l", "--full-tree", "HEAD").splitlines()
            paths = []
            for row in rows:
                meta, path = row.split("\t", 1)
                mode, kind, _, size = meta.split()
                if kind == "blob" and mode.startswith("100") and size.isdigit() and \
                        0 < int(size) <= EDIT_MAX_BYTES and language_for_path(path) in EDITS:
                    paths.append(path)
            if not paths:
                raise BenchError("no file of a parsed language (≤ 256 KiB) to edit in this repository")
            self.rng.shuffle(paths)
            self._candidates = paths
        return self._candidates

    def next_edit(self) -> tuple[str, bytes, bytes]:
        from citegraph.indexer.languages import language_for_path

        paths = self.candidates()
        path = paths[self.edit_no % len(paths)]
        self.edit_no += 1
        full = self.clone / path
        old = full.read_bytes()
        return path, old, edited(old, language_for_path(path), self.edit_no)

    def commit_one(self) -> tuple[str, str]:
        old_head = self.head()
        path, _, new = self.next_edit()
        (self.clone / path).write_bytes(new)
        git(self.clone, "add", "--", path)
        git(self.clone, "commit", "-q", "--no-verify", "-m", f"bench edit {self.edit_no}: {path}")
        new_head = self.head()
        # A "one-file commit" changes exactly one file: checked, not assumed (issue 21).
        touched = git(self.clone, "diff-tree", "--no-commit-id", "--name-only", "-r", old_head, new_head).splitlines()
        if touched != [path]:
            raise BenchError(f"the one-file commit {new_head[:12]} changes {len(touched)} paths: {touched[:5]}")
        return old_head, new_head

    # figures
    def cold(self, runs: int = 1) -> None:
        """Floor and cold build, alternated ``runs`` times (each pair close in time, so load
        from other users of the machine hits both alike); medians are reported."""
        head = self.head()
        pairs = []
        for k in range(runs):
            self.log(f"cold floor {k + 1}/{runs}: parse+query over the blobs of {head[:12]} on {self.jobs} processes")
            frun, floor = self.floor("cold", str(self.clone), "--rev", head, "--jobs", str(self.jobs))
            self.log(f"cold floor {floor['seconds']:.1f} s; cold index {k + 1}/{runs} …")
            home = self.home if k == runs - 1 else self.home.parent / f"cold-home-{k}"
            env = {**self.env, "CITEGRAPH_HOME": str(home)}
            run = run_measured([[self.py, "-m", "citegraph.cli.main", "index", str(self.clone), "--json",
                                 "--quiet", "--rev", head]], env=env)
            res = json.loads(run.stdout)
            if home != self.home:
                shutil.rmtree(home, ignore_errors=True)
            self.log(f"cold {run.wall:.1f} s, peak RSS {run.max_rss_mib:.0f} MiB")
            pairs.append((run, frun, floor, res))
        run, frun, floor, res = pairs[-1]
        self.record_size("cold", res)

        def med(xs: list[float]) -> float:
            return statistics.median(xs)

        walls = [p[0].wall for p in pairs]
        fsecs = [p[2]["seconds"] for p in pairs]
        rss = max(p[0].max_rss_mib for p in pairs)
        frss = max(p[1].max_rss_mib for p in pairs)
        tree = max(p[0].tree_rss_mib for p in pairs)
        ftree = max(p[1].tree_rss_mib for p in pairs)
        cpu = med([p[0].cpu for p in pairs])
        fcpu = med([p[1].cpu for p in pairs])
        self.figures["cold"] = {
            "files": res["files"], "symbols": res["symbols"], "runs": runs,
            "seconds": round(med(walls), 2), "build_seconds": res.get("seconds"),
            "floor_seconds": round(med(fsecs), 2), "floor_process_seconds": round(med([p[1].wall for p in pairs]), 2),
            "ratio": round(med([w / f for w, f in zip(walls, fsecs, strict=True)]), 2),
            "pairs": [{"seconds": round(w, 2), "floor_seconds": round(f, 2), "ratio": round(w / f, 2)}
                      for w, f in zip(walls, fsecs, strict=True)],
            "floor_blobs": floor["blobs"], "floor_mb": round(floor["bytes"] / 1e6, 1),
            "peak_rss_mib": round(rss, 1), "tree_rss_mib": round(tree, 1),
            "floor_peak_rss_mib": round(frss, 1), "floor_tree_rss_mib": round(ftree, 1),
            "rss_ratio": round(rss / frss, 2) if frss else None,
            "tree_rss_ratio": round(tree / ftree, 2) if ftree else None,
            "cpu_seconds": round(cpu, 1), "cpu_cores": round(cpu / med(walls), 2),
            "floor_cpu_seconds": round(fcpu, 1),
            "floor_cpu_cores": round(fcpu / med([p[1].wall for p in pairs]), 2),
            "cpu_ratio": round(cpu / fcpu, 2) if fcpu else None,
        }

    def commit(self) -> None:
        from citegraph.graph.snapshot_builder import build_snapshot
        from citegraph.graph.store import Home

        home = Home.open(self.home)
        build_snapshot(self.clone, home, rev=self.head())  # the base (reused after cold)
        warm = Series()
        self.log(f"one-file commits, warm (in process), {self.replay}+1 replays")
        for i in range(self.replay + 1):
            old, new = self.commit_one()
            t0 = time.perf_counter()
            r = build_snapshot(self.clone, home, rev=new)
            took = time.perf_counter() - t0
            t0 = time.perf_counter()
            fres = commit_floor(str(self.clone), old, new, self.floor_dir)
            floor = time.perf_counter() - t0
            if i == 0:
                continue  # warm-up: compiles the tags query of the edited language once
            warm.values.append(took)
            warm.floors.append(floor)
            self.min_writes.setdefault("commit", []).append(fres["write_bytes"])
            self.record_size("commit", r.to_json())
        self.figures["commit_warm"] = {**warm.summary(), "files_changed_per_commit": 1}  # checked in commit_one
        for form in ("rev", "worktree"):
            series = Series()
            self.log(f"one-file commits, cold process ({form} form), {self.replay} replays")
            for _ in range(self.replay):
                old, new = self.commit_one()
                run, res = self.index("--rev", new) if form == "rev" else self.index()
                frun, fres = self.floor("commit", str(self.clone), "--old", old, "--new", new, "--out",
                                        str(self.floor_dir), *(["--status"] if form == "worktree" else []))
                self.min_writes.setdefault("commit", []).append(fres["write_bytes"])
                series.values.append(run.wall)
                series.floors.append(frun.wall)
                series.add_extra("peak_rss_mib", run.max_rss_mib)
                self.record_size("commit", res)
            self.figures[f"commit_cold_process_{form}"] = {**series.summary(), "files_changed_per_commit": 1}

    def dirty(self) -> None:
        dirty = git(self.clone, "status", "--porcelain", "--untracked-files=no")
        if dirty:
            raise BenchError(f"{self.clone} is dirty before the dirty-edit figure: {' | '.join(dirty.splitlines()[:5])}")
        run, res = self.index()  # the base commit snapshot (reused when already built)
        series = Series()
        self.log(f"one-file dirty edits, cold process, {self.replay} replays")
        for _ in range(self.replay):
            path, old, new = self.next_edit()
            full = self.clone / path
            full.write_bytes(new)
            try:
                run, res = self.index()
                if not res.get("dirty"):
                    raise BenchError(f"edit of {path} did not produce an overlay snapshot")
                frun, fres = self.floor("dirty", str(self.clone), "--out", str(self.floor_dir))
                self.min_writes.setdefault("dirty", []).append(fres["write_bytes"])
            finally:
                full.write_bytes(old)
            series.values.append(run.wall)
            series.floors.append(frun.wall)
            series.add_extra("peak_rss_mib", run.max_rss_mib)
            self.record_size("dirty", res)
        self.figures["dirty_cold_process"] = series.summary()

    def switch(self, files: int) -> None:
        import pygit2

        from citegraph.indexer.languages import language_for_path

        repo = pygit2.Repository(str(self.clone))
        try:
            branch = git(self.clone, "symbolic-ref", "-q", "--short", "HEAD")
        except BenchError:
            branch = self.head()  # a detached HEAD: switch back to the commit
        base = repo.revparse_single("HEAD").peel(pygit2.Commit)
        sig = pygit2.Signature("citegraph bench", "bench@citegraph.invalid", 1764547200, 0)
        self.log(f"branch switch: {self.replay} branches of {files} changed files")
        names = []
        for b in range(self.replay):
            idx = pygit2.Index()
            idx.read_tree(base.tree)
            for _ in range(files):
                path, _, _ = self.next_edit()
                entry = idx[path]
                data = edited(repo[entry.id].data, language_for_path(path), self.edit_no)
                idx.add(pygit2.IndexEntry(path, repo.create_blob(data), entry.mode))
            tree = idx.write_tree(repo)
            name = f"cgbench-switch-{b}"
            repo.create_commit(f"refs/heads/{name}", sig, sig, f"bench branch {b}", tree, [base.id])
            names.append(name)
        self.index()
        there, back = Series(), Series()
        for name in names:
            t0 = time.perf_counter()
            git(self.clone, "checkout", "-q", name)
            there.add_extra("checkout_seconds", time.perf_counter() - t0)
            run, res = self.index()
            frun, fres = self.floor("commit", str(self.clone), "--old", str(base.id), "--new", name, "--out",
                                    str(self.floor_dir), "--status")
            self.min_writes.setdefault("switch", []).append(fres["write_bytes"])
            there.values.append(run.wall)
            there.floors.append(frun.wall)
            self.record_size("switch", res)
            t0 = time.perf_counter()
            git(self.clone, "checkout", "-q", branch)
            back.add_extra("checkout_seconds", time.perf_counter() - t0)
            run, res = self.index()
            if not res.get("reused"):
                raise BenchError("switching back did not reuse the indexed snapshot")
            frun, _ = self.floor("status", str(self.clone))
            back.values.append(run.wall)
            back.floors.append(frun.wall)
        self.figures["switch_cold_process"] = {"changed_files": files, **there.summary()}
        self.figures["switch_back_reused"] = back.summary()

    def storage(self) -> None:
        import duckdb

        from citegraph.graph.schema import SNAPSHOT_DDL

        empty = self.home.parent / "empty-floor.duckdb"
        empty.unlink(missing_ok=True)
        con = duckdb.connect(str(empty))
        con.execute(SNAPSHOT_DDL)
        con.execute("CHECKPOINT")
        con.close()
        out: dict[str, Any] = {"empty_snapshot_file_bytes": empty.stat().st_size}
        for key, sizes in sorted(self.sizes.items()):
            s = sorted(sizes)
            out[key] = {"n": len(s), "p50_bytes": s[len(s) // 2], "max_bytes": s[-1]}
            w = sorted(self.min_writes.get(key.split("_")[0], []))
            if w:
                out[key]["floor_min_write_p50_bytes"] = w[len(w) // 2]
        facts = list(self.home.glob("repos/*/facts.duckdb"))
        out["facts_bytes"] = sum(f.stat().st_size for f in facts)
        out["home_bytes"] = sum(p.stat().st_size for p in self.home.rglob("*") if p.is_file())
        out["snapshots"] = len([*self.home.glob("repos/*/snapshots/*.duckdb"), *self.home.glob("repos/*/snapshots/*.parquet")])
        self.figures["storage"] = out

    def ctags(self) -> None:
        try:
            version = subprocess.run(["ctags", "--version"], capture_output=True, text=True).stdout
        except OSError:
            version = ""
        if "Universal Ctags" not in version:
            self.figures["ctags"] = {"skipped": "universal-ctags not found (`ctags --version` lacks "
                                                "'Universal Ctags'); apt-get install universal-ctags"}
            self.log(self.figures["ctags"]["skipped"])
            return
        from citegraph.indexer.languages import language_for_path

        known = set(subprocess.run(["ctags", "--list-languages"], capture_output=True, text=True).stdout.split())
        langs = sorted(v for v in CTAGS_LANGUAGES.values() if v in known)
        ours = {k for k, v in CTAGS_LANGUAGES.items() if v in known}
        self.log(f"universal-ctags over the worktree ({','.join(langs)})")
        tags = self.home.parent / "ctags"
        tags.mkdir(exist_ok=True)
        one = run_measured([["ctags", "-R", f"--languages={','.join(langs)}", "--exclude=.git",
                             "-f", str(tags / "tags"), "."]], cwd=str(self.clone))
        count = sum(1 for line in open(tags / "tags", "rb") if not line.startswith(b"!_"))
        files = [p for p in git(self.clone, "ls-files").splitlines() if language_for_path(p) in ours]
        lists = []
        for k in range(2):
            lst = tags / f"list{k}"
            lst.write_text("\n".join(files[k::2]) + "\n")
            lists.append(["ctags", f"--languages={','.join(langs)}", "-L", str(lst), "-f", str(tags / f"tags{k}")])
        two = run_measured(lists, cwd=str(self.clone))
        cold = self.figures.get("cold", {})
        res = {"version": version.splitlines()[0], "languages": langs, "tags": count, "files": len(files),
               "seconds": round(one.wall, 2), "cpu_cores": round(one.cores, 2),
               "peak_rss_mib": round(one.max_rss_mib, 1), "two_process_seconds": round(two.wall, 2)}
        if cold:
            res["cold_over_ctags"] = round(cold["seconds"] / one.wall, 2)
            res["cold_over_ctags_two_process"] = round(cold["seconds"] / two.wall, 2)
            res["floor_over_ctags_two_process"] = round(cold["floor_seconds"] / two.wall, 2)
        self.figures["ctags"] = res


def render(report: dict[str, Any]) -> str:
    f = report["figures"]
    lines = [f"scale_bench {report['date']} — {report['repository']} ({report.get('files', '?')} files)",
             f"clone + checkout {report['clone_seconds']:.1f} s; work dir {report['work_dir']}; load average "
             f"{report.get('load_average_start')} → {report.get('load_average_end')} (1/5/15 min)", ""]
    rows: list[tuple[str, str, str, str]] = []
    if "cold" in f:
        c = f["cold"]
        runs = f", median of {c['runs']} pairs" if c.get("runs", 1) > 1 else ""
        rows += [(f"cold index (wall{runs})",
                  f"{c['seconds']:.1f} s", f"{c['floor_seconds']:.1f} s parse+query "
                  f"({c['floor_process_seconds']:.1f} s process)", f"{c['ratio']:.2f}×"),
                 ("cold peak RSS, largest process", f"{c['peak_rss_mib']:.0f} MiB", f"{c['floor_peak_rss_mib']:.0f} MiB",
                  f"{c['rss_ratio']}×"),
                 ("cold peak RSS, process tree", f"{c['tree_rss_mib']:.0f} MiB", f"{c['floor_tree_rss_mib']:.0f} MiB",
                  f"{c['tree_rss_ratio']}×"),
                 ("cold CPU (user+sys)", f"{c['cpu_seconds']:.0f} s = {c['cpu_cores']:.2f} cores",
                  f"{c['floor_cpu_seconds']:.0f} s = {c['floor_cpu_cores']:.2f} cores", f"{c['cpu_ratio']}×")]
    for key, label in (("commit_warm", "one-file commit, warm"),
                       ("commit_cold_process_rev", "one-file commit, cold process --rev"),
                       ("commit_cold_process_worktree", "one-file commit, cold process worktree"),
                       ("dirty_cold_process", "one-file dirty edit, cold process"),
                       ("switch_cold_process", "branch switch, cold process"),
                       ("switch_back_reused", "switch back (reused), cold process")):
        s = f.get(key)
        if s and s.get("n"):
            rows.append((f"{label} p50 / p95", f"{s['p50_ms']:.0f} / {s['p95_ms']:.0f} ms",
                         f"{s['floor_p50_ms']:.0f} / {s['floor_p95_ms']:.0f} ms",
                         f"{s['ratio_p50']} / {s['ratio_p95']}×"))
    if "storage" in f:
        st = f["storage"]
        for key, v in st.items():
            if isinstance(v, dict):
                mw = v.get("floor_min_write_p50_bytes")
                rows.append((f"snapshot bytes, {key} (p50 / max, n={v['n']})",
                             f"{v['p50_bytes'] / 1024:.0f} / {v['max_bytes'] / 1024:.0f} KiB",
                             (f"{mw / 1024:.1f} KiB min write; " if mw else "") +
                             f"{st['empty_snapshot_file_bytes'] / 1024:.0f} KiB empty file",
                             f"{v['p50_bytes'] / mw:.0f}×" if mw else ""))
        rows.append(("facts cache / data home", f"{st['facts_bytes'] / 2**20:.1f} / {st['home_bytes'] / 2**20:.1f} MiB",
                     f"{st['snapshots']} snapshots", ""))
    if "ctags" in f:
        ct = f["ctags"]
        if "skipped" in ct:
            rows.append(("universal-ctags", "skipped", ct["skipped"], ""))
        else:
            rows.append(("universal-ctags, 1 process", f"{ct['seconds']:.1f} s ({ct['tags']} tags)",
                         f"cold ÷ ctags {ct.get('cold_over_ctags', '-')}×", ""))
            rows.append(("universal-ctags, 2 processes", f"{ct['two_process_seconds']:.1f} s",
                         f"cold ÷ ctags {ct.get('cold_over_ctags_two_process', '-')}×, floor ÷ ctags "
                         f"{ct.get('floor_over_ctags_two_process', '-')}×", ""))
    w = [max(len(r[i]) for r in rows) for i in range(4)] if rows else [0] * 4
    head = ("figure", "measured", "floor (same run)", "ratio")
    w = [max(w[i], len(head[i])) for i in range(4)]
    lines.append("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    lines.append("  ".join("-" * w[i] for i in range(4)))
    lines += ["  ".join(r[i].ljust(w[i]) for i in range(4)) for r in rows]
    if report.get("error"):
        lines.append(f"FAILED (later figures not measured): {report['error']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["floor"]:
        floor_main(argv[1:])
        return
    ap = argparse.ArgumentParser(prog="python -m citegraph.bench.scale_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--repo", help="a git worktree or git directory (never modified)")
    src.add_argument("--generate", metavar="DEST", help="generate a synthetic monorepo at DEST first (kept)")
    ap.add_argument("--source", help="--generate copies mode: the repository to copy")
    ap.add_argument("--rev", default="HEAD", help="--generate copies mode: revision of --source")
    ap.add_argument("--copies", type=int, default=23)
    ap.add_argument("--files", type=int, default=20_000, help="--generate synthetic mode: number of files")
    ap.add_argument("--seed", type=int, default=0, help="generator seed, and the choice of edited files")
    ap.add_argument("--replay", type=int, default=10, help="repetitions of each incremental figure")
    ap.add_argument("--switch-files", type=int, default=100, help="files that differ on a switched branch")
    ap.add_argument("--jobs", type=int, default=2, help="processes of the cold floor (the indexer uses both cores)")
    ap.add_argument("--cold-runs", type=int, default=1, help="floor + cold build pairs, alternated (medians)")
    ap.add_argument("--figures", default=",".join(FIGURES), help=f"comma-separated subset of {','.join(FIGURES)}")
    ap.add_argument("--work-dir", help="where the clone and the data home go (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (clone, home) afterwards")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    args = ap.parse_args(argv)
    try:
        report = run(args)
    except BenchError as exc:
        print(f"scale_bench: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print("scale_bench: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    print(json.dumps(report) if args.json else render(report))
    if report.get("error"):
        print(f"scale_bench: {report['error']}", file=sys.stderr)
        raise SystemExit(1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    figures = [x.strip() for x in args.figures.split(",") if x.strip()]
    bad = [x for x in figures if x not in FIGURES]
    if bad:
        raise BenchError(f"unknown figure(s) {','.join(bad)}; choose from {','.join(FIGURES)}")
    if args.replay < 1 and set(figures) & {"commit", "dirty", "switch"}:
        raise BenchError("--replay must be at least 1 for the commit, dirty and switch figures")
    report: dict[str, Any] = {"date": dt.date.today().isoformat(), "machine": f"{os.cpu_count()} cores",
                              "load_average_start": [round(x, 2) for x in os.getloadavg()]}
    if args.generate:
        from citegraph.bench.monorepo import GenerateError, generate_repo

        try:
            gen = generate_repo(args.generate, source=args.source, rev=args.rev, copies=args.copies,
                                files=args.files, seed=args.seed)
        except GenerateError as exc:
            raise BenchError(str(exc)) from None
        report["generated"] = gen.to_json()
        repo = gen.path
        if not args.quiet:
            print(f"[scale_bench] generated {gen.files} files in {gen.generate_seconds:.1f} s "
                  f"(+ checkout {gen.checkout_seconds:.1f} s) at {repo}", file=sys.stderr)
    else:
        repo = Path(args.repo).absolute()
        if not repo.exists():
            raise BenchError(f"{repo} does not exist; pass a git repository path")
    try:
        git(repo, "rev-parse", "--verify", "HEAD^{commit}")
    except BenchError:
        raise BenchError(f"{repo} is not a git repository with a commit at HEAD") from None
    report["repository"] = str(repo)
    work = Path(args.work_dir).absolute() if args.work_dir else Path(tempfile.mkdtemp(prefix="cg-scale-"))
    if args.work_dir and work.exists() and any(work.iterdir()):
        raise BenchError(f"--work-dir {work} is not empty; choose a new directory")
    work.mkdir(parents=True, exist_ok=True)
    report["work_dir"] = str(work)
    clone = work / "clone"
    try:
        t0 = time.perf_counter()
        git(work, "clone", "-q", "--shared", "--no-checkout", str(repo), str(clone))
        # Byte-faithful worktree: no eol/filter conversion (a source's .gitattributes, e.g.
        # ruff's `eol=crlf` fixtures, would otherwise make checked-out bytes differ from the
        # blobs and leave git's and libgit2's dirty checks to racy timestamps).
        (clone / ".git" / "info").mkdir(parents=True, exist_ok=True)
        (clone / ".git" / "info" / "attributes").write_text(
            "* -text -eol -filter -ident -working-tree-encoding\n")
        git(clone, "config", "gc.auto", "0")  # no background gc in the middle of a figure
        git(clone, "-c", "checkout.workers=0", "reset", "-q", "--hard", "HEAD")
        report["clone_seconds"] = round(time.perf_counter() - t0, 2)
        bench = Bench(clone, work / "home", args.jobs, args.replay, args.seed, not args.quiet)
        bench.log(f"clone + checkout {report['clone_seconds']:.1f} s")
        report["figures"] = bench.figures
        steps = [("cold", lambda: bench.cold(max(1, args.cold_runs))), ("ctags", bench.ctags),
                 ("commit", bench.commit), ("dirty", bench.dirty),
                 ("switch", lambda: bench.switch(args.switch_files)), ("storage", bench.storage)]
        for name, step in steps:
            if name not in figures:
                continue
            try:
                step()
            except BenchError as exc:  # keep what was measured; say what failed
                report["error"] = f"{name}: {exc}"
                bench.log(f"{name} failed: {exc}")
                if name != "storage":
                    bench.storage()
                break
        if "cold" in bench.figures:
            report["files"] = bench.figures["cold"]["files"]
        report["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return report


if __name__ == "__main__":
    main()
