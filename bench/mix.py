"""The realistic outcome mix for the batch-validation figures (issue 21; SPEC §14: ≥ 100k
citations/s on a realistic mix, ≥ 300k/s all-exact).

The all-exact batch (every symbol of a snapshot, validated at that snapshot) only runs the
vectorised fast path, so it flatters the batch rate. The mix is what a store holds after
the code moved on: citations of symbols, spans and files captured at a base commit, then a
commit in a *clone* of the repository (the source is never touched) that edits some of the
cited files, so every outcome happens:

- ``shift``: a blank line prepended (symbols move: exact; spans: relocated or changed;
  the file: changed);
- ``body``: a blank line inserted inside every cited symbol of the file (changed);
- ``move``: the file renamed (relocated — the same bytes under another path);
- ``delete``: the file removed (deleted, or unknown/incomplete-coverage where an absence
  cannot be proven in that language).

Other ``unknown`` outcomes (ambiguous relocations, coverage) come from the repository
itself. The receipts are written to the memory store in bulk and *read back from it*
(``api.select_memories`` + ``api.to_inputs``, what ``validate`` does), so the receipts
validated are the stored ones. Callers time ``pipeline.validate`` over them.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citegraph.graph.snapshot_builder import build_snapshot, resolve_target
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.memory import api
from citegraph.memory.lifecycle.store import MemoryStore, bulk_insert
from citegraph.validator.capture import receipt_id
from citegraph.validator.model import Receipt
from citegraph.validator.pipeline import MemoryInput, Scope, ValidationReport, validate
from citegraph.validator.spans import hash_bytes, line_count, line_starts, span_bytes

PROJECT = "bench-mix"
TARGET_MIX_PER_S = 100_000
TARGET_EXACT_PER_S = 300_000
# Fractions of the distinct cited files edited per kind (the rest stays as captured).
EDIT_SHARE = {"shift": 0.06, "body": 0.06, "move": 0.03, "delete": 0.03}
GIT_ENV = {"GIT_AUTHOR_NAME": "citegraph bench", "GIT_AUTHOR_EMAIL": "bench@citegraph.invalid",
           "GIT_COMMITTER_NAME": "citegraph bench", "GIT_COMMITTER_EMAIL": "bench@citegraph.invalid"}


@dataclass
class Mix:
    """The edited clone, its two commits and the stored receipts read back."""

    clone: Path
    base: str
    head: str
    edits: dict[str, int]
    items: list[MemoryInput]
    store_read_seconds: float
    kinds: dict[str, int] = field(default_factory=dict)

    @property
    def citations(self) -> int:
        return sum(len(i.receipts) for i in self.items)


def _git(repo: Path, *args: str) -> str:
    import os

    res = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True,
                         check=True)
    return res.stdout.strip()


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


def plan_edits(lists: list[list[Receipt]], seed: int) -> dict[str, str]:
    """path -> edit kind, for a share of the distinct cited paths (pure; stable for a seed)."""
    paths = sorted({r.path for rs in lists for r in rs if r.path})
    random.Random(seed).shuffle(paths)
    out: dict[str, str] = {}
    at = 0
    for kind, share in EDIT_SHARE.items():
        n = max(1, int(len(paths) * share))
        for p in paths[at:at + n]:
            out[p] = kind
        at += n
    return out


def edited_body(data: bytes, starts: list[int]) -> bytes:
    """``data`` with a blank line inserted after each given 1-based line (pure)."""
    lines = data.splitlines(keepends=True)
    for line in sorted(set(starts), reverse=True):
        if 0 < line <= len(lines):
            if not lines[line - 1].endswith(b"\n"):
                lines[line - 1] += b"\n"
            lines.insert(line, b"\n")
    return b"".join(lines)


def apply_edits(clone: Path, plan: dict[str, str], lists: list[list[Receipt]]) -> dict[str, int]:
    """Make the planned edits in the clone's worktree and commit them; counts per kind."""
    symbol_lines: dict[str, list[int]] = {}
    for rs in lists:
        for r in rs:
            if r.kind == "symbol" and r.path and r.start_line:
                symbol_lines.setdefault(r.path, []).append(r.start_line)
    done: Counter[str] = Counter()
    for path, kind in sorted(plan.items()):
        full = clone / path
        if not full.is_file() or full.is_symlink():
            continue
        if kind == "shift":
            full.write_bytes(b"\n" + full.read_bytes())
        elif kind == "body":
            if path not in symbol_lines:
                continue
            full.write_bytes(edited_body(full.read_bytes(), symbol_lines[path]))
        elif kind == "move":
            stem, dot, ext = path.rpartition(".")
            _git(clone, "mv", "--", path, f"{stem}_moved.{ext}" if dot and "/" not in ext else f"{path}_moved")
        elif kind == "delete":
            _git(clone, "rm", "-q", "--", path)
        done[kind] += 1
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "--no-verify", "-m", "bench: the realistic mix's edits")
    return dict(done)


def drop_memories(ms: MemoryStore, project: str) -> None:
    """Remove a bench project's memories from the store (so a reused home stays as it was)."""
    ids = [r[0] for r in ms.con.execute("SELECT id FROM memories WHERE project = ?", [project]).fetchall()]
    if not ids:
        return
    for table, col in (("citations", "memory_id"), ("revisions", "memory_id"), ("terms", "memory_id"),
                       ("code_index", "memory_id"), ("memories", "id")):
        ms.con.execute(f"DELETE FROM {table} WHERE {col} IN (SELECT unnest(?))", [ids])


def build_mix(home: Home, repo: str, work: Path, memories: int, seed: int = 17) -> Mix:
    """Clone ``repo`` into ``work``, capture ``memories`` × 4 citations at its HEAD (2 symbols,
    1 span, 1 file each), commit the edits, index both commits, store the receipts in the
    memory store and read them back."""
    clone = work / "mix-clone"
    subprocess.run(["git", "clone", "-q", "--shared", repo, str(clone)], check=True)
    base = _git(clone, "rev-parse", "HEAD")
    build_snapshot(str(clone), home, rev=base)
    lists = receipts_at(home, str(clone), base, memories, seed)
    edits = apply_edits(clone, plan_edits(lists, seed), lists)
    head = _git(clone, "rev-parse", "HEAD")
    build_snapshot(str(clone), home)  # the clean worktree at the edited head
    with MemoryStore.open(home) as ms:
        drop_memories(ms, PROJECT)
        ms.con.execute("BEGIN TRANSACTION")
        bulk_insert(ms, [{"text": f"mix claim {i}", "project": PROJECT, "topic": f"mix{i:06d}", "receipts": rs}
                         for i, rs in enumerate(lists)])
        ms.con.execute("COMMIT")
    t0 = time.perf_counter()
    with MemoryStore.open(home, read_only=True) as ms:
        items = api.to_inputs(api.select_memories(ms, project=PROJECT))
    read_s = time.perf_counter() - t0
    with MemoryStore.open(home) as ms:
        drop_memories(ms, PROJECT)  # a reused data home stays as it was
    kinds = Counter(r.kind for it in items for r in it.receipts)
    return Mix(clone, base, head, edits, items, read_s, dict(kinds))


def histogram(report: ValidationReport, items: list[MemoryInput]) -> dict[str, dict[str, int]]:
    """Outcomes by citation kind, and unknown reasons (the workload, printed with its rate)."""
    kind = {r.id: r.kind for it in items for r in it.receipts}
    by_kind: dict[str, Counter[str]] = {}
    reasons: Counter[str] = Counter()
    for v in report.verdicts:
        for o in v.observations:
            by_kind.setdefault(kind.get(o.citation_id, "?"), Counter())[o.outcome] += 1
            if o.outcome == "unknown":
                reasons[o.reason or "?"] += 1
    return {"outcomes": report.summary(), **{f"{k}s": dict(c) for k, c in sorted(by_kind.items())},
            "unknown_reasons": dict(reasons)}


def batch_rates(home: Home, exact_items: list[MemoryInput], exact_scope: Callable[[], Scope], mix: Mix,
                mix_scope: Callable[[], Scope], runs: int) -> dict[str, dict[str, Any]]:
    """The all-exact batch and the realistic mix, validated in alternating runs (exact, mix,
    exact, mix …: load from other users of the machine hits both alike); citations/s at the
    median and best run, the outcome histograms, and the targets met or missed. The scope
    is resolved inside the timed call (a validation reads the repository's state)."""
    out: dict[str, dict[str, Any]] = {}
    times: dict[str, list[float]] = {"all_exact": [], "mix": []}
    reports: dict[str, ValidationReport] = {}
    for _ in range(runs):
        for name, items, scope in (("all_exact", exact_items, exact_scope), ("mix", mix.items, mix_scope)):
            t0 = time.perf_counter()
            reports[name] = validate(home, items, scope())
            times[name].append(time.perf_counter() - t0)
    for name, items, target in (("all_exact", exact_items, TARGET_EXACT_PER_S),
                                ("mix", mix.items, TARGET_MIX_PER_S)):
        n = sum(len(i.receipts) for i in items)
        med = statistics.median(times[name])
        extra = {} if name != "mix" else {
            "citation_kinds": mix.kinds, "edited_files": mix.edits,
            "store_read_seconds": round(mix.store_read_seconds, 3),
            "citations_per_s_p50_with_store_read": round(n / (med + mix.store_read_seconds))}
        out[name] = {"citations": n, "runs": runs, "p50_seconds": round(med, 3),
                     "citations_per_s_p50": round(n / med), "citations_per_s_best": round(n / min(times[name])),
                     "target_per_s": target,
                     "target": "met" if n / med >= target else f"missed by {round(100 * (1 - n / med / target))} % at p50",
                     **extra, **histogram(reports[name], items)}
    return out
