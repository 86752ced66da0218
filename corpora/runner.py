"""Run corpus cases: build each case with real git in a temporary directory, capture and
validate through the public API, and compare every observation with its label.

Besides the labels, the runner keeps its *own* record of the world (which repository
states were indexed, which repositories share an identity, which paths exist) so that the
safety gates do not depend only on labels: an authoritative outcome for a repository the
runner knows is not exact-current, or an observed location that does not exist in any
in-scope repository of the citation's identity, is counted even if a label were wrong.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3
import duckdb

from citegraph.corpora.case import AdvisoryLabel, Case, CaseError, FreshLabel, Label
from citegraph.corpora.gitops import Git, normalise_url
from citegraph.graph.current import CurrentState, ScanSource
from citegraph.graph.handles import repo_handle, symbol_handle
from citegraph.graph.schema import IMPORT_TARGETS_LAYOUT
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import extract
from citegraph.indexer.languages import language_for_path
from citegraph.indexer.overloads import overload_stubs
from citegraph.memory.agent.refresh import refresh
from citegraph.memory.api import remember, select_memories, validate_memories
from citegraph.memory.lifecycle.store import MemoryStore, memory_id_for

PROJECT = "corpus"
MISSING_COMMIT = "0badc0de" * 5  # a well-formed commit id that no repository holds
RECALL_TASK = "check that retries preserve the original idempotency key"
SNAPSHOT_TABLES = ("files", "symbols", "edges", "damage", "contents", "meta")
# Meta keys that record how a snapshot was built, not what it holds.
# How a snapshot was built from its parent, not what it holds (a delta says how its import
# targets lie over its base: graph/schema.py).
PROVENANCE_META = frozenset({"base", "parent", "built_at", "published_at", "seconds", IMPORT_TARGETS_LAYOUT})


# --- records -------------------------------------------------------------------------------


@dataclass
class CitationRecord:
    case: str
    category: str
    language: str
    step: int
    memory: str
    ref: str
    kind: str  # file | span | symbol
    expected: str  # the label text
    outcome: str  # actual (or "missing")
    reason: str | None
    observed: dict[str, Any] | None
    current: bool  # runner's oracle: the citation's repository was exact-current, no race
    in_scope: bool  # runner's oracle: a repository of the citation's identity was in scope
    observed_exists: bool | None  # runner's oracle: the observed path exists in scope
    correct: bool = False
    citation_id: str = ""
    change: str | None = None  # the observation's change detail (SPEC §6.3a: cosmetic)

    @property
    def label(self) -> Label:
        return Label.parse(self.expected)


@dataclass
class MemoryRecord:
    case: str
    category: str
    step: int
    memory: str
    legacy: bool
    expected: str
    freshness: str | None  # actual (None when the memory is missing from the result)
    reason: str | None
    parity_ok: bool = True  # legacy: present, listed, and the same verdict alone as in a batch
    correct: bool = False
    memory_id: str = ""
    source_commit: str | None = None  # legacy memories


@dataclass
class CheckRecord:
    case: str
    category: str
    what: str  # capture | snapshot | unlabeled
    ok: bool
    detail: str = ""


@dataclass
class CaseResult:
    case: str
    category: str
    language: str
    citations: list[CitationRecord] = field(default_factory=list)
    memories: list[MemoryRecord] = field(default_factory=list)
    checks: list[CheckRecord] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


# --- helpers --------------------------------------------------------------------------------


def _crlf(data: bytes) -> bytes:
    return re.sub(rb"(?<!\r)\n", b"\r\n", data)


def content_bytes(value: Any, crlf: bool = False, repeat: int = 1) -> bytes:
    """A file's bytes from a case value: a string, or {content, crlf, repeat}."""
    if isinstance(value, dict):
        return content_bytes(value["content"], value.get("crlf", False), value.get("repeat", 1))
    data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)
    if crlf:
        data = _crlf(data)
    return data * int(repeat)


class ExtractorPatch:
    """Simulate an older (or newer) citegraph: a different extractor version, optionally
    producing different fragment hashes. Applied in-process, always restored."""

    def __init__(self) -> None:
        self.saved: list[tuple[Any, str, Any]] = []

    @property
    def active(self) -> bool:
        return bool(self.saved)

    def apply(self, version: str, fragments: str = "same") -> None:
        self.restore()
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("citegraph.") and hasattr(mod, "EXTRACTOR_VERSION"):
                self.saved.append((mod, "EXTRACTOR_VERSION", mod.EXTRACTOR_VERSION))
                mod.EXTRACTOR_VERSION = version
        if fragments == "changed":
            import citegraph.graph.extract_pool as ep

            original = ep.facts_for_blob

            def old_facts(language, data, timeout_s):  # type: ignore[no-untyped-def]
                info, ff = original(language, data, timeout_s)
                ff.symbols = [dataclasses.replace(
                    s, fragment_hash=blake3.blake3(b"old-extractor:" + s.fragment_hash.encode()).hexdigest(32))
                    for s in ff.symbols]
                return info, ff

            self.saved.append((ep, "facts_for_blob", original))
            ep.facts_for_blob = old_facts
        elif fragments != "same":
            raise CaseError(f"extractor fragments must be same or changed, not {fragments!r}")

    def version(self) -> str:
        from citegraph.graph import snapshot_builder as sb

        return sb.EXTRACTOR_VERSION

    def restore(self) -> None:
        for mod, name, value in reversed(self.saved):
            setattr(mod, name, value)
        self.saved.clear()


@dataclass
class MemInfo:
    repo: str
    group: tuple[str, str]
    refs: dict[str, str]  # actual ref as stored -> ref as written in the case
    legacy: bool = False
    source_commit: str | None = None
    aliases: dict[str, str] = field(default_factory=dict)  # dropped ref -> its stored twin (as written)


class RaceSource:
    """A state source (the one-shot scan, or the resident service's) whose first ``moved``
    check (capture's or validation's racing re-check) first runs the case's ``race`` steps:
    the change lands exactly between the work and its re-check. Every other check waits
    for the steps."""

    def __init__(self, steps: Callable[[], None], inner: Any = None) -> None:
        self.steps = steps
        self.inner = inner or ScanSource()
        self.raced = False
        self._lock = threading.Lock()

    def read(self, repo_path: Any, home: Home, at: str | None = None) -> CurrentState:
        return self.inner.read(repo_path, home, at)

    def moved(self, cur: CurrentState) -> bool:
        with self._lock:
            if not self.raced:
                self.raced = True
                self.steps()
        return self.inner.moved(cur)


# --- one case ---------------------------------------------------------------------------------


class CaseRun:
    """One case. With ``service``, every capture and validation reads the repositories
    through a resident service of the case's home (its watcher, its cookie fence) instead
    of scanning them; the service builds nothing by itself (``auto_build=False``), so the
    case's ``index`` steps still decide what is exact-current and the labels hold as
    written."""

    def __init__(self, case: Case, workdir: Path, service: bool = False) -> None:
        self.case = case
        self.workdir = workdir
        self.home = Home.open(workdir / "home")
        self.service = None
        self.source: Any = ScanSource()
        if service:
            from citegraph.server.service import Service

            self.service = Service(self.home, auto_build=False, pool_context="fork")
            self.service.start()
            self.source = self.service.source(wait_s=0.0)
        self.repos: dict[str, Git] = {}
        self.mems: dict[str, MemInfo] = {}
        self.indexed: set[tuple] = set()
        self.patch = ExtractorPatch()
        self.result = CaseResult(case.name, case.category, case.language)

    # -- world model (the oracle) --

    def group(self, name: str) -> tuple[str, str]:
        g = self.repos[name]
        url = g.origin()
        return ("remote", normalise_url(url)) if url else ("local", g.common_dir())

    def state_key(self, name: str) -> tuple:
        g = self.repos[name]
        return (self.group(name), self.patch.version(), g.head(), g.worktree_key())

    def at_key(self, name: str, sha: str) -> tuple:
        return (self.group(name), self.patch.version(), sha, None)

    # -- steps --

    def repo(self, step: dict[str, Any]) -> Git:
        name = step.get("repo", "main")
        if name not in self.repos:
            raise CaseError(f"{self.case.name}: no repository {name!r}")
        return self.repos[name]

    def new_repo(self, name: str, files: dict[str, Any], remote: str | None) -> None:
        if name in self.repos:
            raise CaseError(f"{self.case.name}: repository {name!r} exists")
        g = Git.init(self.workdir / name, remote)
        for path, value in files.items():
            g.write(path, content_bytes(value))
        g.commit("initial")
        g.git("tag", "initial")
        self.repos[name] = g

    def run(self) -> CaseResult:
        t0 = time.perf_counter()
        try:
            self.new_repo("main", self.case.data.get("files", {}), self.case.data.get("remote"))
            for i, step in enumerate(self.case.steps):
                self.step(i, step)
            self.patch.restore()
            self.compare_snapshots()
        except Exception as exc:  # a broken case or a crash: reported, never hidden
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            if not isinstance(exc, CaseError | CitegraphError):
                detail += "\n" + "".join(traceback.format_tb(exc.__traceback__)[-3:])
            self.result.error = detail
        finally:
            self.patch.restore()
            if self.service is not None:
                self.service.close()
        self.result.seconds = time.perf_counter() - t0
        return self.result

    def step(self, i: int, step: dict[str, Any]) -> None:
        op = step["op"]
        getattr(self, "op_" + op.replace("-", "_"))(i, step)

    def run_steps(self, steps: list[dict[str, Any]]) -> None:
        for j, s in enumerate(steps):
            self.step(-1 - j, s)

    def op_commit(self, i: int, s: dict[str, Any]) -> None:
        g = self.repo(s)
        g.commit(s.get("message", f"step {i}"))
        if "tag" in s:
            g.git("tag", s["tag"])

    def op_write(self, i: int, s: dict[str, Any]) -> None:
        path = s["path"]
        if "encoding" in s:  # a file name in another encoding (bytes that may not be UTF-8)
            path = os.fsdecode(path.encode(s["encoding"]))
        self.repo(s).write(path, content_bytes(s["content"], s.get("crlf", False), s.get("repeat", 1)))

    def op_symlink(self, i: int, s: dict[str, Any]) -> None:
        """Replace ``path`` (a file or a whole directory) by a symlink. ``target =
        "outside:NAME"`` points at a directory outside the repository holding ``files``."""
        g = self.repo(s)
        target = s["target"]
        if target.startswith("outside:"):
            out = self.workdir / "outside" / target.split(":", 1)[1]
            for path, value in s.get("files", {}).items():
                (out / path).parent.mkdir(parents=True, exist_ok=True)
                (out / path).write_bytes(content_bytes(value))
            out.mkdir(parents=True, exist_ok=True)
            target = str(out)
        full = g.root / s["path"]
        if full.is_symlink() or full.is_file():
            full.unlink()
        elif full.is_dir():
            shutil.rmtree(full)
        full.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, full)

    def op_mkfifo(self, i: int, s: dict[str, Any]) -> None:
        g = self.repo(s)
        full = g.root / s["path"]
        if full.is_symlink() or full.exists():
            full.unlink()
        os.mkfifo(full)

    def op_damage(self, i: int, s: dict[str, Any]) -> None:
        """Damage the data home: ``what`` = truncate | delete | garbage (same size) |
        catalog (a malformed entry) of the exact-current snapshot (``which = "current"``)
        or of its base (``which = "base"``). The runner forgets every indexed state: an
        authoritative answer before the next index counts against the gates."""
        from citegraph.graph.current import current_state

        g = self.repo(s)
        cur = current_state(g.root, self.home)
        if not cur.exact_current or cur.entry is None:
            raise CaseError(f"{self.case.name}: step {i}: damage needs an exact-current snapshot")
        sid = cur.snapshot_id
        if s.get("which", "current") == "base":
            sid = cur.entry.get("base") or ""
            if not sid:
                raise CaseError(f"{self.case.name}: step {i}: the exact-current snapshot has no base")
        rs = cur.store
        path = rs.snapshot_path(sid)
        what = s["what"]
        if what == "truncate":
            with open(path, "r+b") as f:
                f.truncate(path.stat().st_size // 2)
        elif what == "delete":
            path.unlink()
        elif what == "garbage":
            size = path.stat().st_size
            path.write_bytes((b"\x00garbage" * (size // 8 + 1))[:size])
        elif what == "catalog":
            entry = json.loads(rs.catalog_path(sid).read_text())
            entry["symbols"] = "x"
            rs.catalog_path(sid).write_text(json.dumps(entry))
        else:
            raise CaseError(f"{self.case.name}: step {i}: unknown damage {what!r}")
        self.indexed.clear()

    def op_edit(self, i: int, s: dict[str, Any]) -> None:
        g = self.repo(s)
        path = s["path"]
        crlf = s.get("crlf", False)

        def enc(text: str) -> bytes:
            return content_bytes(text, crlf)

        if "content" in s:
            data = enc(s["content"])
        else:
            data = g.read(path)
        if "replace" in s:
            pairs = s["replace"]
            if pairs and isinstance(pairs[0], str):
                pairs = [pairs]
            for old, new in pairs:
                ob = enc(old)
                n = data.count(ob)
                if n != 1:
                    raise CaseError(f"{self.case.name}: step {i}: {old!r} occurs {n} times in {path}")
                data = data.replace(ob, enc(new))
        if "prepend" in s:
            data = enc(s["prepend"]) + data
        if "append" in s:
            data = data + enc(s["append"])
        g.write(path, data)

    def op_mv(self, i: int, s: dict[str, Any]) -> None:
        g = self.repo(s)
        (g.root / s["dst"]).parent.mkdir(parents=True, exist_ok=True)
        g.git("mv", s["src"], s["dst"])

    def op_cp(self, i: int, s: dict[str, Any]) -> None:
        g = self.repo(s)
        g.write(s["dst"], g.read(s["src"]))

    def op_rm(self, i: int, s: dict[str, Any]) -> None:
        self.repo(s).delete(s["path"])

    def op_restore(self, i: int, s: dict[str, Any]) -> None:
        self.repo(s).git("checkout", "HEAD", "--", s["path"])

    def op_checkout(self, i: int, s: dict[str, Any]) -> None:
        g = self.repo(s)
        g.git("checkout", "-q", *(["-b"] if s.get("create") else []), s["rev"])

    def op_branch(self, i: int, s: dict[str, Any]) -> None:
        self.repo(s).git("branch", s["name"], *([s["rev"]] if "rev" in s else []))

    def op_tag(self, i: int, s: dict[str, Any]) -> None:
        self.repo(s).git("tag", s["name"], *([s["rev"]] if "rev" in s else []))

    def op_git(self, i: int, s: dict[str, Any]) -> None:
        """Any other git command (reset, gc, rebase, …) in the step's repository."""
        self.repo(s).git(*[str(a) for a in s["args"]])

    def op_new_repo(self, i: int, s: dict[str, Any]) -> None:
        self.new_repo(s["name"], s.get("files", {}), s.get("remote"))

    def op_clone(self, i: int, s: dict[str, Any]) -> None:
        src = self.repos[s.get("source", "main")]
        dst = self.workdir / s["name"]
        Git(self.workdir).git("clone", "-q", str(src.root), str(dst))
        g = Git(dst)
        g.git("config", "core.autocrlf", "false")
        remote = s.get("remote", src.origin())
        if remote:
            g.git("remote", "set-url", "origin", remote)
        self.repos[s["name"]] = g

    def op_worktree(self, i: int, s: dict[str, Any]) -> None:
        src = self.repo(s)
        dst = self.workdir / s["name"]
        args = ["worktree", "add", "-q"]
        if s.get("detach"):
            args.append("--detach")
        if "branch" in s:
            args += ["-b", s["branch"]]
        src.git(*args, str(dst), s.get("rev", "HEAD"))
        self.repos[s["name"]] = Git(dst)

    def op_extractor(self, i: int, s: dict[str, Any]) -> None:
        if s.get("version", "current") == "current":
            self.patch.restore()
        else:
            self.patch.apply(s["version"], s.get("fragments", "same"))

    def op_index(self, i: int, s: dict[str, Any]) -> None:
        name = s.get("repo", "main")
        g = self.repo(s)
        want_error = s.get("expect_error")
        sha = g.rev(s["rev"]) if "rev" in s else None
        key = self.at_key(name, sha) if sha is not None else self.state_key(name)
        try:
            build_snapshot(g.root, self.home, rev=sha, jobs=1)
        except CitegraphError as exc:
            if want_error is None:
                raise
            # an expected refusal: one line (what, why, what to do), an input error, the words asked for
            line = exc.line()
            ok = exc.code == 2 and "\n" not in line and want_error in line and line.isprintable()
            self.result.checks.append(CheckRecord(self.case.name, self.case.category, "index", ok,
                                                  f"step {i}: expected an error with {want_error!r}, got "
                                                  f"{line!r} (exit {exc.code})"))
            return
        if want_error is not None:
            self.result.checks.append(CheckRecord(self.case.name, self.case.category, "index", False,
                                                  f"step {i}: expected an error with {want_error!r}, indexed"))
            return
        self.indexed.add(key)

    # -- capture --

    def resolve_ref(self, ref: str, default_repo: str) -> str:
        """``cgs:path::Q.name[N]`` / ``cgr[@repo]:path::Q.name`` → the handle a user would copy
        from ``citegraph symbols`` (computed here from the worktree file; ``[N]`` names the
        definition with ordinal N, and without it several definitions of the name are one
        implementation plus typing overload stubs, or an authoring error)."""
        m = re.match(r"^(cgs|cgr)(?:@([\w.-]+))?:(.+)::(.+)$", ref)
        if not m:
            return ref
        kind, repo_name, path, qname = m.groups()
        om = re.match(r"^(.+)\[(\d+)\]$", qname)
        ordinal = int(om.group(2)) if om else None
        qname = om.group(1) if om else qname
        g = self.repos[repo_name or default_repo]
        lang = language_for_path(path)
        if lang is None:
            raise CaseError(f"{self.case.name}: {ref}: no language for {path}")
        data = g.read(path)
        syms = [s for s in extract(lang, data).symbols if s.qualified_name == qname]
        if ordinal is not None:
            syms = [s for s in syms if s.ordinal == ordinal]
        elif len(syms) > 1:
            stubs = overload_stubs(lang, data, [(s.start_byte, s.end_byte) for s in syms])
            impls = [s for s, stub in zip(syms, stubs, strict=True) if not stub]
            syms = impls if len(impls) == 1 else syms
        if len(syms) != 1:
            raise CaseError(f"{self.case.name}: {ref}: {len(syms)} symbols named {qname} in {path}")
        sym = syms[0]
        handle = symbol_handle(path, lang, sym.kind, qname, sym.ordinal)
        if kind == "cgs":
            return handle
        ident = gitrepo.repository_identity(gitrepo.open_repository(g.root))
        return repo_handle(ident.repository_id, handle)

    def op_capture(self, i: int, s: dict[str, Any]) -> None:
        name = s.get("repo", "main")
        g = self.repo(s)
        mem = s["memory"]
        written = list(s.get("refs", []))
        actual = [self.resolve_ref(r, name) for r in written]
        race = s.get("race")
        source = RaceSource(lambda: self.run_steps(race), self.source) if race else self.source
        want_error = s.get("expect_error")
        try:
            out = remember(self.home, s.get("text", f"memory {mem} of {self.case.name}"), repo=g.root,
                           refs=actual, project=PROJECT, topic=mem, source=source)
        except CitegraphError as exc:
            ok = want_error is not None and exc.kind == want_error
            self.result.checks.append(CheckRecord(self.case.name, self.case.category, "capture", ok,
                                                  f"step {i}: {mem}: expected {want_error or 'success'}, "
                                                  f"got error {exc.kind}: {exc.what}"))
            return
        if want_error is not None:
            self.result.checks.append(CheckRecord(self.case.name, self.case.category, "capture", False,
                                                  f"step {i}: {mem}: expected error {want_error}, stored"))
        else:
            self.result.checks.append(CheckRecord(self.case.name, self.case.category, "capture", True,
                                                  f"step {i}: {mem}"))
        mapping = {a: w for a, w in zip(actual, written, strict=True)}
        stored = {c["ref"]: mapping.get(c["ref"], c["ref"]) for c in out["citations"]}
        # Refs naming the same evidence are stored once (SPEC §5): a dropped ref must have a
        # stored twin by the runner's own reckoning, and is judged by the twin's observation.
        aliases: dict[str, str] = {}
        keys = {self.evidence_key(r, name): r for r in stored}
        for a, w in zip(actual, written, strict=True):
            if a in stored:
                continue
            twin = keys.get(self.evidence_key(a, name))
            if twin is None:
                self.result.checks.append(CheckRecord(self.case.name, self.case.category, "capture", False,
                                                      f"step {i}: {mem}: ref {w} was dropped"))
            elif stored[twin] != w:
                aliases[w] = stored[twin]
        self.mems[mem] = MemInfo(name, self.group(name), stored, aliases=aliases)

    def evidence_key(self, ref: str, repo_name: str) -> tuple:
        """What a ref cites, by the runner's own reckoning: a symbol's handle (computed from
        the worktree file), a span's path and lines, a file's path."""
        if ref.startswith("cgs_"):
            return ("symbol", ref)
        if "::" in ref:
            path, _, qname = ref.partition("::")
            return ("symbol", self.resolve_ref(f"cgs:{path}::{qname}", repo_name))
        m = re.match(r"^(.+)#L(\d+)(?:-L?(\d+))?$", ref)
        if m:
            return ("span", m.group(1), int(m.group(2)), int(m.group(3) or m.group(2)))
        return ("file", ref)

    def op_legacy(self, i: int, s: dict[str, Any]) -> None:
        """A legacy record (no citations, optional source commit), loaded through the legacy
        import when this citegraph has one, else stored as a legacy memory directly."""
        name = s.get("repo", "main")
        g = self.repo(s)
        sc = s.get("source_commit")
        if sc in (None, "none"):
            commit = None
        elif sc == "missing":
            commit = MISSING_COMMIT
        else:
            commit = g.rev(sc)
        mem = s["memory"]
        text = s.get("text", f"Retries preserve the original idempotency key (legacy note {mem}).")
        try:
            from citegraph.memory.api import import_legacy
        except ImportError:
            import_legacy = None  # type: ignore[assignment]
        if import_legacy is not None:
            record = {"text": text, "project": PROJECT, "topic": mem}
            if commit:
                record["source_commit"] = commit
            src = self.workdir / f"legacy-{mem}.jsonl"
            src.write_text(json.dumps(record) + "\n", encoding="utf-8")
            import_legacy(self.home, src)
        else:
            with MemoryStore.open(self.home) as ms:
                ms.remember(text, project=PROJECT, topic=mem, source_commit=commit, legacy=True)
        self.mems[mem] = MemInfo(name, self.group(name), {}, legacy=True, source_commit=commit)

    # -- refresh --

    def op_refresh(self, i: int, s: dict[str, Any]) -> None:
        """``refresh`` of the named memories (default: every cited memory of the step's
        repository); ``expect`` checks the summary's counts (refreshed, kept, refused,
        changed), ``expect_error`` the error kind. A written revision's new citations are
        labeled by their new refs as stored (a handle as ``cgs:path::Name``)."""
        name = s.get("repo", "main")
        g = self.repo(s)
        names = [s["memory"]] if "memory" in s else list(s.get("memories", [
            n for n, m in self.mems.items() if m.repo == name and not m.legacy]))
        for n in names:
            if n not in self.mems:
                raise CaseError(f"{self.case.name}: step {i}: memory {n!r} was never stored")
        ids = {memory_id_for(PROJECT, n): n for n in names}
        want_error = s.get("expect_error")
        try:
            out = refresh(self.home, list(ids), repo=g.root, accept=s.get("accept"), dry_run=s.get("dry_run", False))
        except CitegraphError as exc:
            self.result.checks.append(CheckRecord(self.case.name, self.case.category, "refresh",
                                                  want_error is not None and exc.kind == want_error,
                                                  f"step {i}: expected {want_error or 'success'}, got error "
                                                  f"{exc.kind}: {exc.what}"))
            return
        got = out["summary"]
        want = s.get("expect", {})
        bad = {k: (v, got.get(k)) for k, v in want.items() if got.get(k) != v}
        ok = want_error is None and not bad
        self.result.checks.append(CheckRecord(self.case.name, self.case.category, "refresh", ok,
                                              f"step {i}: {got}" + (f"; expected {bad}" if bad else "")))
        written = [m for m in out["memories"] if m["written"]]
        if not written:
            return
        with MemoryStore.open(self.home, read_only=True) as ms:
            for m in written:
                info = self.mems[ids[m["id"]]]
                stored = ms.require(m["id"])
                old = {c["id"]: info.refs.get(c["ref"], c["ref"]) for c in m["citations"]}
                refs: dict[str, str] = {}
                for r in stored.citations:
                    if r.id in old:
                        refs[r.ref] = old[r.id]
                    elif r.ref.startswith(("cgs_", "cgr_")):
                        refs[r.ref] = f"{r.ref[:3]}:{r.locator}"
                    else:
                        refs[r.ref] = r.ref
                info.refs = refs
                info.aliases = {a: t for a, t in info.aliases.items() if t in refs.values()}

    # -- validate --

    def op_validate(self, i: int, s: dict[str, Any]) -> None:
        expect: dict[str, Any] = s.get("expect", {})
        names = list(s.get("memories", list(expect)))
        for n in names:
            if n not in self.mems:
                raise CaseError(f"{self.case.name}: step {i}: memory {n!r} was never stored")
        scope = list(s.get("scope", ["main"]))
        paths = [str(self.repos[n].root) for n in scope]
        at_sha = self.repos[scope[0]].rev(s["at"]) if "at" in s else None
        before = {n: self.state_key(n) for n in scope}
        race = s.get("race")
        source = RaceSource(lambda: self.run_steps(race), self.source) if race else self.source
        ids = {memory_id_for(PROJECT, n): n for n in names}
        want_error = s.get("expect_error")
        try:
            report = validate_memories(self.home, memory_ids=list(ids), repo_paths=paths, at=at_sha,
                                       source=source)
        except CitegraphError as exc:
            if want_error is None:
                raise
            line = exc.line()
            ok = "\n" not in line and want_error in line and line.isprintable()
            self.result.checks.append(CheckRecord(self.case.name, self.case.category, "validate", ok,
                                                  f"step {i}: expected an error with {want_error!r}, got "
                                                  f"{line!r}"))
            return
        if want_error is not None:
            self.result.checks.append(CheckRecord(self.case.name, self.case.category, "validate", False,
                                                  f"step {i}: expected an error with {want_error!r}, answered"))
            return
        after = {n: self.state_key(n) for n in scope}
        verdicts = {v.memory_id: v for v in report.verdicts}
        legacy = {mid: verdicts.get(mid) for mid, n in ids.items() if self.mems[n].legacy}
        cited = any(not self.mems[n].legacy for n in ids.values())
        parity = self.legacy_parity(legacy, paths, at_sha, cited and not race) if legacy else {}

        for mid, mem in ids.items():
            info = self.mems[mem]
            v = verdicts.get(mid)
            exp = expect.get(mem, {})
            if "freshness" in exp:
                rec = MemoryRecord(self.case.name, self.case.category, i, mem, info.legacy, exp["freshness"],
                                   v.freshness if v else None, v.reason if v else None, memory_id=mid,
                                   source_commit=info.source_commit)
                want = FreshLabel.parse(exp["freshness"])
                rec.correct = (v is not None and v.freshness == want.freshness
                               and (want.reason is None or want.reason == v.reason))
                if info.legacy:
                    rec.parity_ok = parity.get(mid, False)
                self.result.memories.append(rec)
            observations = {}
            if v is not None:
                for o in v.observations:
                    r = report.receipts[o.citation_id]
                    observations[info.refs.get(r.ref, r.ref)] = (o, r)
            for alias, twin in info.aliases.items():
                if twin in observations:
                    observations[alias] = observations[twin]
            self.check_advisories(i, mem, exp.get("advisories"), observations)
            labels = exp.get("citations", {})
            for ref in observations:
                if ref not in labels:
                    self.result.checks.append(CheckRecord(self.case.name, self.case.category, "unlabeled", False,
                                                          f"step {i}: {mem}: citation {ref} has no label"))
            members = [n for n in scope if self.group(n) == info.group]
            for ref, text in labels.items():
                label = Label.parse(text)
                o_r = observations.get(ref)
                kind = o_r[1].kind if o_r else _guess_kind(ref)
                rec = CitationRecord(
                    self.case.name, self.case.category, self.case.language, i, mem, ref, kind, text,
                    o_r[0].outcome if o_r else "missing", o_r[0].reason if o_r else None,
                    o_r[0].observed.to_dict() if o_r and o_r[0].observed else None,
                    current=self.oracle_current(members, before, after, at_sha),
                    in_scope=bool(members),
                    observed_exists=self.oracle_exists(members, o_r[0].observed.path, at_sha)
                    if o_r and o_r[0].observed else None,
                    citation_id=o_r[1].id if o_r else "", change=o_r[0].change if o_r else None)
                rec.correct = _matches(label, rec)
                self.result.citations.append(rec)

    def check_advisories(self, i: int, mem: str, labels: dict[str, list[str]] | None,
                         observations: dict[str, tuple[Any, Any]]) -> None:
        """dependency-changed labels (SPEC §21): where a memory labels advisories, each of
        its citations must carry exactly the labeled ones — a missing one is a label not
        matched, an extra one a false advisory."""
        if labels is None:
            return
        for ref, (o, _r) in observations.items():
            want = [AdvisoryLabel.parse(t) for t in labels.get(ref, [])]
            got = [(a.change, a.locator, a.now.path if a.now else None) for a in o.advisories]
            false = [g for g in got if not any(w.matches(*g) for w in want)]
            missed = [w for w in want if not any(w.matches(*g) for g in got)]
            for g in false:
                self.result.checks.append(CheckRecord(self.case.name, self.case.category, "false-advisory", False,
                                                      f"step {i}: {mem}: {ref}: {g[0]} {g[1]} @ {g[2]}"))
            for w in missed:
                self.result.checks.append(CheckRecord(self.case.name, self.case.category, "advisory", False,
                                                      f"step {i}: {mem}: {ref}: missing {w.change} {w.locator}"))
            if not false and not missed:
                self.result.checks.append(CheckRecord(self.case.name, self.case.category, "advisory", True,
                                                      f"step {i}: {mem}: {ref}: {len(got)} advisory(ies)"))

    def oracle_current(self, members: list[str], before: dict, after: dict, at_sha: str | None) -> bool:
        """Exact-current by the runner's own bookkeeping: the state every member of the
        citation's identity was in (unchanged across the validation) was indexed."""
        if not members:
            return False
        if any(before[n] != after[n] for n in members):
            return False
        if at_sha is not None:
            return self.at_key(members[0], at_sha) in self.indexed
        keys = {before[n] for n in members}
        return len(keys) == 1 and next(iter(keys)) in self.indexed

    def oracle_exists(self, members: list[str], path: str, at_sha: str | None) -> bool:
        for n in members:
            g = self.repos[n]
            if at_sha is not None:
                if g.has_path_at(at_sha, path):
                    return True
            elif g.real_kind(g.real_path(path)) in ("file", "other"):
                return True
        return False

    def legacy_parity(self, legacy: dict[str, Any], paths: list[str], at_sha: str | None,
                      batch: bool) -> dict[str, bool]:
        """Legacy memories are never dropped and never judged or ranked differently because
        cited memories exist: each is listed, present in the result, judged the same when
        validated without the batch's cited memories, and recalled with exactly its score
        and order among uncited memories whether citation boosts are on or off."""
        with MemoryStore.open(self.home) as ms:
            listed = {m.id for m in select_memories(ms)}
            ranks = self.recall_parity(ms)
        ok = {mid: mid in listed and v is not None and ranks.get(mid, True) for mid, v in legacy.items()}
        if batch and legacy:
            alone = validate_memories(self.home, memory_ids=list(legacy), repo_paths=paths, at=at_sha,
                                      source=self.source)
            got = {x.memory_id: (x.freshness, x.reason) for x in alone.verdicts}
            for mid, v in legacy.items():
                ok[mid] = ok[mid] and got.get(mid) == (v.freshness, v.reason)
        return ok

    def recall_parity(self, ms: MemoryStore) -> dict[str, bool]:
        try:
            from citegraph.memory.brief.recall import recall
        except ImportError:
            return {}
        legacy_ids = {memory_id_for(PROJECT, n) for n, m in self.mems.items() if m.legacy}
        code_refs = sorted({ref for m in self.mems.values() for ref in m.refs})[:8]
        boosted = recall(ms, RECALL_TASK, code_refs=code_refs, boosts=True, limit=10_000)
        plain = recall(ms, RECALL_TASK, code_refs=code_refs, boosts=False, limit=10_000)
        a = [(c.memory_id, round(c.score, 9)) for c in boosted if c.memory_id in legacy_ids]
        b = [(c.memory_id, round(c.score, 9)) for c in plain if c.memory_id in legacy_ids]
        same = a == b
        return {mid: same and any(m == mid for m, _ in a) for mid in legacy_ids}

    # -- incremental vs clean --

    def compare_snapshots(self) -> None:
        """SPEC §3: the final state of every repository, built incrementally in the case's home,
        must equal a clean build of the same state in a fresh home."""
        for name, g in self.repos.items():
            inc = build_snapshot(g.root, self.home, jobs=1)
            clean_home = Home.open(self.workdir / f"clean-home-{name}")
            clean = build_snapshot(g.root, clean_home, jobs=1)
            problems = []
            if inc.snapshot_id != clean.snapshot_id:
                problems.append("snapshot id")
            if inc.content_id != clean.content_id:
                problems.append("content id")
            a = dump_snapshot(self.home, inc)
            b = dump_snapshot(clean_home, clean)
            problems += [f"table {t}" for t in SNAPSHOT_TABLES if a.get(t) != b.get(t)]
            self.result.checks.append(CheckRecord(
                self.case.name, self.case.category, "snapshot", not problems,
                f"{name}: incremental vs clean differ in {', '.join(problems)}" if problems else name))


def dump_snapshot(home: Home, result: Any) -> dict[str, list[tuple] | None]:
    """A snapshot's logical content, read through the public reader (a delta snapshot is
    laid over its base), minus provenance meta (which parent it was built from)."""

    out: dict[str, list[tuple] | None] = {}
    with Snapshot.open(home.repo(result.repository_id), result.snapshot_id) as snap:
        for t in SNAPSHOT_TABLES:
            try:
                rows = snap.query(f"SELECT * FROM {t} ORDER BY ALL")
            except duckdb.Error:
                rows = None
            if t == "meta" and rows is not None:
                rows = [r for r in rows if r[0] not in PROVENANCE_META]
            out[t] = rows
    return out


def _guess_kind(ref: str) -> str:
    if ref.startswith(("cgs", "cgr")) or "::" in ref:
        return "symbol"
    return "span" if "#L" in ref else "file"


def _matches(label: Label, rec: CitationRecord) -> bool:
    if rec.outcome != label.outcome or rec.change != label.change:
        return False
    if label.reason is not None and rec.reason != label.reason:
        return False
    if label.outcome != "unknown" and label.reason is None and rec.reason is not None:
        return False
    if label.path is not None:
        ob = rec.observed or {}
        if ob.get("path") != label.path:
            return False
        if label.start_line is not None and (ob.get("start_line"), ob.get("end_line")) != (
                label.start_line, label.end_line):
            return False
    return True


def temp_base() -> str | None:
    """Where cases are built: $CITEGRAPH_CORPUS_TMP, else /dev/shm when it is a usable tmpfs
    (snapshot publishing fsyncs; on a disk that dominates the run), else the system default."""
    env = os.environ.get("CITEGRAPH_CORPUS_TMP")
    if env:
        return env
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        try:
            if shutil.disk_usage(shm).free > 512 << 20:
                return str(shm)
        except OSError:
            pass
    return None


@contextlib.contextmanager
def _tempdir(keep: bool) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="citegraph-corpus-", dir=temp_base()))
    try:
        yield d
    finally:
        if not keep:
            shutil.rmtree(d, ignore_errors=True)


def run_case(case: Case, keep: bool = False, service: bool = False) -> CaseResult:
    with _tempdir(keep) as d:
        res = CaseRun(case, d, service).run()
        if keep:
            res.checks.append(CheckRecord(case.name, case.category, "workdir", True, str(d)))
        return res


def run_cases(cases: list[Case], jobs: int = 1, keep: bool = False,
              on_done: Callable[[CaseResult], None] | None = None, service: bool = False) -> list[CaseResult]:
    """Run cases (in a small process pool when jobs > 1); results in case order."""
    if jobs <= 1 or len(cases) <= 1:
        out = []
        for c in cases:
            r = run_case(c, keep, service)
            if on_done:
                on_done(r)
            out.append(r)
        return out
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    results: dict[str, CaseResult] = {}
    with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
        futs = {pool.submit(run_case, c, keep, service): c for c in cases}
        for f in as_completed(futs):
            r = f.result()
            results[r.case] = r
            if on_done:
                on_done(r)
    return [results[c.name] for c in cases]


def default_jobs() -> int:
    env = os.environ.get("CITEGRAPH_CORPUS_JOBS")
    if env:
        return max(1, int(env))
    return min(2, os.cpu_count() or 1)


def rescore(case: Case, result: CaseResult) -> CaseResult:
    """Re-judge a finished run against the case's (possibly edited) labels — what the run
    would report had the labels been these, without re-running git. Used to prove that
    changing any single label makes the corpus fail (tests/test_corpus.py)."""
    out = dataclasses.replace(result, citations=[], memories=[])
    for rec in result.citations:
        text = case.steps[rec.step]["expect"][rec.memory]["citations"][rec.ref]
        new = dataclasses.replace(rec, expected=text)
        new.correct = _matches(Label.parse(text), new)
        out.citations.append(new)
    for m in result.memories:
        text = case.steps[m.step]["expect"][m.memory]["freshness"]
        want = FreshLabel.parse(text)
        new = dataclasses.replace(m, expected=text)
        new.correct = m.freshness == want.freshness and (want.reason is None or want.reason == m.reason)
        out.memories.append(new)
    return out
