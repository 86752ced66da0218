"""Acceptance 4 of issue 12: the README's quickstart, run as written on a generated
repository, passes.

The ```bash block under "## Quickstart" is parsed from README.md (continuation lines
joined, comments dropped by shlex) and each command is run in the repository, with only
the repository path substituted for ``path/to/your/repo``. ``citegraph serve . &`` is run
as the ``serve`` fixture (a real ``citegraph serve`` process, stopped afterwards) instead
of a shell background job nobody would clean up; every later command then goes through
it, as it would for a reader. Each command must exit 0 unless the README's comment on it
says what else it exits with."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
PLACEHOLDER = "path/to/your/repo"

RETRY = '''\
"""Retry policy of the payment client."""

import random

MAX_ATTEMPTS = 5


class RetryPolicy:
    """Exponential back-off; every retry keeps the original idempotency key."""

    def __init__(self, base: float = 0.5, cap: float = 30.0) -> None:
        self.base = base
        self.cap = cap

    def next_delay(self, attempt: int) -> float:
        delay = min(self.cap, self.base * 2 ** attempt)
        return delay * (0.5 + random.random() / 2)

    def should_retry(self, attempt: int, status: int) -> bool:
        if attempt >= MAX_ATTEMPTS:
            return False
        return status in (429, 502, 503, 504)

    def headers(self, key: str) -> dict[str, str]:
        return {"Idempotency-Key": key}


def default_policy() -> RetryPolicy:
    return RetryPolicy()
'''


def quickstart_lines() -> list[tuple[str, str]]:
    """(command line as written, its comment) of every command in the quickstart block."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "no ```bash block under ## Quickstart"
    joined = block.group(1).replace("\\\n", " ")
    out = []
    for line in joined.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        comment = line.split("  #", 1)[1] if "  #" in line else ""
        out.append((line, comment))
    return out


def expected_exit(comment: str) -> int:
    """0, unless the README's comment on the line names another exit code for this run."""
    m = re.search(r"\bexit (\d)\b(?! when)", comment)
    return int(m.group(1)) if m else 0


def make_repo(root: Path) -> Path:
    from gitutil import GitRepo

    remote = root / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    repo = GitRepo(root / "shop", remote=str(remote))
    repo.write("src/payments/retry.py", RETRY)
    repo.write("src/payments/__init__.py", "")
    repo.write("README.md", "shop\n")
    repo.commit("initial")
    repo.git("push", "-q", "origin", "main")
    repo.git("fetch", "-q", "origin")
    return repo.root


def test_readme_quickstart_runs_as_written(tmp_path, home, serve):
    lines = quickstart_lines()
    commands = [shlex.split(line, comments=True) for line, _ in lines]
    assert commands[0] == ["cd", PLACEHOLDER], "the quickstart starts in the repository"
    assert any(c[:2] == ["citegraph", "find"] for c in commands)
    root = make_repo(tmp_path)
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    env.pop("NO_COLOR", None)
    service = None
    ran = []
    try:
        for (line, comment), argv in zip(lines[1:], commands[1:], strict=True):
            assert argv[0] == "citegraph", line
            if argv[-1] == "&":
                assert argv[1:-1] == ["serve", "."], line  # the one background job: the service
                service = serve(str(root))
                ran.append("serve (fixture)")
                continue
            r = subprocess.run([sys.executable, "-m", "citegraph.cli.main", *argv[1:]], cwd=root, env=env,
                               capture_output=True, text=True, timeout=180)
            want = expected_exit(comment)
            assert r.returncode == want, f"{line!r} exited {r.returncode} (want {want}):\n{r.stdout}\n{r.stderr}"
            assert "Traceback" not in r.stderr, r.stderr
            ran.append(" ".join(argv[1:3]))
    finally:
        if service is not None:
            assert service.stop() == 0, service.log()
    assert service is not None and len(ran) == len(commands) - 1
    # what the quickstart claims happened: the memory cites both places, the SARIF was written
    listed = subprocess.run([sys.executable, "-m", "citegraph.cli.main", "list", "--json"], cwd=root, env=env,
                            capture_output=True, text=True, timeout=60)
    mems = json.loads(listed.stdout)["memories"]
    assert [(m["project"], m["topic"], len(m["citations"])) for m in mems] == [("payments", "retry-contract", 2)]
    assert json.loads((root / "citegraph.sarif").read_text())["version"] == "2.1.0"
    assert (root / "memory-report.html").read_text().lstrip().lower().startswith("<!doctype html")
