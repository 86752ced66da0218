"""Run the citegraph CLI with a build stall injected (the crash tests kill -9 it there).

    python tests/stall_launcher.py STAGE MARKER SECONDS CLI-ARGS...
    python tests/stall_launcher.py STAGE MARKER SECONDS --compact HOME REPOSITORY_ID SNAPSHOT_ID REPO

Every build in the process gets ``BuildHooks(stall=...)``: at ``STAGE`` it writes the stage
name to ``MARKER`` and sleeps ``SECONDS``. ``STAGE@NAME`` stalls only the builds of a
repository whose path holds NAME (the others run normally). ``SECONDS`` may be ``@FILE``:
the stall then lasts as many seconds as FILE says when the build reaches the stage (a
test changes it while the process runs; 0 or no file: no stall). ``db:SECONDS`` stalls
inside DuckDB (queries run back to back, the GIL released), where a real build spends
most of its time: a thread left there at exit is what a stop must survive. The hook is injected through
``build_snapshot``'s ``hooks`` parameter; production code reads no test variable.
"""

from __future__ import annotations

import faulthandler
import signal
import subprocess
import sys
import time
from pathlib import Path

import citegraph.graph.snapshot_builder as sb
from citegraph.graph.build_hooks import BuildHooks


def main() -> None:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a test that times out asks for the stacks
    stage, _, only = sys.argv[1].partition("@")
    marker, spec = Path(sys.argv[2]), sys.argv[3]
    in_duckdb = spec.startswith("db:")
    spec = spec.removeprefix("db:")

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
            # In slices: a signal whose C handler ran just before the sleep's system call,
            # or on another thread (DuckDB's), leaves one long sleep running to its end;
            # the interpreter acts on it between slices, as it would between a real
            # build's steps.
            end = time.monotonic() + s
            if in_duckdb:
                import duckdb

                con = duckdb.connect(config={"threads": 1})
                while time.monotonic() < end:
                    con.execute("SELECT sum(range) FROM range(20000000)").fetchall()
                return
            while (left := end - time.monotonic()) > 0:
                time.sleep(min(left, 0.05))

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


def hung_report(proc: subprocess.Popen[str]) -> str:
    """What a stalled launcher process that did not exit in time was doing: every thread's
    Python stack (faulthandler, registered on SIGUSR1 in ``main``) and each thread's signal
    masks, plus this (the test's) process's ignored signals. Kills ``proc``."""
    lines = [f"test process SigIgn {_sig_line(Path('/proc/self/status'), 'SigIgn')}"]
    for task in sorted(Path(f"/proc/{proc.pid}/task").glob("*")):
        status = task / "status"
        lines.append(f"thread {task.name}: " + " ".join(f"{k} {_sig_line(status, k)}"
                                                        for k in ("SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")))
    try:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
    finally:
        proc.kill()
    out, err = proc.communicate()
    return "\n".join([*lines, "stdout:", out or "", "stderr:", err or ""])


def _sig_line(status: Path, key: str) -> str:
    try:
        for line in status.read_text().splitlines():
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"
