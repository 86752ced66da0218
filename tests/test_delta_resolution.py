"""A delta's edge resolution in O(change) (graph/delta_resolution.py) equals a clean
build's, in every language's scoping: Python and TypeScript imports, Rust imports of an
item, Go and Java packages (same directory), names unique in the repository or not, a definition moving between
files. Each delta here keeps its paths, so the O(change) path must be the one that ran
(its statements seen through the injected hook), and what readers see must equal a clean
build of the same state.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from gitutil import GitRepo
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_incremental import snapshot_tables

from citegraph.graph.build_hooks import BuildHooks
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home

POOLS = {
    ".py": (
        "def f():\n    return 1\n",
        "from lib.c import g\n\n\ndef f():\n    return g()\n",
        "class K:\n    def m(self):\n        return self.h()\n\n    def h(self):\n        return f()\n",
        "import app.a\n\n\ndef g():\n    return h()\n",
        "def g():\n    return 2\n\n\ndef h():\n    return g()\n",
        "",
    ),
    ".go": (
        "package svc\n\nfunc F() int {\n\treturn G()\n}\n",
        "package svc\n\nfunc G() int {\n\treturn 1\n}\n",
        'package svc\n\nimport "other"\n\nfunc H() int {\n\treturn F() + Z()\n}\n',
        "package svc\n\ntype T struct{}\n\nfunc (t T) G() int {\n\treturn F()\n}\n",
        "package other\n\nfunc Z() int {\n\treturn G()\n}\n",
    ),
    ".java": (
        "package com.acme;\n\npublic class P {\n  int run() { return Q.go(); }\n}\n",
        "package com.acme;\n\npublic class Q {\n  static int go() { return 1; }\n}\n",
        "package com.acme;\n\nimport com.acme.P;\n\npublic class Q {\n  int go() { return new P().run(); }\n}\n",
        "package com.acme;\n\npublic class P {\n  static int go() { return 2; }\n}\n",
    ),
    ".ts": (
        "export function f(): number {\n  return g();\n}\n",
        "import { f } from './m';\n\nexport function g(): number {\n  return f();\n}\n",
        "export function g(): number {\n  return 1;\n}\n",
        "import { g } from './n';\n\nexport class C {\n  run(): number { return g() + f(); }\n}\n",
    ),
    # Rust imports name an item inside the file: the import edge resolves to it.
    ".rs": (
        "mod util;\nuse crate::util::helper;\n\nfn main() {\n    helper();\n}\n",
        "pub fn helper() -> i32 {\n    1\n}\n",
        "pub fn other() -> i32 {\n    2\n}\n",
    ),
}
PATHS = ("app/a.py", "app/b.py", "lib/c.py", "svc/x.go", "svc/y.go", "other/z.go", "com/acme/P.java",
         "com/acme/Q.java", "web/m.ts", "web/n.ts", "rs/src/main.rs", "rs/src/util.rs")


def pool(path: str) -> tuple[str, ...]:
    return POOLS[Path(path).suffix]


def content(path: str, pick: int) -> str:
    return pool(path)[pick % len(pool(path))]


# A step rewrites one or two paths (never adds or removes one), then commits or leaves the
# change in the worktree.
step = st.tuples(st.integers(0, len(PATHS) - 1), st.integers(0, 5), st.integers(0, len(PATHS) - 1),
                 st.integers(0, 5), st.booleans(), st.booleans())


@settings(max_examples=8, deadline=None)
# A definition moving between files of a Go package, then a name left unique when its
# other definition goes (the key's "one left" lookup).
@example(initial=[0, 1, 2, 0, 1, 4, 0, 1, 0, 1, 0, 1],
         steps=[(3, 1, 4, 1, True, True), (4, 0, 3, 3, False, True)])
# The item a Rust import names goes from its file, and comes back.
@example(initial=[0, 1, 2, 0, 1, 4, 0, 1, 0, 1, 0, 1],
         steps=[(11, 2, 0, 0, False, True), (11, 1, 0, 0, False, False)])
@example(initial=[4, 4, 3, 1, 3, 4, 3, 1, 2, 3, 0, 2],
         steps=[(0, 0, 1, 0, True, True), (2, 4, 2, 4, False, True), (8, 1, 9, 0, True, False)])
@given(initial=st.lists(st.integers(0, 5), min_size=len(PATHS), max_size=len(PATHS)),
       steps=st.lists(step, min_size=1, max_size=4))
def test_delta_resolution_equals_clean_build(initial, steps):
    with tempfile.TemporaryDirectory(prefix="cg-delta-") as tmp:
        root = Path(tmp)
        g = GitRepo(root / "repo")
        for path, pick in zip(PATHS, initial, strict=True):
            g.write(path, content(path, pick))
        g.commit("initial")
        home = Home.open(root / "inc")
        build_snapshot(g.root, home, jobs=1)
        log: list[str] = []
        for i, (p1, c1, p2, c2, both, commit) in enumerate(steps):
            changes = [(PATHS[p1], c1)] + ([(PATHS[p2], c2)] if both else [])
            for path, pick in changes:
                g.write(path, content(path, pick))
            if commit:
                g.commit(f"step {i}")
            log.append(f"{changes} {'commit' if commit else 'worktree'}")
            labels: list[str] = []
            inc = build_snapshot(g.root, home, jobs=1, hooks=BuildHooks(statement=lambda label, _q, seen=labels:
                                                                         seen.append(label)))
            clean_home = Home.open(root / f"clean-{i}")
            clean = build_snapshot(g.root, clean_home, jobs=1)
            assert inc.snapshot_id == clean.snapshot_id, log
            entry = home.repo(inc.repository_id).entry(inc.snapshot_id)
            if not inc.reused and entry["layout"] == "delta":
                assert "affected edges" in labels, ("the O(change) path did not run", log)
            t_inc, t_clean = snapshot_tables(home, inc), snapshot_tables(clean_home, clean)
            for table in ("symbols", "resolved_edges", "import_targets"):
                assert t_inc[table] == t_clean[table], (table, log)


def test_go_package_edges_resolve_through_a_changed_neighbour(tmp_path):
    """A call in one Go file resolves at the package level to a function of another file of
    its directory; when that function moves to a third file of the package, the caller's
    unchanged file is re-resolved to it (the package neighbours of a changed Go file)."""
    g = GitRepo(tmp_path / "repo")
    g.write("svc/x.go", "package svc\n\nfunc F() int {\n\treturn G()\n}\n")
    g.write("svc/y.go", "package svc\n\nfunc G() int {\n\treturn 1\n}\n")
    g.write("svc/w.go", "package svc\n\nfunc W() int {\n\treturn 0\n}\n")
    g.write("other/g.go", "package other\n\nfunc G() int {\n\treturn 2\n}\n")
    g.commit("c1")
    home = Home.open(tmp_path / "home")
    build_snapshot(g.root, home, jobs=1)
    g.write("svc/y.go", "package svc\n\nfunc Y() int {\n\treturn 1\n}\n")
    g.write("svc/w.go", "package svc\n\nfunc G() int {\n\treturn 0\n}\n")
    g.commit("c2")
    labels: list[str] = []
    res = build_snapshot(g.root, home, jobs=1, hooks=BuildHooks(statement=lambda label, _q: labels.append(label)))
    assert "affected edges" in labels
    rows = snapshot_tables(home, res)["resolved_edges"]
    call = [r for r in rows if r[0] == "svc/x.go" and r[3] == "G"]
    assert len(call) == 1 and call[0][6] == "svc/w.go" and call[0][7] == "resolved" and call[0][8] == "package", call
