"""Many small repositories with memories, for batch validation (issue 24; bench/batch_bench.py,
tests/test_batch_validate.py).

    python -m citegraph.bench.batch_repos DEST --home HOME --repos 20 --memories 100 [--seed 0]

Each repository (its own ``origin``, so a remote identity) gets six Python modules and a
README at a first commit, which is indexed; its memories are captured there with real
``capture`` (one to three citations each: mostly symbols, some spans, some files) and
stored; then a second commit changes the code the way work does — bodies edited, a module
moved, functions deleted, lines inserted above others, a function renamed, the README
edited — and is indexed too. Validating the memories at the second commit then gives a
realistic mix of exact, relocated, changed and deleted citations. Deterministic from the
seed (fixed commit dates: the same parameters give the same commit ids).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.memory.lifecycle.store import MemoryStore, bulk_insert
from citegraph.memory.lifecycle.transactions import one_transaction
from citegraph.validator.capture import capture
from citegraph.validator.refs import MAX_CITATIONS

MODULES = 6
FUNCTIONS = 8
PROJECTS = ("payments", "search", "infra")
GIT_ENV = {"GIT_AUTHOR_NAME": "citegraph bench", "GIT_AUTHOR_EMAIL": "bench@citegraph.invalid",
           "GIT_COMMITTER_NAME": "citegraph bench", "GIT_COMMITTER_EMAIL": "bench@citegraph.invalid",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null"}
DATES = ("1764547200 +0000", "1764633600 +0000")


@dataclass
class BatchRepo:
    path: str
    origin: str
    capture_commit: str
    checked_commit: str
    memories: int


def _git(cwd: Path, *args: str, date: str | None = None) -> str:
    env = {**os.environ, **GIT_ENV}
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _function(i: int, j: int, name: str | None = None, body: str = "") -> str:
    name = name or f"f{i}_{j}"
    return (f"def {name}(value, scale={j + 1}):\n"
            f'    """Step {j} of stage {i}."""\n'
            f"    total = value * scale{body}\n"
            f"    return total + {i * FUNCTIONS + j}\n\n\n")


def _module(i: int, skip: set[int] = frozenset(), edited: set[int] = frozenset(),
            renamed: dict[int, str] | None = None, header: str = "") -> str:
    out = [header, f'"""Stage {i} of the pipeline."""\n\n\n']
    for j in range(FUNCTIONS):
        if j in skip:
            continue
        out.append(_function(i, j, (renamed or {}).get(j), " + 1" if j in edited else ""))
    out.append(f"class Stage{i}:\n    def run(self, value):\n        return f{i}_{FUNCTIONS - 1}(value)\n\n"
               f"    def name(self):\n        return 'stage{i}'\n")
    return "".join(out)


def _readme(n: int, edited: bool = False) -> str:
    lines = [f"# Repository {n}", ""] + [f"Line {k}: the pipeline runs stage {k % MODULES}." for k in range(20)]
    if edited:
        lines[7] = "Line 5: the pipeline now skips stage 5."
    return "\n".join(lines) + "\n"


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def _refs(rng: random.Random) -> list[str]:
    """One to three refs: mostly symbols, some spans, some whole files."""
    refs: list[str] = []
    for _ in range(rng.choice((1, 1, 2, 2, 3))):
        i, j = rng.randrange(MODULES), rng.randrange(FUNCTIONS)
        kind = rng.random()
        if kind < 0.7:
            refs.append(f"pkg/mod{i}.py::f{i}_{j}" if rng.random() < 0.85 else f"pkg/mod{i}.py::Stage{i}.run")
        elif kind < 0.9:
            start = 4 + 6 * j  # the function's def line (module docstring: 3 lines)
            refs.append(f"pkg/mod{i}.py#L{start}-L{start + 3}")
        else:
            refs.append("README.md" if rng.random() < 0.5 else f"pkg/mod{i}.py")
    return list(dict.fromkeys(refs))


def make_repo(home: Home, root: Path, n: int, memories: int, seed: int) -> BatchRepo:
    """One repository: first commit indexed, memories captured there, second commit indexed."""
    rng = random.Random(seed * 1_000_003 + n)
    origin = f"https://example.com/bench/repo-{n:05d}.git"
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "remote", "add", "origin", origin)
    _write(root, {f"pkg/mod{i}.py": _module(i) for i in range(MODULES)} | {"README.md": _readme(n)})
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "first", date=DATES[0])
    c1 = _git(root, "rev-parse", "HEAD")
    build_snapshot(root, home)
    wanted = [_refs(rng) for _ in range(memories)]
    distinct = list(dict.fromkeys(r for refs in wanted for r in refs))
    by_ref = {}
    for k in range(0, len(distinct), MAX_CITATIONS):
        chunk = distinct[k:k + MAX_CITATIONS]
        by_ref.update(zip(chunk, capture(home, root, chunk), strict=True))
    items = [{"text": f"repository {n} memory {k}: stage behaviour the code must keep",
              "project": PROJECTS[k % len(PROJECTS)], "topic": f"r{n:05d}-m{k:03d}",
              "receipts": list({by_ref[r].id: by_ref[r] for r in refs}.values())} for k, refs in enumerate(wanted)]
    with MemoryStore.open(home) as store, one_transaction(store) as ms:
        bulk_insert(ms, items)
    # The second commit: what work does to code between a capture and a check.
    _write(root, {"pkg/mod1.py": _module(1, edited={0, 1}),
                  "pkg/mod3.py": _module(3, skip={0, 1}),
                  "pkg/mod4.py": _module(4, header="import os\nimport sys\n\n"),
                  "pkg/mod5.py": _module(5, renamed={0: "g5_0"}),
                  "README.md": _readme(n, edited=True)})
    _git(root, "mv", "pkg/mod2.py", "pkg/moved_mod2.py")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "second", date=DATES[1])
    c2 = _git(root, "rev-parse", "HEAD")
    build_snapshot(root, home)
    return BatchRepo(str(root), origin, c1, c2, memories)


def generate(home: Home, dest: Path, repos: int, memories: int, seed: int = 0,
             on_repo: Callable[[int], None] | None = None) -> list[BatchRepo]:
    out = []
    for n in range(repos):
        out.append(make_repo(home, dest / f"repo-{n:05d}", n, memories, seed))
        if on_repo:
            on_repo(n + 1)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m citegraph.bench.batch_repos", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dest", help="new directory for the repositories")
    ap.add_argument("--home", required=True, help="the data home to index them and store the memories in")
    ap.add_argument("--repos", type=int, default=20)
    ap.add_argument("--memories", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    dest = Path(args.dest)
    if dest.exists() and any(dest.iterdir()):
        sys.exit(f"{dest}: exists and is not empty")
    made = generate(Home.open(args.home), dest, args.repos, args.memories, args.seed,
                    on_repo=lambda k: print(f"\r{k}/{args.repos}", end="", file=sys.stderr))
    print(file=sys.stderr)
    print(json.dumps([asdict(r) for r in made]))


if __name__ == "__main__":
    main()
