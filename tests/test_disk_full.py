"""Issue 20, items 8 and 11: a full disk, and a read-only data home, under the memory store. ``remember`` and ``refresh`` used
to end in a traceback (COMMIT failed on the WAL, then ROLLBACK raised "no transaction is
active"). Now: one error line (exit 3) saying the disk is full, nothing lost, and both work
again once there is space. A read-only home is said to be read-only (it used to be
"memory store unreadable — move the file aside": risky advice for a healthy store). The
data home is on a real small tmpfs, or a real read-only bind mount, in a private mount
namespace (root only) so nothing else on the machine sees it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 60

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


class Namespace:
    """A private mount namespace holding a tmpfs at ``mnt``; commands run inside it."""

    def __init__(self, mnt: Path, size: str | None = None, read_only: bool = False) -> None:
        mnt.mkdir(exist_ok=True)
        setup = f'mount -t tmpfs -o size={size} none "$1"' if size else 'mount --bind "$1" "$1"'
        if read_only:
            setup += ' && mount -o remount,ro,bind "$1"'
        self.p = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                                   f'{setup} && echo ready && exec sleep 600', "sh", str(mnt)],
                                  stdout=subprocess.PIPE, text=True)
        assert self.p.stdout.readline().strip() == "ready"

    def run(self, *cmd: str, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(["nsenter", "-t", str(self.p.pid), "-m", *cmd], env=env, capture_output=True,
                              text=True, timeout=TIMEOUT)

    def close(self) -> None:
        self.p.kill()
        self.p.wait(TIMEOUT)
        self.p.stdout.close()


@pytest.fixture
def ns(tmp_path):
    n = Namespace(tmp_path / "mnt", size="64m")
    yield n
    n.close()


def one_line(p: subprocess.CompletedProcess, code: int = 3) -> str:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_remember_and_refresh_on_a_full_disk(ns, tmp_path, repo):
    home = tmp_path / "mnt" / "home"
    env = {**os.environ, "CITEGRAPH_HOME": str(home)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        extra = () if args[0] == "list" else ("--no-service",)
        return ns.run(sys.executable, "-m", "citegraph.cli.main", *args, *extra, env=env)

    repo.write("a.py", "def f():\n    return 1\n")
    repo.commit("c1")
    assert cli("index", str(repo.root)).returncode == 0
    mem = cli("remember", "--text", "f returns one", "--repo", str(repo.root), "--code-ref", "a.py::f", "--json")
    assert mem.returncode == 0, mem.stderr
    mid = json.loads(mem.stdout)["id"]
    repo.delete("a.py")  # f moves to another file: refresh would re-anchor it
    repo.write("b.py", "import os\n\n\ndef f():\n    return 1\n")
    repo.commit("c2")
    assert cli("index", str(repo.root)).returncode == 0
    dry = json.loads(cli("refresh", mid, "--repo", str(repo.root), "--dry-run", "--json").stdout)
    assert dry["memories"][0]["citations"][0]["action"] == "refresh"

    fill = str(tmp_path / "mnt" / "fill")
    ns.run("dd", "if=/dev/zero", f"of={fill}", "bs=64k")  # fills the disk (dd fails at the end)
    assert "No space left" in ns.run("dd", "if=/dev/zero", f"of={fill}.2", "bs=64k", "count=1").stderr

    big = "x" * 30_000  # more than the store's free pages: the WAL must grow
    for args in (("remember", "--text", "second " + big, "--repo", str(repo.root)),
                 ("remember", "--text", "third", "--topic", "t3", "--repo", str(repo.root)),
                 ("refresh", mid, "--repo", str(repo.root))):
        line = one_line(cli(*args))
        assert "disk is full" in line and "nothing was written" in line, line

    # nothing lost: the first memory is there, at its first revision
    listed = cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    mems = json.loads(listed.stdout)["memories"]
    assert [(m["id"], m["revision"]) for m in mems] == [(mid, 1)]

    ns.run("rm", "-f", fill, f"{fill}.2")
    ref = cli("refresh", mid, "--repo", str(repo.root), "--json")
    assert ref.returncode == 0, ref.stderr
    assert json.loads(ref.stdout)["memories"][0]["revision"] == 2
    again = cli("remember", "--text", "second " + big, "--repo", str(repo.root))
    assert again.returncode == 0, again.stderr
    assert len(json.loads(cli("list", "--json").stdout)["memories"]) == 2
    val = json.loads(cli("validate", "--format", "json", "--repo", str(repo.root)).stdout)
    assert {m["id"]: m["freshness"] for m in val["memories"]}[mid] == "fresh"


def test_a_read_only_home_is_said_to_be_read_only_and_reads_still_answer(tmp_path, repo, home, run_cli):
    repo.write("a.py", "def f():\n    return 1\n")
    repo.commit("c1")
    assert run_cli("index", str(repo.root)).returncode == 0
    mem = run_cli("remember", "--text", "f returns one", "--repo", str(repo.root), "--code-ref", "a.py::f", "--json")
    assert mem.returncode == 0, mem.stderr
    before = home.memory_db.read_bytes()
    ns = Namespace(home.root, read_only=True)
    try:
        env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
        for args in (("remember", "--text", "more", "--repo", str(repo.root), "--no-service"),
                     ("forget", json.loads(mem.stdout)["id"], "--yes")):
            p = ns.run(sys.executable, "-m", "citegraph.cli.main", *args, env=env)
            line = one_line(p)
            assert "read-only" in line and "move the file aside" not in line, line
            assert "not damaged" in line
        # reads still answer (validate caches nothing then)
        val = ns.run(sys.executable, "-m", "citegraph.cli.main", "validate", "--format", "json", "--repo",
                     str(repo.root), "--no-service", env=env)
        assert val.returncode == 0 and "Traceback" not in val.stderr, val.stderr
        assert json.loads(val.stdout)["memories"][0]["freshness"] == "fresh"
        for args in (("list", "--json"), ("history", json.loads(mem.stdout)["id"])):
            p = ns.run(sys.executable, "-m", "citegraph.cli.main", *args, env=env)
            assert p.returncode == 0 and p.stderr == "", (args, p.stderr)
    finally:
        ns.close()
    assert home.memory_db.read_bytes() == before  # nothing lost, nothing changed
    val = run_cli("validate", "--format", "json", "--repo", str(repo.root), "--no-service")
    assert val.returncode == 0 and json.loads(val.stdout)["memories"][0]["freshness"] == "fresh"
