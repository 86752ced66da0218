"""Run the citegraph CLI (e.g. ``serve``) with every build's edge-resolution statements
profiled (tests/test_o_change.py counts the rows a service's build of an edit scans).

    python tests/profile_launcher.py OUT CLI-ARGS...

Every build in the process gets ``BuildHooks(statement=...)``, which appends one JSON line
per statement of a delta's edge resolution to ``OUT``: its label and the rows DuckDB's
profile says it scanned. The hook is injected through ``build_snapshot``'s ``hooks``
parameter; production code reads no test variable.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import citegraph.graph.snapshot_builder as sb
from citegraph.graph.build_hooks import BuildHooks


def main() -> None:
    out = Path(sys.argv[1])
    lock = threading.Lock()

    def statement(label: str, query: dict) -> None:
        with lock, out.open("a") as fh:
            fh.write(json.dumps({"label": label, "rows": int(query.get("total_rows_scanned") or 0)}) + "\n")

    original = sb.build_snapshot

    def build_snapshot(*args, hooks=None, **kwargs):  # type: ignore[no-untyped-def]
        return original(*args, hooks=hooks or BuildHooks(statement=statement), **kwargs)

    sb.build_snapshot = build_snapshot  # before the CLI (and the service) import it by name
    sys.argv = ["citegraph", *sys.argv[2:]]
    from citegraph.cli.main import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
