"""The service answers from the state it is building (issue 21, acceptance 2): with a real
``serve`` process, ``validate`` and ``remember`` right after an edit of a cited function
wait for the build of that edit and answer for the edited state — never unknown/not-current
with advice to run ``index`` while the service runs. A build held back past the read's
bound (a stall injected through tests/stall_launcher.py) gives unknown/racing with a
message that the service is still indexing, and for how long; ``remember`` then stores
nothing and says the same."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from service_helpers import TIMEOUT, js, wait_exact

from citegraph.indexer.tree_watch import AVAILABLE
from citegraph.server import client

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="inotify (Linux) only")

LAUNCHER = str(Path(__file__).parent / "stall_launcher.py")
PY = "def f():\n    return 1\n"


def stalled_serve(serve, repo, tmp_path, *options: str):
    """A service whose builds stall at ``extract`` for as many seconds as the returned file
    says (0 at first: the initial build runs normally)."""
    stall, marker = tmp_path / "stall-seconds", tmp_path / "stalled"
    stall.write_text("0")
    serve(str(repo.root), launcher=[sys.executable, LAUNCHER, "extract", str(marker), f"@{stall}"], options=options)
    return stall, marker


def cite_f(run_cli, repo) -> str:
    mem = js(run_cli("remember", "--text", "f returns one", "--repo", str(repo.root), "--code-ref", "a.py::f",
                     "--json", timeout=TIMEOUT))
    return mem["id"]


def test_validate_and_remember_right_after_an_edit_answer_for_the_edited_state(repo, home, run_cli, serve,
                                                                                 tmp_path):
    repo.write("a.py", PY)
    c1 = repo.commit("c1")
    stall, marker = stalled_serve(serve, repo, tmp_path, "--read-wait-ms", "30000")
    wait_exact(run_cli, repo.root, c1, False)
    mid = cite_f(run_cli, repo)
    # From now on every build takes 4 s more: longer than a CLI process takes to start, so
    # the read below arrives while the edit's build is pending and has to wait for it.
    stall.write_text("4")
    repo.write("a.py", "def f():\n    return 2\n")
    v = js(run_cli("validate", "--format", "json", "--repo", str(repo.root), timeout=TIMEOUT))
    assert marker.exists()  # the edit's build did stall
    [m] = v["memories"]
    assert m["id"] == mid
    assert [(c["outcome"], c["reason"]) for c in m["citations"]] == [("changed", None)]  # the edited f
    # the same answer as a one-shot validation of the same state
    one = js(run_cli("validate", "--format", "json", "--repo", str(repo.root), "--no-service", timeout=TIMEOUT))
    assert one == v
    # remember right after another edit: captured against the edited state
    repo.write("a.py", "def f():\n    return 2\n\n\ndef g():\n    return 3\n")
    mem = js(run_cli("remember", "--text", "g returns three", "--repo", str(repo.root), "--code-ref", "a.py::g",
                     "--json", timeout=TIMEOUT))
    assert [(c["ref"], c["dirty"]) for c in mem["citations"]] == [("a.py::g", True)]
    text = run_cli("validate", "--repo", str(repo.root), timeout=TIMEOUT)
    assert text.returncode == 0 and "not-current" not in text.stdout and "citegraph index" not in text.stdout
    # a commit, then a read: still no full scan of the worktree since the initial one —
    # requests and git operations apply what the watcher saw (graph/live_state.py)
    repo.commit("c2")
    js(run_cli("validate", "--format", "json", "--repo", str(repo.root), timeout=TIMEOUT))
    [r] = client.call(home, "ping", {})["repos"]
    assert r["rescans"] == 1, r


def test_a_build_held_past_the_bound_is_racing_still_indexing(repo, home, run_cli, serve, tmp_path):
    repo.write("a.py", PY)
    c1 = repo.commit("c1")
    stall, marker = stalled_serve(serve, repo, tmp_path)  # the default bound (2 s)
    wait_exact(run_cli, repo.root, c1, False)
    mid = cite_f(run_cli, repo)
    stall.write_text("120")  # the edit's build is held back far past the bound
    repo.write("a.py", "def f():\n    return 2\n")
    v = js(run_cli("validate", "--format", "json", "--repo", str(repo.root), timeout=TIMEOUT))
    assert marker.exists()
    [c] = v["memories"][0]["citations"]
    assert (c["outcome"], c["reason"]) == ("unknown", "racing")
    step = c["next_step"]
    found = re.search(r"the citegraph service is still indexing this repository's latest change "
                      r"\((\d+\.\d)s so far\): run `citegraph validate` again in a moment", step)
    assert found, step
    assert float(found.group(1)) >= 2.0  # the read waited its whole bound first
    assert "citegraph index" not in step and "serve" not in step
    text = run_cli("validate", "--repo", str(repo.root), timeout=TIMEOUT)
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert "next: the citegraph service is still indexing" in text.stdout
    assert "not-current" not in text.stdout and "citegraph index" not in text.stdout
    # remember past the bound: one clear line, nothing stored
    rem = run_cli("remember", "--text", "f returns two", "--repo", str(repo.root), "--code-ref", "a.py::f",
                  timeout=TIMEOUT)
    assert rem.returncode == 1 and "Traceback" not in rem.stderr
    assert "still indexing" in rem.stderr and "nothing was stored" in rem.stderr, rem.stderr
    assert "citegraph index" not in rem.stderr
    listed = js(run_cli("list", "--json", timeout=TIMEOUT))
    assert [m["id"] for m in listed["memories"]] == [mid]
    # brief: the memory's issue says the same
    brief = js(run_cli("brief", "--task", "f returns", "--repo", str(repo.root), "--json", timeout=TIMEOUT))
    issues = [i["message"] for i in brief["issues"] if i.get("memory_id") == mid]
    assert any("the citegraph service is still indexing" in m for m in issues), brief
    assert not any("citegraph index" in m or "citegraph serve" in m for m in issues)
    # the pre-edit hook (it waits only 0.1 s): the cited memory, "not validated yet: still indexing"
    ev = {"session_id": "s", "cwd": str(repo.root), "hook_event_name": "PreToolUse", "tool_name": "Edit",
          "tool_input": {"file_path": str(repo.root / "a.py"), "old_string": "2", "new_string": "3"}}
    hook = subprocess.run([sys.executable, "-m", "citegraph.cli.main", "hook", "pre-edit"], input=json.dumps(ev),
                          env={**os.environ, "CITEGRAPH_HOME": str(home.root)}, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert hook.returncode == 0 and "Traceback" not in hook.stderr
    context = json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "not validated yet: the citegraph service is still indexing" in context, context
    assert "citegraph index" not in context and "citegraph serve" not in context


def test_a_request_that_changes_nothing_opens_no_memory_store(repo, home, run_cli, monkeypatch):
    """In the service, a repeated validate opens no memory store (memory/lifecycle/
    read_memo.py); a write by another process (remember, archive, forget) is seen by the
    next request — it is never answered from a selection the store no longer holds."""
    from citegraph.memory.lifecycle.store import MemoryStore
    from citegraph.server import service_ops
    from citegraph.server.service import Service

    repo.write("a.py", PY + "\n\ndef g():\n    return 2\n")
    repo.commit("c1")
    svc = Service(home, debounce_ms=5, pool_context="fork")
    svc.start()
    try:
        svc.register(repo.root)
        m1 = service_ops.remember(svc, {"text": "f returns one", "repo": str(repo.root), "refs": ["a.py::f"],
                                        "wait_s": 30})["id"]
        args = {"repo_paths": [str(repo.root)]}
        first = service_ops.validate(svc, args)
        assert [m["id"] for m in first["memories"]] == [m1]
        # The first validate wrote its observations, and closing a connection checkpoints
        # the write-ahead log: the store file changed once more; one request reads it again.
        MemoryStore.keep_open_between_calls(0.0)
        assert service_ops.validate(svc, args) == first
        opens = []
        real = MemoryStore._connect.__func__

        def counting(cls, *a, **kw):
            opens.append(1)
            return real(cls, *a, **kw)

        monkeypatch.setattr(MemoryStore, "_connect", classmethod(counting))
        MemoryStore.keep_open_between_calls(0.0)  # close the lingering connection: any use reopens it
        MemoryStore.keep_open_between_calls(0.25)
        for _ in range(3):
            assert service_ops.validate(svc, args) == first
        assert opens == []  # nothing changed: no store opened
        # another process writes: the next request reads the store again and sees it
        m2 = js(run_cli("remember", "--no-service", "--text", "g returns two", "--repo", str(repo.root),
                        "--code-ref", "a.py::g", "--json", timeout=TIMEOUT))["id"]
        after = service_ops.validate(svc, args)
        assert sorted(m["id"] for m in after["memories"]) == sorted([m1, m2]) and opens
        MemoryStore.keep_open_between_calls(0.0)
        MemoryStore.keep_open_between_calls(0.25)
        assert run_cli("archive", m1, timeout=TIMEOUT).returncode == 0
        assert [m["id"] for m in service_ops.validate(svc, args)["memories"]] == [m2]
        MemoryStore.keep_open_between_calls(0.0)
        MemoryStore.keep_open_between_calls(0.25)
        assert run_cli("forget", m2, "--yes", timeout=TIMEOUT).returncode == 0
        assert service_ops.validate(svc, args)["memories"] == []
    finally:
        svc.close()


def test_remember_in_the_service_connects_to_the_store_once_across_a_long_capture(repo, home, monkeypatch):
    """remember captures, then writes: in the service (connections linger) the store is held
    for the whole request, so a capture longer than the linger does not close the connection
    (with its checkpoint) and reopen it per request; a one-shot process holds nothing."""
    import time as _time

    from citegraph.memory.lifecycle.store import MemoryStore
    from citegraph.server import service_ops
    from citegraph.server.service import Service
    from citegraph.validator import capture as capture_mod

    repo.write("a.py", PY)
    repo.commit("c1")
    svc = Service(home, debounce_ms=5, pool_context="fork")
    svc.start()
    try:
        svc.register(repo.root)
        args = {"text": "f returns one", "repo": str(repo.root), "refs": ["a.py::f"], "wait_s": 30}
        service_ops.remember(svc, args)  # creates the store
        opens = []
        real_connect, real_capture = MemoryStore._connect.__func__, capture_mod.capture

        def counting(cls, *a, **kw):
            opens.append(1)
            return real_connect(cls, *a, **kw)

        def slow_capture(*a, **kw):  # a capture that outlasts the linger (0.25 s)
            _time.sleep(0.4)
            return real_capture(*a, **kw)

        monkeypatch.setattr(MemoryStore, "_connect", classmethod(counting))
        monkeypatch.setattr("citegraph.memory.api.capture", slow_capture)
        MemoryStore.keep_open_between_calls(0.0)
        MemoryStore.keep_open_between_calls(0.25)
        for _ in range(3):
            service_ops.remember(svc, args)
        assert len(opens) == 1, opens  # held through each capture; the next request follows within the linger
        MemoryStore.keep_open_between_calls(0.0)  # a one-shot process: kept_open holds nothing
        opens.clear()
        with MemoryStore.kept_open(home):
            assert opens == []
    finally:
        MemoryStore.keep_open_between_calls(0.25)
        svc.close()
