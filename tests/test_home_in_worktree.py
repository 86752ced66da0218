"""Issue 20, item 9: a data home inside the worktree (not ignored by git). Its files change
under every build, so the one-shot scan used to count them as dirty worktree files: the
second ``index`` and every one after failed ("build.lock: changed while the snapshot was
being built") and ``remember`` refused. The one-shot path now skips its own home as the
service does (``gitrepo.dirs_inside``, shared by both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from service_helpers import ServeProc, needs_service, wait_exact

from citegraph.graph.store import Home

TIMEOUT = 60
PY = "def f():\n    return 1\n"


def cli_for(home: Home):
    def run(*args: str, cwd=None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
        env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
        return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout)

    return run


def ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert p.returncode == 0 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    return p


def test_one_shot_index_and_capture_with_the_home_in_the_worktree(repo):
    repo.write("a.py", PY)
    head = repo.commit("c1")
    home = Home.open(repo.root / ".citegraph-home")
    cli = cli_for(home)
    for _ in range(3):  # the second one used to fail, and every one after
        res = json.loads(ok(cli("index", str(repo.root), "--json", "--no-service")).stdout)
        assert (res["commit"], res["dirty"], res["files"]) == (head, False, 1)
    st = json.loads(ok(cli("status", "--json", str(repo.root), "--no-service")).stdout)
    assert st["exact_current"] and not st["dirty"]
    assert not any(s["state"] == "failed" for s in st["snapshots"])
    mem = json.loads(ok(cli("remember", "--text", "f returns one", "--repo", str(repo.root), "--code-ref",
                            "a.py::f", "--json", "--no-service")).stdout)
    # a real edit is still seen: dirty, and the citation changes
    repo.write("a.py", "def f():\n    return 2\n")
    res = json.loads(ok(cli("index", str(repo.root), "--json", "--no-service")).stdout)
    assert res["dirty"] and res["files"] == 1
    val = json.loads(ok(cli("validate", "--format", "json", "--repo", str(repo.root), "--no-service")).stdout)
    assert [(m["id"], m["status"]) for m in val["memories"]] == [(mem["id"], "changed")]
    # an untracked file next to the home is still part of the state
    repo.write("b.py", "def g():\n    return 3\n")
    res = json.loads(ok(cli("index", str(repo.root), "--json", "--no-service")).stdout)
    assert res["files"] == 2


@needs_service
def test_the_service_and_the_one_shot_path_agree(repo, tmp_path):
    repo.write("a.py", PY)
    repo.commit("c1")
    home = Home.open(repo.root / "sub" / "home")  # deeper inside, beside tracked code
    repo.write("sub/x.py", "X = 1\n")
    head = repo.commit("c2")
    cli = cli_for(home)
    s = ServeProc(home, tmp_path / "serve.log", str(repo.root))
    try:
        wait_exact(cli, repo.root, head, False)
        one = json.loads(ok(cli("status", "--json", str(repo.root), "--no-service")).stdout)
        assert one["exact_current"] and not one["dirty"]
        ok(cli("remember", "--text", "f returns one", "--repo", str(repo.root), "--code-ref", "a.py::f"))
        repo.write("a.py", "def f():\n    return 2\n")
        wait_exact(cli, repo.root, head, True)
        via = json.loads(ok(cli("validate", "--format", "json", "--repo", str(repo.root))).stdout)
        ok(cli("index", str(repo.root), "--no-service"))
        direct = json.loads(ok(cli("validate", "--format", "json", "--repo", str(repo.root),
                                   "--no-service")).stdout)
        assert via == direct and via["memories"][0]["status"] == "changed"
    finally:
        s.stop()
