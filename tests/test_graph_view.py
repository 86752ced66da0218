"""graph/graph_view.py reads a symbol's edges by its file (the resolved_edges_path index):
what it answers must equal the definition read off every row — the edges whose source is
the symbol or a symbol nested in it, to targets outside it — on a full snapshot and on a
delta layered over one, for generated programs of nested classes, methods and calls."""

from __future__ import annotations

import tempfile
from pathlib import Path

from gitutil import GitRepo
from hypothesis import given, settings
from hypothesis import strategies as st

from citegraph.graph import graph_view
from citegraph.graph.build_target import resolve_target
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home

NAMES = ["alpha", "beta", "gamma", "delta", "omega"]
MODULES = ["pkg/a.py", "pkg/b.py", "lib/c.py"]

# a function: (name index, [callee name indexes]); a class: (name index, [methods])
func = st.tuples(st.integers(0, 4), st.lists(st.integers(0, 4), max_size=3))
klass = st.tuples(st.integers(0, 4), st.lists(func, min_size=1, max_size=3))
module = st.tuples(st.lists(func, max_size=3), st.lists(klass, max_size=2))


def source(mod: tuple[list, list], imports: list[str]) -> str:
    out = [f"from {m[:-3].replace('/', '.')} import *" for m in imports]
    for name, calls in mod[0]:
        body = "\n".join(f"    {NAMES[c]}()" for c in calls) or "    pass"
        out.append(f"\n\ndef {NAMES[name]}():\n{body}\n")
    for name, methods in mod[1]:
        out.append(f"\n\nclass {NAMES[name].title()}:")
        for m, calls in methods:
            body = "\n".join(f"        {NAMES[c]}()" for c in calls) or "        pass"
            out.append(f"    def {NAMES[m]}(self):\n{body}\n")
    return "\n".join(out) + "\n"


def reference(snap: Snapshot, handles: list[str], direction: str) -> dict[str, list[tuple[str, str, str, int]]]:
    """The definition, from every row (no lookup by file)."""
    spans = {h: (p, s, e) for h, p, s, e in snap.query("SELECT handle, path, start_byte, end_byte FROM symbols")}
    edges = snap.query("SELECT source_handle, target_handle, kind, tier, line FROM resolved_edges "
                       "WHERE tier IN ('resolved', 'name-only') AND kind <> 'imports'")

    def inside(x: str | None, root: str) -> bool:
        a, b = spans.get(x), spans[root]
        return a is not None and a[0] == b[0] and a[1] >= b[1] and a[2] <= b[2]

    rows = []
    for root in handles:
        if root not in spans:
            continue
        for src, tgt, kind, tier, line in edges:
            if tgt not in spans or src not in spans:
                continue
            if direction == "out" and inside(src, root) and not inside(tgt, root):
                rows.append((root, tgt, kind, tier, line))
            if direction == "in" and tgt == root and not inside(src, root):
                rows.append((root, src, kind, tier, line))
    return graph_view._grouped(rows)


def check(snap: Snapshot) -> None:
    handles = [h for (h,) in snap.query("SELECT handle FROM symbols ORDER BY handle")]
    size = graph_view._INDEX_KEYS
    try:
        for keys_per_lookup in (size, 1, 2):  # one lookup; many (every key list split)
            graph_view._INDEX_KEYS = keys_per_lookup
            for hs in (handles, handles[:1], handles[1::3]):
                assert graph_view.out_edges(snap, hs) == reference(snap, hs, "out")
                assert graph_view.in_edges(snap, hs) == reference(snap, hs, "in")
    finally:
        graph_view._INDEX_KEYS = size


@settings(max_examples=max(5, settings.default.max_examples // 2), deadline=None)
@given(mods=st.lists(module, min_size=len(MODULES), max_size=len(MODULES)), edit=module, which=st.integers(0, 2))
def test_edges_by_file_equal_the_definition_on_full_and_delta_snapshots(mods, edit, which):
    with tempfile.TemporaryDirectory(prefix="cg-gv-") as tmp:
        g = GitRepo(Path(tmp) / "repo")
        for i, (path, mod) in enumerate(zip(MODULES, mods, strict=True)):
            g.write(path, source(mod, [m for m in MODULES if m != path][: i % 3]))
        g.commit("c1")
        home = Home.open(Path(tmp) / "home")
        for step in range(2):
            res = build_snapshot(g.root, home, jobs=1)
            t = resolve_target(g.root, "HEAD")
            rs = home.repo(t.identity.repository_id)
            assert rs.entry(res.snapshot_id)["layout"] == ("full" if step == 0 else "delta")
            with Snapshot.open(rs, res.snapshot_id, t.repo) as snap:
                check(snap)
            g.write(MODULES[which], source(edit, [MODULES[(which + 1) % 3]]))
            g.commit("edit")


def test_a_full_snapshot_indexes_its_resolved_edges_by_path(repo, home):
    repo.write("a.py", "def f():\n    g()\n\n\ndef g():\n    pass\n")
    repo.commit("c1")
    res = build_snapshot(repo.root, home, jobs=1)
    t = resolve_target(repo.root, "HEAD")
    with Snapshot.open(home.repo(t.identity.repository_id), res.snapshot_id, t.repo) as snap:
        got = snap.query("SELECT table_name, expressions FROM duckdb_indexes() WHERE index_name = 'resolved_edges_path'")
    assert [(name, "path" in expr) for name, expr in got] == [("resolved_edges", True)]
