from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))

from gitutil import GitRepo  # noqa: E402
from service_helpers import ServeProc  # noqa: E402

from citegraph.graph.store import Home  # noqa: E402

# CI's profile: 20 examples (was 25 until CI's machine ran the suite in 22-23 min of its 30);
# HYPOTHESIS_PROFILE=slow explores 400.
settings.register_profile(
    "ci", max_examples=20, derandomize=True, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "slow", max_examples=400, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home.open(tmp_path / "home")


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")


@pytest.fixture
def make_repo(tmp_path: Path):
    counter = iter(range(1000))

    def make(name: str | None = None, remote: str | None = None) -> GitRepo:
        return GitRepo(tmp_path / (name or f"repo{next(counter)}"), remote=remote)

    return make


@pytest.fixture
def run_cli(home: Home):
    """Run the citegraph CLI in a subprocess (real exit codes, real stderr)."""
    import subprocess

    def run(*args: str, cwd: Path | str | None = None, env: dict | None = None, timeout: float = 120):
        full_env = {**os.environ, "CITEGRAPH_HOME": str(home.root), **(env or {})}
        return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], cwd=cwd,
                              env=full_env, capture_output=True, text=True, timeout=timeout)

    return run


@pytest.fixture
def serve(home, tmp_path):
    started: list[ServeProc] = []

    def start(*paths: str, **kwargs) -> ServeProc:
        s = ServeProc(home, tmp_path / f"serve{len(started)}.log", *paths, **kwargs)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop(signal.SIGKILL)
