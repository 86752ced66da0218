"""A real ``citegraph serve`` process for tests (as in tests/test_service.py), and helpers
to tell whether a CLI call was answered through it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from citegraph.indexer.tree_watch import AVAILABLE
from citegraph.server import client

TIMEOUT = 60
needs_service = pytest.mark.skipif(not AVAILABLE, reason="inotify (Linux) only")


class ServeProc:
    """``launcher``: the argv that runs the CLI (default ``python -m citegraph.cli.main``;
    tests/stall_launcher.py's to stall builds); ``options``: more ``serve`` options."""

    def __init__(self, home, log_path, *paths: str, launcher: list[str] | None = None,
                 options: tuple[str, ...] = ()) -> None:
        self.home = home
        self.log_path = log_path
        self.fh = open(log_path, "w")  # noqa: SIM115 - closed by stop()
        env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
        cli = launcher or [sys.executable, "-m", "citegraph.cli.main"]
        self.p = subprocess.Popen([*cli, "serve", "--debounce-ms", "10", *options, *paths], env=env,
                                  stdout=subprocess.DEVNULL, stderr=self.fh)
        deadline = time.monotonic() + TIMEOUT
        while client.call(home, "ping", {}) is None:
            assert self.p.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, "the service did not come up"
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text()

    def requests(self) -> int:
        """How many requests the service has answered (a ``ping`` counts itself)."""
        return int(client.call(self.home, "ping", {})["requests"])

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.fh.close()
        return self.p.returncode


def js(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def wait_exact(run_cli, root, head: str, dirty: bool) -> dict:
    deadline = time.monotonic() + TIMEOUT
    while True:
        st = js(run_cli("status", "--json", str(root), timeout=TIMEOUT))
        if st["exact_current"] and st["head"] == head and st["dirty"] == dirty:
            return st
        assert time.monotonic() < deadline, st
        time.sleep(0.05)
