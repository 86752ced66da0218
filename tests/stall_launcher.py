"""Run the citegraph CLI with a build stall injected (the crash tests kill -9 it there).

    python tests/stall_launcher.py STAGE MARKER SECONDS CLI-ARGS...
    python tests/stall_launcher.py STAGE MARKER SECONDS --compact HOME REPOSITORY_ID SNAPSHOT_ID REPO

Every build in the process gets ``BuildHooks(stall=...)``: at ``STAGE`` it writes the stage
name to ``MARKER`` and sleeps ``SECONDS``. ``STAGE@NAME`` stalls only the builds of a
repository whose path holds NAME (the others run normally). ``SECONDS`` may be ``@FILE``:
the stall then lasts as many seconds as FILE says when the build reaches the stage (a
test changes it while the process runs; 0 or no file: no stall). The hook is injected through
``build_snapshot``'s ``hooks`` parameter; production code reads no test variable.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import citegraph.graph.snapshot_builder as sb
from citegraph.graph.build_hooks import BuildHooks


def main() -> None:
    stage, _, only = sys.argv[1].partition("@")
    marker, spec = Path(sys.argv[2]), sys.argv[3]

    def seconds() -> float:
        if not spec.startswith("@"):
            return float(spec)
        try:
            return float(Path(spec[1:]).read_text() or 0)
        except (OSError, ValueError):
            return 0.0

    def stall(at: str) -> None:
        if at == stage and (s := seconds()) > 0:
            marker.write_text(at)
            time.sleep(s)

    if sys.argv[4] == "--compact":  # a compaction (graph/compaction.py) with the stall
        from citegraph.graph.compaction import compact
        from citegraph.graph.store import Home

        home, rid, sid, repo = sys.argv[5:9]
        done = compact(Home.open(home).repo(rid), sid, repo_path=repo, hooks=BuildHooks(stall=stall))
        print("compacted" if done else "nothing")
        return

    original = sb.build_snapshot

    def build_snapshot(*args, hooks=None, **kwargs):  # type: ignore[no-untyped-def]
        repo = str(args[0] if args else kwargs.get("repo_path", ""))
        if hooks is None and (not only or only in repo):
            hooks = BuildHooks(stall=stall)
        return original(*args, hooks=hooks, **kwargs)

    # Before the CLI (and the service) import it by name.
    sb.build_snapshot = build_snapshot
    sys.argv = ["citegraph", *sys.argv[4:]]
    from citegraph.cli.main import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()


def stalled_argv(stage: str, marker: Path, seconds: float | str, *cli_args: str) -> list[str]:
    """The argv of a CLI process stalled at ``stage`` (see the module docstring)."""
    return [sys.executable, str(Path(__file__)), stage, str(marker), str(seconds), *cli_args]


def stalled_compaction_argv(stage: str, marker: Path, seconds: float, home: Path, repository_id: str,
                            snapshot_id: str, repo: Path) -> list[str]:
    return [sys.executable, str(Path(__file__)), stage, str(marker), str(seconds), "--compact", str(home),
            repository_id, snapshot_id, str(repo)]
