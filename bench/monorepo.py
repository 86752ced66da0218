"""Synthetic monorepo generator for the scale benchmarks (SPEC §14).

    python -m citegraph.bench.monorepo DEST --source GITDIR [--rev REV] --copies 23
    python -m citegraph.bench.monorepo DEST --files 20000 [--seed 0]

Two modes, both written as one commit on ``main`` through ``git fast-import`` (a stream
of inline blobs: 250k files take minutes, not hours), then checked out (``--no-checkout``
skips that; dirty-edit and branch benchmarks need the worktree):

* **copies** (``--source``): N copies of a real repository's tree, ``copy00/`` … Every
  blob of the result is unique: the i-th time a source blob is emitted it gets i trailing
  newlines (more if that still collides), so the code parses to the same symbols but no
  two paths share a blob and the indexer's blob-keyed cache cannot dedupe across copies.
  Symlinks keep their target (a changed target would break the link; the indexer skips
  symlinks anyway) and submodules keep their commit. Source blobs are read once with
  ``git cat-file --batch``.
* **synthetic** (``--files``): generated sources in Python, TypeScript, Go, Rust and Java
  (plus a few READMEs and manifests), deterministic from ``--seed``, with realistic symbol
  density (classes, methods, functions, constants, imports and calls between files).
  Needs no network and no source repository: the CI-size and offline mode.

Library use (other benchmarks, tests)::

    from citegraph.bench.monorepo import generate, generate_repo
    path = generate(dest, files=2000, seed=1)             # -> Path of the worktree
    info = generate_repo(dest, source="/src/.git", copies=3)  # -> Generated (counts, timings)

The commit is deterministic (fixed author and date), so the same parameters give the same
commit id. A summary is stored in ``<git dir>/cg-bench-monorepo.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

COMMIT_DATE = "1764547200 +0000"  # 2025-12-01, fixed so commits are reproducible
IDENT = "citegraph bench <bench@citegraph.invalid>"
SUMMARY_FILE = "cg-bench-monorepo.json"
GIT_ENV = {"GIT_AUTHOR_NAME": "citegraph bench", "GIT_AUTHOR_EMAIL": "bench@citegraph.invalid",
           "GIT_COMMITTER_NAME": "citegraph bench", "GIT_COMMITTER_EMAIL": "bench@citegraph.invalid"}
MAX_COPY_CACHE = 1 << 30  # --order copy keeps the source blobs in memory


class GenerateError(Exception):
    """A bad parameter or a failed git step: one line for the user."""


@dataclass
class Generated:
    """What was generated, with its timings (seconds)."""

    path: Path
    mode: str  # "copies" | "synthetic"
    branch: str
    commit: str
    files: int
    bytes: int
    unique_blobs: int
    generate_seconds: float  # stream + fast-import
    checkout_seconds: float | None
    params: dict[str, Any] = field(default_factory=dict)
    languages: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


# --- git plumbing --------------------------------------------------------------------------

def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    res = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True,
                         env={**os.environ, **GIT_ENV})
    if res.returncode != 0:
        msg = res.stderr.decode(errors="replace").strip().splitlines()
        raise GenerateError(f"git {' '.join(args[:2])} failed: {msg[-1] if msg else res.returncode}")
    return res.stdout


class _Unique:
    """Makes every emitted blob unique by appending newlines; tracks git blob ids."""

    def __init__(self) -> None:
        self.seen: set[bytes] = set()
        self.total_bytes = 0

    def make(self, data: bytes, extra: int = 0) -> bytes:
        if extra:
            data = data + b"\n" * extra
        while True:
            oid = hashlib.sha1(b"blob %d\0" % len(data) + data).digest()
            if oid not in self.seen:
                self.seen.add(oid)
                self.total_bytes += len(data)
                return data
            data += b"\n"


class _FastImport:
    """One commit of inline files streamed into ``git fast-import``."""

    def __init__(self, repo: Path, branch: str, message: str) -> None:
        self.proc = subprocess.Popen(["git", "fast-import", "--quiet", "--done"], cwd=repo,
                                     stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, **GIT_ENV})
        assert self.proc.stdin is not None
        self.out: IO[bytes] = self.proc.stdin
        msg = message.encode()
        self.out.write(b"commit refs/heads/%s\nauthor %s %s\ncommitter %s %s\ndata %d\n%s\n" % (
            branch.encode(), IDENT.encode(), COMMIT_DATE.encode(), IDENT.encode(),
            COMMIT_DATE.encode(), len(msg), msg))
        self.files = 0

    def file(self, path: str, data: bytes, mode: str = "100644") -> None:
        self.out.write(b"M %s inline %s\ndata %d\n" % (mode.encode(), _quote(path), len(data)))
        self.out.write(data)
        self.out.write(b"\n")
        self.files += 1

    def gitlink(self, path: str, commit: str) -> None:
        self.out.write(b"M 160000 %s %s\n" % (commit.encode(), _quote(path)))
        self.files += 1

    def close(self) -> None:
        try:
            self.out.write(b"\ndone\n")
            self.out.close()
        except BrokenPipeError:
            pass
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        if self.proc.wait() != 0:
            lines = err.strip().splitlines()
            raise GenerateError(f"git fast-import failed: {lines[0] if lines else self.proc.returncode}")

    def abort(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _quote(path: str) -> bytes:
    raw = path.encode("utf-8", "surrogateescape")
    if raw.startswith(b'"') or b"\n" in raw or b"\\" in raw:
        return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n") + b'"'
    return raw


def _init_dest(dest: Path) -> None:
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise GenerateError(f"{dest} exists and is not empty; choose a new path or remove it")
    dest.mkdir(parents=True, exist_ok=True)
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "config", "gc.auto", "0")  # no auto-gc in the middle of a benchmark


def _checkout(dest: Path, branch: str) -> float:
    t0 = time.perf_counter()
    _git(dest, "symbolic-ref", "HEAD", f"refs/heads/{branch}")
    _git(dest, "-c", "checkout.workers=0", "reset", "-q", "--hard", branch)
    return time.perf_counter() - t0


# --- mode copies ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Entry:
    mode: str
    kind: str
    oid: str
    size: int
    path: str


def _source_tree(source: Path, rev: str) -> tuple[str, list[_Entry], int]:
    if not source.exists():
        raise GenerateError(f"source {source} does not exist; pass a git directory or worktree")
    try:
        commit = _git(source, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}").decode().strip()
    except GenerateError as exc:
        raise GenerateError(f"{source}: cannot resolve revision {rev!r} ({exc})") from None
    raw = _git(source, "ls-tree", "-r", "-z", "-l", "--full-tree", commit)
    entries = []
    missing = 0
    for rec in raw.split(b"\0"):
        if not rec:
            continue
        meta, path = rec.split(b"\t", 1)
        mode, kind, oid, size = meta.split()
        if kind == b"blob" and not size.isdigit():
            missing += 1  # absent from the object database (partial or trimmed clone)
            continue
        entries.append(_Entry(mode.decode(), kind.decode(), oid.decode(),
                              int(size) if size.isdigit() else 0, path.decode("utf-8", "surrogateescape")))
    if not entries:
        raise GenerateError(f"{source} at {rev} has an empty tree; nothing to copy")
    return commit, entries, missing


class _CatFile:
    """``git cat-file --batch``: ids fed by a thread, contents read in order."""

    def __init__(self, source: Path, oids: list[str]) -> None:
        self.proc = subprocess.Popen(["git", "cat-file", "--batch"], cwd=source, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._feeder = threading.Thread(target=self._feed, args=(oids,), daemon=True)
        self._feeder.start()

    def _feed(self, oids: list[str]) -> None:
        assert self.proc.stdin is not None
        try:
            for i in range(0, len(oids), 512):
                self.proc.stdin.write("".join(o + "\n" for o in oids[i:i + 512]).encode())
            self.proc.stdin.close()
        except BrokenPipeError:
            pass

    def read(self) -> bytes:
        assert self.proc.stdout is not None
        header = self.proc.stdout.readline().split()
        if len(header) != 3:
            raise GenerateError(f"git cat-file: cannot read object {header[0].decode() if header else '?'}")
        data = self.proc.stdout.read(int(header[2]))
        self.proc.stdout.read(1)
        return data

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _emit_copies(fi: _FastImport, uniq: _Unique, source: Path, entries: list[_Entry], copies: int,
                 order: str, langs: dict[str, int]) -> None:
    width = max(2, len(str(copies - 1)))
    prefixes = [f"copy{k:0{width}d}/" for k in range(copies)]
    blobs = [e for e in entries if e.kind == "blob"]
    links = [e for e in entries if e.kind == "commit"]
    emitted: dict[str, int] = {}

    def emit(e: _Entry, prefix: str, data: bytes) -> None:
        path = prefix + e.path
        if e.mode == "120000":
            fi.file(path, data, e.mode)  # a symlink target stays valid
            return
        n = emitted.get(e.oid, 0)
        emitted[e.oid] = n + 1
        fi.file(path, uniq.make(data, n), e.mode)
        ext = os.path.splitext(e.path)[1].lower() or "(none)"
        langs[ext] = langs.get(ext, 0) + 1

    if order == "copy":
        total = sum(e.size for e in {e.oid: e for e in blobs}.values())
        if total > MAX_COPY_CACHE:
            raise GenerateError(f"source blobs total {total >> 20} MiB, more than --order copy keeps in "
                                "memory; use --order file")
        distinct = list(dict.fromkeys(e.oid for e in blobs))
        cat = _CatFile(source, distinct)
        try:
            cache = {oid: cat.read() for oid in distinct}
        finally:
            cat.close()
        for prefix in prefixes:
            for e in blobs:
                emit(e, prefix, cache[e.oid])
    else:
        cat = _CatFile(source, [e.oid for e in blobs])
        try:
            for e in blobs:
                data = cat.read()
                for prefix in prefixes:
                    emit(e, prefix, data)
        finally:
            cat.close()
    for prefix in prefixes:
        for e in links:
            fi.gitlink(prefix + e.path, e.oid)


# --- mode synthetic ------------------------------------------------------------------------

WORDS = (
    "account", "action", "adapter", "address", "agent", "alert", "archive", "asset", "audit", "auth",
    "backoff", "balance", "batch", "billing", "block", "bucket", "buffer", "budget", "cache", "call",
    "card", "cart", "catalog", "channel", "charge", "check", "client", "cluster", "codec", "config",
    "consumer", "context", "cursor", "customer", "digest", "dispatch", "document", "domain", "draft",
    "entry", "event", "export", "feature", "feed", "fetch", "filter", "flag", "frame", "gateway",
    "graph", "group", "handler", "header", "health", "history", "intake", "index", "invoice", "item",
    "job", "journal", "key", "label", "ledger", "limit", "link", "listing", "loader", "lock", "log",
    "manifest", "mapper", "message", "metric", "mirror", "model", "monitor", "node", "notice",
    "offset", "order", "owner", "packet", "page", "parser", "partition", "payload", "payment", "peer",
    "plan", "policy", "pool", "price", "probe", "profile", "queue", "quota", "rate", "reader", "record",
    "region", "registry", "report", "request", "resolver", "resource", "response", "retry", "route",
    "rule", "runner", "sample", "schedule", "schema", "scope", "search", "secret", "segment", "sender",
    "session", "shard", "signal", "snapshot", "source", "span", "stage", "state", "store", "stream",
    "summary", "tenant", "ticket", "timer", "token", "topic", "trace", "tracker", "update", "upload",
    "user", "value", "vault", "version", "view", "volume", "window", "worker", "writer", "zone",
)
VERBS = ("apply", "build", "check", "collect", "compute", "convert", "create", "decode", "delete",
         "emit", "encode", "ensure", "fetch", "find", "flush", "format", "handle", "load", "lookup",
         "merge", "normalize", "open", "parse", "prepare", "publish", "read", "record", "refresh",
         "register", "release", "render", "reset", "resolve", "retry", "save", "schedule", "select",
         "send", "split", "start", "stop", "sync", "track", "update", "validate", "write")
TYPE_SUFFIX = ("", "Manager", "Service", "Client", "Store", "Policy", "Config", "Handler", "State",
               "Builder", "Registry", "Result", "Options", "Error", "Event", "Request", "Response")

LANG_WEIGHTS = (("python", 0.30), ("typescript", 0.25), ("go", 0.18), ("java", 0.15), ("rust", 0.12))
NON_CODE_FRACTION = 0.05


def _pascal(*words: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in words)


def _camel(*words: str) -> str:
    s = _pascal(*words)
    return s[:1].lower() + s[1:]


def _snake(*words: str) -> str:
    return "_".join(words)


@dataclass(frozen=True)
class _Item:
    """A planned top-level definition: kind and name words (names derive per language)."""

    kind: str  # "class" | "function" | "constant" | "interface" | "enum"
    words: tuple[str, ...]
    members: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class _File:
    index: int
    path: str
    language: str  # a generated language, or "text"
    package: int  # index of the package (files that import each other)


class _Plan:
    """Paths of a synthetic repository and, per file, its deterministic definitions."""

    def __init__(self, files: int, seed: int) -> None:
        self.seed = seed
        rng = random.Random(f"{seed}:layout")
        self.files: list[_File] = []
        self.packages: list[list[int]] = []
        used: set[str] = set()
        langs = [lang for lang, _ in LANG_WEIGHTS]
        weights = [w for _, w in LANG_WEIGHTS]
        while len(self.files) < files:
            # Every language once first (small repositories too), then by weight.
            n = len(self.packages)
            lang = langs[n] if n < len(langs) else rng.choices(langs, weights)[0]
            size = max(4, min(400, files // 10, int(rng.lognormvariate(math.log(40), 0.8))))
            size = min(size, files - len(self.files))
            self._package(rng, lang, size, used)
        self.by_package = self.packages

    def _package(self, rng: random.Random, lang: str, size: int, used: set[str]) -> None:
        pkg = len(self.packages)
        name = f"{rng.choice(WORDS)}{'' if rng.random() < 0.6 else '-' + rng.choice(WORDS)}"
        root = {"python": f"python/{name.replace('-', '_')}", "typescript": f"web/{name}/src",
                "go": f"go/{name.replace('-', '')}", "rust": f"rust/{name}/src",
                "java": f"java/{name}/src/main/java/com/acme/{name.replace('-', '')}"}[lang]
        while root in used:
            root += f"{rng.randint(2, 99)}"
        used.add(root)
        members: list[int] = []
        self.packages.append(members)
        dirs = [root]
        for _ in range(max(0, size // 20)):
            parent = rng.choice(dirs)
            if parent.count("/") - root.count("/") < 3:
                sub = rng.choice(WORDS)
                dirs.append(f"{parent}/{sub}")
        ext = {"python": ".py", "typescript": ".ts", "go": ".go", "rust": ".rs", "java": ".java"}[lang]
        for i in range(size):
            d = dirs[i % len(dirs)] if i < len(dirs) else rng.choice(dirs)
            if rng.random() < NON_CODE_FRACTION:
                base = rng.choice(("README.md", "CHANGELOG.md", "config.json", "settings.yaml", "BUILD",
                                   "notes.txt"))
                language = "text"
            else:
                language = lang
                if lang == "python" and f"{d}/__init__.py" not in used:
                    base = "__init__.py"
                elif lang == "rust" and d == root and f"{d}/lib.rs" not in used:
                    base = "lib.rs"
                else:
                    w = (rng.choice(WORDS), rng.choice(WORDS))
                    base = {"python": _snake(*w), "typescript": _camel(*w), "go": _snake(*w),
                            "rust": _snake(*w), "java": _pascal(*w)}[lang] + ext
            path = f"{d}/{base}"
            n = 2
            while path in used:
                stem, dot, e = base.rpartition(".")
                path = f"{d}/{stem}{n}.{e}" if dot else f"{d}/{base}{n}"
                n += 1
            used.add(path)
            members.append(len(self.files))
            self.files.append(_File(len(self.files), path, language, pkg))

    def items(self, index: int) -> list[_Item]:
        """Top-level definitions of file ``index`` (reproducible on their own, for imports)."""
        rng = random.Random(f"{self.seed}:items:{index}")
        if os.path.basename(self.files[index].path) in ("__init__.py", "lib.rs"):
            count = rng.randint(0, 2)
        else:
            r = rng.random()
            count = rng.randint(1, 3) if r < 0.35 else rng.randint(3, 7) if r < 0.85 else rng.randint(8, 20)
        out = []
        for _ in range(count):
            r = rng.random()
            if r < 0.35:
                members = tuple((rng.choice(VERBS), rng.choice(WORDS)) for _ in range(rng.randint(1, 5)))
                out.append(_Item("class", (rng.choice(WORDS), rng.choice(TYPE_SUFFIX)), members))
            elif r < 0.75:
                out.append(_Item("function", (rng.choice(VERBS), rng.choice(WORDS))))
            elif r < 0.88:
                out.append(_Item("constant", ("max" if rng.random() < 0.5 else "default", rng.choice(WORDS))))
            elif r < 0.95:
                members = tuple((rng.choice(VERBS), rng.choice(WORDS)) for _ in range(rng.randint(1, 4)))
                out.append(_Item("interface", (rng.choice(WORDS), rng.choice(("Source", "Sink", "Provider",
                                                                              "Port", "Listener"))), members))
            else:
                out.append(_Item("enum", (rng.choice(WORDS), "Kind")))
        return _dedupe_names(out)

    def neighbours(self, index: int, rng: random.Random, k: int) -> list[int]:
        f = self.files[index]
        pool = [j for j in self.packages[f.package] if j != index and self.files[j].language == f.language]
        return rng.sample(pool, min(k, len(pool)))


def _dedupe_names(items: list[_Item]) -> list[_Item]:
    seen: set[tuple[str, ...]] = set()
    out = []
    for it in items:
        words = it.words
        n = 2
        while words in seen:
            words = (*it.words[:-1], f"{it.words[-1]}{n}")
            n += 1
        seen.add(words)
        members = tuple(dict.fromkeys(it.members))
        out.append(_Item(it.kind, words, members))
    return out


class _Body:
    """Statement generator shared by the languages (each renders its own syntax)."""

    def __init__(self, rng: random.Random, callees: list[str]) -> None:
        self.rng = rng
        self.callees = callees or ["identity"]

    def var(self) -> str:
        return self.rng.choice(WORDS)

    def callee(self) -> str:
        return self.rng.choice(self.callees)

    def count(self) -> int:
        return self.rng.choice((1, 2, 3, 3, 4, 5, 6, 8, 10, 14, 18))


def _py_file(plan: _Plan, f: _File, rng: random.Random) -> str:
    items = plan.items(f.index)
    mod = f.path[:-3].replace("/", ".").removesuffix(".__init__")
    kinds = {it.kind for it in items}
    out = [f'"""{_pascal(*mod.split(".")[-1].split("_"))} — {mod}.\n\nGenerated by citegraph.bench.monorepo.\n"""\n',
           "from __future__ import annotations\n\n", "import enum\n" if "enum" in kinds else "",
           "import logging\n", "from typing import Protocol\n" if "interface" in kinds else ""]
    callees = [_snake(*it.words) for it in items if it.kind == "function"]
    for j in plan.neighbours(f.index, rng, rng.randint(0, 5)):
        names = [it for it in plan.items(j) if it.kind in ("function", "class", "constant")]
        if names:
            picked = rng.sample(names, min(len(names), rng.randint(1, 3)))
            other = plan.files[j].path[:-3].replace("/", ".").removesuffix(".__init__")
            rendered = sorted({_py_name(it) for it in picked})
            out.append(f"from {other} import {', '.join(rendered)}\n")
            callees += [_py_name(it) for it in picked if it.kind == "function"]
    out.append("\nlog = logging.getLogger(__name__)\n")
    body = _Body(rng, callees)
    for it in items:
        out.append("\n\n" if it.kind != "constant" else "\n")
        if it.kind == "constant":
            out.append(f"{_py_name(it)} = {rng.randint(1, 5000)}\n")
        elif it.kind == "function":
            out.append(_py_func(body, _py_name(it), 0, method=False))
        elif it.kind == "enum":
            out.append(f"class {_py_name(it)}(enum.Enum):\n" + "".join(
                f"    {w.upper()} = {i}\n" for i, w in enumerate(rng.sample(WORDS, rng.randint(2, 6)), 1)))
        else:
            base = "" if it.kind == "class" else "(Protocol)"
            out.append(f"class {_py_name(it)}{base}:\n    \"\"\"{' '.join(it.words).capitalize()}.\"\"\"\n")
            if it.kind == "class":
                out.append(f"\n    def __init__(self, {body.var()}_id: int, limit: int = {rng.randint(1, 99)}) -> None:\n"
                           f"        self.limit = limit\n        self.items: list[int] = []\n")
            for m in it.members:
                out.append("\n")
                if it.kind == "interface":
                    out.append(f"    def {_snake(*m)}(self, value: int) -> int: ...\n")
                else:
                    if rng.random() < 0.15:
                        out.append("    @property\n")
                        out.append(f"    def {_snake(*m)}(self) -> int:\n        return len(self.items) + self.limit\n")
                    else:
                        out.append(_py_func(body, _snake(*m), 1, method=True))
    return "".join(out)


def _py_name(it: _Item) -> str:
    if it.kind == "constant":
        return _snake(*it.words).upper()
    if it.kind == "function":
        return _snake(*it.words)
    return _pascal(*it.words)


def _py_func(b: _Body, name: str, depth: int, method: bool) -> str:
    ind = "    " * depth
    args = "self, " if method else ""
    v = b.var()
    lines = [f"{ind}def {name}({args}{v}: int, retries: int = 3) -> int:\n",
             f'{ind}    """{name.replace("_", " ").capitalize()}."""\n', f"{ind}    total = {v}\n"]
    for _ in range(b.count()):
        r = b.rng.random()
        if r < 0.35:
            lines.append(f"{ind}    total += {b.callee()}(total)\n")
        elif r < 0.55:
            lines.append(f"{ind}    if total > {b.rng.randint(2, 900)}:\n{ind}        log.debug(\"{name}: %s\", total)\n"
                         f"{ind}        total -= retries\n")
        elif r < 0.75:
            lines.append(f"{ind}    for i in range(retries):\n{ind}        total = total * 31 + i\n")
        elif r < 0.9:
            m = b.var()
            lines.append(f"{ind}    {m}_map = {{\"{b.var()}\": total, \"{b.var()}\": {b.rng.randint(0, 99)}}}\n"
                         f"{ind}    total += len({m}_map)\n")
        else:
            lines.append(f"{ind}    try:\n{ind}        total //= max(1, retries)\n{ind}    except ZeroDivisionError:\n"
                         f"{ind}        log.warning(\"unreachable\")\n")
    lines.append(f"{ind}    return total\n")
    return "".join(lines)


def _ts_file(plan: _Plan, f: _File, rng: random.Random) -> str:
    items = plan.items(f.index)
    out = [f"// {f.path}\n// Generated by citegraph.bench.monorepo.\n\n"]
    callees = [_camel(*it.words) for it in items if it.kind == "function"]
    here = os.path.dirname(f.path)
    for j in plan.neighbours(f.index, rng, rng.randint(0, 5)):
        names = [it for it in plan.items(j) if it.kind in ("function", "class", "constant")]
        if names:
            picked = rng.sample(names, min(len(names), rng.randint(1, 3)))
            rel = os.path.relpath(plan.files[j].path[:-3], here)
            rel = rel if rel.startswith(".") else "./" + rel
            out.append(f"import {{ {', '.join(sorted({_ts_name(it) for it in picked}))} }} from \"{rel}\";\n")
            callees += [_ts_name(it) for it in picked if it.kind == "function"]
    b = _Body(rng, callees)
    for it in items:
        out.append("\n")
        name = _ts_name(it)
        if it.kind == "constant":
            out.append(f"export const {name} = {rng.randint(1, 5000)};\n")
        elif it.kind == "function":
            if rng.random() < 0.2:
                out.append(f"export const {name} = (value: number): number => {b.callee()}(value) + {rng.randint(1, 9)};\n")
            else:
                out.append(f"export function {name}(value: number, retries = 3): number {{\n{_c_body(b, 'ts', 1)}}}\n")
        elif it.kind == "enum":
            out.append(f"export enum {name} {{\n" + "".join(
                f"  {_pascal(w)} = {i},\n" for i, w in enumerate(rng.sample(WORDS, rng.randint(2, 6)), 1)) + "}\n")
        elif it.kind == "interface":
            out.append(f"export interface {name} {{\n" + "".join(
                f"  {_camel(*m)}(value: number): number;\n" for m in it.members) + "}\n")
            if rng.random() < 0.4:
                out.append(f"\nexport type {name}Map = Record<string, {name}>;\n")
        else:
            out.append(f"export class {name} {{\n  private items: number[] = [];\n\n"
                       f"  constructor(private readonly limit: number = {rng.randint(1, 99)}) {{}}\n")
            for m in it.members:
                out.append(f"\n  {_camel(*m)}(value: number, retries = 3): number {{\n{_c_body(b, 'ts', 2)}  }}\n")
            out.append("}\n")
    return "".join(out)


def _ts_name(it: _Item) -> str:
    if it.kind == "constant":
        return _snake(*it.words).upper()
    if it.kind == "function":
        return _camel(*it.words)
    return _pascal(*it.words)


def _c_body(b: _Body, lang: str, depth: int) -> str:
    """Statements for the C-like languages (TypeScript, Go, Java, Rust)."""
    unit = "  " if lang == "ts" else "\t" if lang == "go" else "    "
    ind = unit * depth
    decl = {"ts": "let total = value;", "java": "int total = value;", "go": "total := value",
            "rust": "let mut total = value;"}[lang]
    lines = [f"{ind}{decl}\n"]
    semi = "" if lang == "go" else ";"
    for _ in range(b.count()):
        r = b.rng.random()
        c = b.callee()
        if r < 0.4:
            lines.append(f"{ind}total += {c}(total){semi}\n")
        elif r < 0.6:
            cond = f"total > {b.rng.randint(2, 900)}"
            cond = cond if lang in ("go", "rust") else f"({cond})"
            lines.append(f"{ind}if {cond} {{\n{ind}{unit}total -= retries{semi}\n{ind}}}\n")
        elif r < 0.85:
            loop = {"ts": "for (let i = 0; i < retries; i++)", "java": "for (int i = 0; i < retries; i++)",
                    "go": "for i := 0; i < retries; i++", "rust": "for i in 0..retries"}[lang]
            lines.append(f"{ind}{loop} {{\n{ind}{unit}total = total * 31 + i{semi}\n{ind}}}\n")
        else:
            s = f"\"{b.var()} {b.var()}\""
            stmt = {"ts": f"console.debug({s}, total);", "java": f"LOG.fine({s} + total);",
                    "go": f"log.Printf({s[:-1]} %d\", total)", "rust": f"log::debug!({s[:-1]} {{}}\", total);"}[lang]
            lines.append(f"{ind}{stmt}\n")
    lines.append(f"{ind}total\n" if lang == "rust" else f"{ind}return total{semi}\n")
    return "".join(lines)


def _go_file(plan: _Plan, f: _File, rng: random.Random) -> str:
    items = plan.items(f.index)
    pkg = os.path.basename(os.path.dirname(f.path)).replace("-", "")
    imports = ['"fmt"', '"log"']
    callees = [_go_name(it) for it in items if it.kind == "function"]
    dirs = {os.path.dirname(f.path)}
    for j in plan.neighbours(f.index, rng, rng.randint(0, 4)):
        other = os.path.dirname(plan.files[j].path)
        funcs = [it for it in plan.items(j) if it.kind == "function"]
        if funcs and other not in dirs:
            dirs.add(other)
            alias = f"{os.path.basename(other).replace('-', '')}{len(imports)}"
            imports.append(f'{alias} "acme.dev/mono/{other}"')
            callees.append(f"{alias}.{_go_name(rng.choice(funcs))}")
    out = [f"// Package {pkg}: {f.path}.\n// Generated by citegraph.bench.monorepo.\npackage {pkg}\n\n",
           "import (\n" + "".join(f"\t{i}\n" for i in imports) + ")\n\nvar _ = fmt.Sprint\n"]
    b = _Body(rng, callees)
    for it in items:
        out.append("\n")
        name = _go_name(it)
        if it.kind == "constant":
            out.append(f"const {name} = {rng.randint(1, 5000)}\n")
        elif it.kind == "function":
            out.append(f"// {name} {' '.join(it.words)}s.\nfunc {name}(value int) int {{\n\tretries := 3\n"
                       f"{_c_body(b, 'go', 1)}}}\n")
        elif it.kind == "enum":
            out.append(f"type {name} int\n\nconst (\n" + "".join(
                f"\t{name}{_pascal(w)}{' ' + name + ' = iota' if i == 0 else ''}\n"
                for i, w in enumerate(rng.sample(WORDS, rng.randint(2, 6)))) + ")\n")
        elif it.kind == "interface":
            out.append(f"type {name} interface {{\n" + "".join(
                f"\t{_pascal(*m)}(value int) int\n" for m in it.members) + "}\n")
        else:
            recv = name[0].lower()
            out.append(f"type {name} struct {{\n\tlimit int\n\titems []int\n\t{_camel(b.var())} string\n}}\n")
            out.append(f"\nfunc New{name}(limit int) *{name} {{\n\treturn &{name}{{limit: limit}}\n}}\n")
            for m in it.members:
                out.append(f"\nfunc ({recv} *{name}) {_pascal(*m)}(value int) int {{\n\tretries := {recv}.limit\n"
                           f"{_c_body(b, 'go', 1)}}}\n")
    return "".join(out)


def _go_name(it: _Item) -> str:
    return _pascal(*it.words)


def _rust_file(plan: _Plan, f: _File, rng: random.Random) -> str:
    items = plan.items(f.index)
    out = [f"//! {f.path}\n//! Generated by citegraph.bench.monorepo.\n\n", "use std::collections::HashMap;\n"]
    callees = [_snake(*it.words) for it in items if it.kind == "function"]
    for j in plan.neighbours(f.index, rng, rng.randint(0, 4)):
        funcs = [it for it in plan.items(j) if it.kind == "function"]
        if funcs:
            mod = "::".join(p for p in plan.files[j].path.split("/src/", 1)[-1][:-3].split("/") if p not in ("lib", "mod"))
            it = rng.choice(funcs)
            if mod:
                out.append(f"use crate::{mod}::{_snake(*it.words)};\n")
                callees.append(_snake(*it.words))
    b = _Body(rng, callees)
    for it in items:
        out.append("\n")
        name = _pascal(*it.words)
        if it.kind == "constant":
            out.append(f"pub const {_snake(*it.words).upper()}: i64 = {rng.randint(1, 5000)};\n")
        elif it.kind == "function":
            out.append(f"/// {' '.join(it.words).capitalize()}.\npub fn {_snake(*it.words)}(value: i64) -> i64 {{\n"
                       f"    let retries = 3;\n{_c_body(b, 'rust', 1)}}}\n")
        elif it.kind == "enum":
            out.append(f"#[derive(Debug, Clone, Copy, PartialEq, Eq)]\npub enum {name} {{\n" + "".join(
                f"    {_pascal(w)},\n" for w in rng.sample(WORDS, rng.randint(2, 6))) + "}\n")
        elif it.kind == "interface":
            out.append(f"pub trait {name} {{\n" + "".join(
                f"    fn {_snake(*m)}(&self, value: i64) -> i64;\n" for m in it.members) + "}\n")
        else:
            out.append(f"#[derive(Debug, Default)]\npub struct {name} {{\n    limit: i64,\n"
                       f"    items: HashMap<String, i64>,\n}}\n\nimpl {name} {{\n"
                       f"    pub fn new(limit: i64) -> Self {{\n        Self {{ limit, items: HashMap::new() }}\n    }}\n")
            for m in it.members:
                out.append(f"\n    pub fn {_snake(*m)}(&self, value: i64) -> i64 {{\n        let retries = self.limit;\n"
                           + _c_body(b, "rust", 2) + "    }\n")
            out.append("}\n")
    if rng.random() < 0.25 and callees:
        out.append(f"\n#[cfg(test)]\nmod tests {{\n    use super::*;\n\n    #[test]\n    fn {callees[0]}_works() {{\n"
                   f"        assert!({callees[0]}(1) != 0 || true);\n    }}\n}}\n")
    return "".join(out)


def _java_file(plan: _Plan, f: _File, rng: random.Random) -> str:
    items = plan.items(f.index)
    cls = os.path.basename(f.path)[:-5]
    pkg = f.path.split("/src/main/java/", 1)[-1].rsplit("/", 1)[0].replace("/", ".")
    out = [f"// {f.path}\n// Generated by citegraph.bench.monorepo.\npackage {pkg};\n\n",
           "import java.util.ArrayList;\nimport java.util.List;\nimport java.util.logging.Logger;\n"]
    callees = [_camel(*it.words) for it in items if it.kind == "function"]
    for j in plan.neighbours(f.index, rng, rng.randint(0, 4)):
        other = plan.files[j].path.split("/src/main/java/", 1)[-1][:-5].replace("/", ".")
        out.append(f"import {other};\n")
    b = _Body(rng, callees)
    out.append(f"\n/** {cls}. */\npublic final class {cls} {{\n"
               f"    private static final Logger LOG = Logger.getLogger({cls}.class.getName());\n")
    for it in items:
        out.append("\n")
        name = _pascal(*it.words)
        if it.kind == "constant":
            out.append(f"    public static final int {_snake(*it.words).upper()} = {rng.randint(1, 5000)};\n")
        elif it.kind == "function":
            out.append(f"    /** {' '.join(it.words).capitalize()}. */\n    public static int {_camel(*it.words)}(int value) {{\n"
                       f"        int retries = 3;\n{_c_body(b, 'java', 2)}    }}\n")
        elif it.kind == "enum":
            out.append(f"    public enum {name} {{\n        " + ", ".join(
                w.upper() for w in rng.sample(WORDS, rng.randint(2, 6))) + "\n    }\n")
        elif it.kind == "interface":
            out.append(f"    public interface {name} {{\n" + "".join(
                f"        int {_camel(*m)}(int value);\n" for m in it.members) + "    }\n")
        else:
            out.append(f"    public static class {name} {{\n        private final int limit;\n"
                       f"        private final List<Integer> items = new ArrayList<>();\n\n"
                       f"        public {name}(int limit) {{\n            this.limit = limit;\n        }}\n")
            for m in it.members:
                out.append(f"\n        public int {_camel(*m)}(int value) {{\n            int retries = this.limit;\n"
                           + _c_body(b, "java", 3) + "        }\n")
            out.append("    }\n")
    if not callees:
        out.append("\n    private static int identity(int value) {\n        return value;\n    }\n")
    out.append("}\n")
    return "".join(out)


def _text_file(plan: _Plan, f: _File, rng: random.Random) -> str:
    base = os.path.basename(f.path)
    title = os.path.dirname(f.path)
    if base.endswith(".json"):
        return json.dumps({"name": title, "version": f"{rng.randint(0, 9)}.{rng.randint(0, 40)}.0",
                           "features": rng.sample(WORDS, 4)}, indent=2) + "\n"
    if base.endswith(".yaml"):
        return f"# {f.path}\nname: {title}\n" + "".join(f"{w}: {rng.randint(1, 99)}\n" for w in rng.sample(WORDS, 5))
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120)))
    return f"# {title}\n\n{words}\n"


_RENDER = {"python": _py_file, "typescript": _ts_file, "go": _go_file, "rust": _rust_file,
           "java": _java_file, "text": _text_file}


def synthetic_files(files: int, seed: int) -> Iterator[tuple[str, bytes, str]]:
    """(path, content, language) of a synthetic repository, deterministic from ``seed``."""
    plan = _Plan(files, seed)
    for f in plan.files:
        rng = random.Random(f"{seed}:body:{f.index}")
        yield f.path, _RENDER[f.language](plan, f, rng).encode(), f.language


# --- entry points --------------------------------------------------------------------------

def generate_repo(dest: str | os.PathLike[str], *, source: str | os.PathLike[str] | None = None,
                  rev: str = "HEAD", copies: int = 23, files: int = 20_000, seed: int = 0,
                  checkout: bool = True, branch: str = "main", order: str = "copy") -> Generated:
    """Generate a synthetic monorepo at ``dest`` (a new or empty directory).

    With ``source``: ``copies`` copies of that repository's tree at ``rev``; else ``files``
    generated sources from ``seed``. ``order`` (copies mode) is the blob order of the
    stream: "copy" (copy by copy, as a real repository packs: few deltas) or "file" (the
    copies of one file in a row: fast-import deltifies them, a far smaller pack, deep
    delta chains)."""
    dest = Path(dest).absolute()
    if source is None and files < 1:
        raise GenerateError(f"--files must be at least 1, got {files}")
    if source is not None and copies < 1:
        raise GenerateError(f"--copies must be at least 1, got {copies}")
    if order not in ("copy", "file"):
        raise GenerateError(f"--order must be copy or file, got {order!r}")
    src_commit = None
    entries: list[_Entry] = []
    missing = 0
    if source is not None:
        src_commit, entries, missing = _source_tree(Path(source), rev)  # before creating dest
    _init_dest(dest)
    uniq = _Unique()
    langs: dict[str, int] = {}
    t0 = time.perf_counter()
    if source is not None:
        message = f"synthetic monorepo: {copies} copies of {src_commit}"
        params: dict[str, Any] = {"source": str(Path(source).absolute()), "rev": rev, "source_commit": src_commit,
                                  "copies": copies, "order": order, "missing_source_blobs_skipped": missing}
    else:
        message = f"synthetic monorepo: {files} generated files, seed {seed}"
        params = {"files": files, "seed": seed}
    fi = _FastImport(dest, branch, message)
    try:
        if source is not None:
            _emit_copies(fi, uniq, Path(source), entries, copies, order, langs)
        else:
            for path, data, lang in synthetic_files(files, seed):
                fi.file(path, uniq.make(data))
                langs[lang] = langs.get(lang, 0) + 1
    except BaseException:
        fi.abort()
        raise
    fi.close()
    commit = _git(dest, "rev-parse", f"refs/heads/{branch}").decode().strip()
    gen_s = time.perf_counter() - t0
    co_s = _checkout(dest, branch) if checkout else None
    if not checkout:
        _git(dest, "symbolic-ref", "HEAD", f"refs/heads/{branch}")
    res = Generated(dest, "copies" if source is not None else "synthetic", branch, commit, fi.files,
                    uniq.total_bytes, len(uniq.seen), gen_s, co_s, params, dict(sorted(langs.items())))
    gitdir = Path(_git(dest, "rev-parse", "--absolute-git-dir").decode().strip())
    (gitdir / SUMMARY_FILE).write_text(json.dumps(res.to_json(), indent=2) + "\n")
    return res


def generate(dest: str | os.PathLike[str], **kwargs: Any) -> Path:
    """Generate (see ``generate_repo``) and return the repository's path."""
    return generate_repo(dest, **kwargs).path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m citegraph.bench.monorepo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dest", help="new (or empty) directory for the repository")
    ap.add_argument("--source", help="copies mode: a git directory or worktree to copy")
    ap.add_argument("--rev", default="HEAD", help="revision of --source (default HEAD)")
    ap.add_argument("--copies", type=int, default=23, help="copies mode: number of copies (default 23)")
    ap.add_argument("--files", type=int, default=20_000, help="synthetic mode: number of files (default 20000)")
    ap.add_argument("--seed", type=int, default=0, help="synthetic mode: seed (default 0)")
    ap.add_argument("--order", choices=("copy", "file"), default="copy",
                    help="copies mode: stream order of blobs (see generate_repo)")
    ap.add_argument("--no-checkout", dest="checkout", action="store_false", help="do not check out the worktree")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    try:
        res = generate_repo(args.dest, source=args.source, rev=args.rev, copies=args.copies, files=args.files,
                            seed=args.seed, checkout=args.checkout, order=args.order)
    except GenerateError as exc:
        print(f"monorepo: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        print("monorepo: interrupted; remove the partial repository before retrying", file=sys.stderr)
        raise SystemExit(130) from None
    if args.json:
        print(json.dumps(res.to_json()))
        return
    co = f", checkout {res.checkout_seconds:.1f} s" if res.checkout_seconds is not None else " (not checked out)"
    print(f"{res.path}: {res.files} files, {res.bytes / 1e6:.1f} MB, {res.unique_blobs} unique blobs, "
          f"commit {res.commit[:12]} on {res.branch}; generated in {res.generate_seconds:.1f} s{co}")


if __name__ == "__main__":
    main()
