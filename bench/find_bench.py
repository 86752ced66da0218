"""``citegraph find``'s ranked search (graph/symbol_search.py) against the exact-name
query it replaced, on the same snapshot in the same run (the floor/peer: the former
``name = ? OR qualified_name = ? OR qualified_name LIKE '%.name'`` statement).

    python -m citegraph.bench.find_bench PATH [--home DIR] [--runs 20] [--json]

PATH is indexed into ``--home`` (default: a fresh temporary home) unless its exact-current
snapshot is already there. Then, for each query — an exact name, a qualified suffix, a
prefix, a glob and a miss (the worst case: every tier is evaluated for every row) — both
statements run ``--runs`` times through one open snapshot; the figures are median
milliseconds and the ratio ranked/former.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any

from citegraph.graph.current import ScanSource
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.graph.symbol_search import search

FORMER = ("SELECT * FROM symbols WHERE name = ? OR qualified_name = ? OR qualified_name LIKE ? "
          "ORDER BY (qualified_name = ?) DESC, path, start_line LIMIT ?")


def pick_queries(snap: Snapshot) -> dict[str, str]:
    """Queries of each kind drawn from the snapshot itself (a method's name and its
    qualified name), so every repository gets matching searches."""
    row = snap.dicts("SELECT name, qualified_name FROM symbols WHERE contains(qualified_name, '.') "
                     "AND length(name) >= 6 ORDER BY qualified_name LIMIT 1 OFFSET "
                     "(SELECT count(*) // 2 FROM symbols WHERE contains(qualified_name, '.') AND length(name) >= 6)")[0]
    name, qname = row["name"], row["qualified_name"]
    return {"exact": qname, "qualified-suffix": name, "prefix": name[:4], "glob": name[:3] + "*",
            "miss": "no_such_symbol_anywhere"}


def median_ms(fn: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1000, 2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--home")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    home = Home.open(a.home or tempfile.mkdtemp(prefix="citegraph-find-bench-"))
    built = build_snapshot(a.path, home)
    cur = ScanSource().read(a.path, home)
    out: dict[str, Any] = {"path": a.path, "files": built.files, "symbols": built.symbols, "runs": a.runs,
                           "queries": {}}
    with Snapshot.open(cur.store, cur.snapshot_id, cur.repo) as snap:
        for kind, q in pick_queries(snap).items():
            ranked = median_ms(lambda q=q: search(snap, q, limit=50), a.runs)
            former = median_ms(lambda q=q: snap.dicts(FORMER, [q, q, f"%.{q}", q, 50]), a.runs)
            out["queries"][kind] = {"query": q, "ranked_ms": ranked, "former_ms": former,
                                    "ratio": round(ranked / former, 2) if former else None,
                                    "hits": len(search(snap, q, limit=50))}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{a.path}: {out['files']} files, {out['symbols']} symbols, median of {a.runs} runs")
        for kind, r in out["queries"].items():
            print(f"  {kind:17} {r['query']!r:32} ranked {r['ranked_ms']:8.2f} ms  former {r['former_ms']:8.2f} ms"
                  f"  ratio {r['ratio']}  ({r['hits']} hits)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
