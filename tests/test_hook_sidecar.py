"""The pre-edit hook's quick silence (issue 22; memory/agent/hook_gate.py and the code-keys
sidecar, memory/lifecycle/keys_sidecar.py): a file no memory can cite is answered without
importing DuckDB; everything else — a cited path, content that moved here, citations of a
former repository id, a sidecar that is missing, stale, corrupt or left by a writer that
died — gets the full path's answer. ``certainly_silent`` is only ever True where
``pre_edit`` is silent."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from test_hooks import RETRY, cited_repo, event  # noqa: F401 - the fixture is used by name

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.memory import api
from citegraph.memory.agent.hook_gate import certainly_silent
from citegraph.memory.agent.hooks import pre_edit
from citegraph.memory.lifecycle import keys_sidecar
from citegraph.memory.lifecycle.store import MemoryStore

PROBE = textwrap.dedent("""\
    import json, sys
    from citegraph.cli.hook_fast import run_pre_edit
    rc = run_pre_edit(sys.argv[1], True)
    sys.stderr.write(json.dumps({m: m in sys.modules for m in ("duckdb", "pyarrow")}))
    sys.exit(rc)
""")


def hook_process(home, ev: dict) -> tuple[int, str, dict]:
    """The one-shot hook (``--no-service``) in a fresh process: exit code, stdout, and
    whether DuckDB / pyarrow were imported."""
    p = subprocess.run([sys.executable, "-c", PROBE, str(home.root)], input=json.dumps(ev), capture_output=True,
                       text=True, timeout=60)
    err = p.stderr.strip().splitlines()
    return p.returncode, p.stdout, json.loads(err[-1]) if err else {}


def quick_then_full(home, file) -> tuple[bool, dict | None]:
    """(certainly_silent, pre_edit's output) — quick first: the full path may rewrite the
    sidecar. Quick silence must never hide an answer of the full path."""
    quick = certainly_silent(home.memory_db, file)
    full = pre_edit(home, file)
    if quick:
        assert full is None, f"quick silence for {file}, but the full path says: {full}"
    return quick, full


def sidecar_bytes(home) -> bytes:
    return keys_sidecar.sidecar(home.memory_db).read_bytes()


def test_an_uncited_file_is_silent_without_importing_duckdb(cited_repo, repo, home, tmp_path):  # noqa: F811
    assert keys_sidecar.read(home.memory_db) is not None  # written when the store closed
    for ev in (event(repo.root, "src/other.py"),                 # nothing cites it
               event(repo.root, "src/new_module.py", "Write"),   # a new file
               event(tmp_path / "elsewhere", "notes.txt")):      # no repository
        assert hook_process(home, ev) == (0, "", {"duckdb": False, "pyarrow": False})
        assert pre_edit(home, ev["tool_input"]["file_path"]) is None
    # a cited file takes the full path: the same output as pre_edit
    rc, out, mods = hook_process(home, event(repo.root, "src/retry.py"))
    assert rc == 0 and mods["duckdb"] and json.loads(out) == pre_edit(home, repo.root / "src/retry.py")


def test_a_read_write_connection_invalidates_the_sidecar_until_it_closes(cited_repo, repo, home):  # noqa: F811
    before = sidecar_bytes(home)
    with MemoryStore.open(home):
        assert sidecar_bytes(home).startswith(keys_sidecar.TOMBSTONE)
        assert keys_sidecar.read(home.memory_db) is None
    assert sidecar_bytes(home) == before  # nothing committed: restored as it was
    assert quick_then_full(home, repo.root / "src/other.py") == (True, None)
    api.remember(home, "other", repo=repo.root, refs=["src/other.py"], topic="other")  # committed: rewritten
    quick, full = quick_then_full(home, repo.root / "src/other.py")
    assert not quick and full is not None
    with MemoryStore.open(home) as ms:
        for m in ms.load():
            ms.forget(m.id)
    assert quick_then_full(home, repo.root / "src/retry.py") == (True, None)


def test_content_that_moved_here_is_not_silenced(cited_repo, repo, home):  # noqa: F811
    # the citations were captured on RETRY: a file holding those bytes is found by its blob
    repo.write("lib/copy.py", RETRY)  # untracked: the worktree's blob
    quick, full = quick_then_full(home, repo.root / "lib/copy.py")
    assert not quick and full is not None and "lib/copy.py" in full["hookSpecificOutput"]["additionalContext"]
    repo.commit("copy")  # clean: HEAD's blob
    quick, full = quick_then_full(home, repo.root / "lib/copy.py")
    assert not quick and full is not None
    assert quick_then_full(home, repo.root / "src/other.py") == (True, None)


def test_git_s_clean_conversion_decides_the_blob(repo, home):
    """With ``eol=crlf`` the worktree holds CRLF and git stores LF: the raw bytes' hash is
    not the blob the full path takes."""
    repo.write(".gitattributes", "*.py text eol=crlf\n")
    repo.write("src/a.py", RETRY.replace("\n", "\r\n"))
    repo.write("src/b.py", "y = 2\r\n")
    repo.commit("init")
    build_snapshot(repo.root, home)
    api.remember(home, "Delays double.", repo=repo.root, refs=["src/a.py"], topic="a")
    repo.write("lib/moved.py", RETRY.replace("\n", "\r\n"))  # a's content, in worktree form
    quick, full = quick_then_full(home, repo.root / "lib/moved.py")
    assert not quick and full is not None
    assert quick_then_full(home, repo.root / "src/b.py") == (True, None)


def test_citations_of_a_former_repository_id_count(make_repo, home):
    repo = make_repo("payments", remote="https://git.old-host.example/acme/payments.git")
    repo.write("src/retry.py", RETRY)
    repo.write("src/other.py", "x = 1\n")
    repo.commit("init")
    build_snapshot(repo.root, home)
    api.remember(home, "Delays double.", repo=repo.root, refs=["src/retry.py::RetryPolicy.next_delay"], topic="d")
    repo.git("remote", "set-url", "origin", "git@new-host.example:acme/payments-service.git")
    build_snapshot(repo.root, home)  # the identity history now links the old id
    repo.write("lib/copy.py", RETRY)
    for path in ("src/retry.py", "lib/copy.py"):
        quick, full = quick_then_full(home, repo.root / path)
        assert not quick and full is not None
    assert quick_then_full(home, repo.root / "src/other.py") == (True, None)


def test_a_stale_sidecar_is_not_trusted(cited_repo, repo, home):  # noqa: F811
    old = sidecar_bytes(home)
    api.remember(home, "other", repo=repo.root, refs=["src/other.py"], topic="other")
    # as if a writer that keeps no sidecar (another citegraph version) had written the store
    keys_sidecar.sidecar(home.memory_db).write_bytes(old)
    assert keys_sidecar.read(home.memory_db) is None
    quick, full = quick_then_full(home, repo.root / "src/other.py")
    assert not quick and full is not None


@pytest.mark.parametrize("damage", ["missing", "truncated", "flipped", "header", "format", "schema"])
def test_a_missing_or_corrupt_sidecar_takes_the_full_path_and_is_rewritten(cited_repo, repo, home, damage):  # noqa: F811
    path = keys_sidecar.sidecar(home.memory_db)
    raw = path.read_bytes()
    magic, head, body = raw.split(b"\n", 2)
    if damage == "missing":
        path.unlink()
    elif damage == "truncated":
        path.write_bytes(raw[:-5])
    elif damage == "flipped":  # "src/retry.py" no longer listed
        path.write_bytes(raw.replace(b"src/retry.py", b"src/retrz.py"))
    elif damage == "header":
        path.write_bytes(magic + b"\n{not json\n" + body)
    elif damage == "format":
        path.write_bytes(b"citegraph-code-keys 0\n" + head + b"\n" + body)
    else:
        h = json.loads(head)
        h["schema"] = 99
        path.write_bytes(magic + b"\n" + json.dumps(h).encode() + b"\n" + body)
    assert keys_sidecar.read(home.memory_db) is None
    assert quick_then_full(home, repo.root / "src/other.py") == (False, None)
    # the full path's read-only connection found it out of step and wrote it again
    assert keys_sidecar.read(home.memory_db) is not None
    assert quick_then_full(home, repo.root / "src/other.py") == (True, None)
    quick, full = quick_then_full(home, repo.root / "src/retry.py")
    assert not quick and full is not None


DIE = textwrap.dedent("""\
    import os, sys
    from citegraph.graph.store import Home
    from citegraph.memory import api
    from citegraph.memory.lifecycle import store
    store._Gate._close = lambda self: os._exit(0)  # killed after the commit, before the close
    api.remember(Home.open(sys.argv[1]), "late", repo=sys.argv[2], refs=["src/other.py"], topic="late")
    sys.exit(3)
""")


@pytest.mark.parametrize("sidecar_left", [False, True])
def test_a_writer_that_died_before_rewriting_the_sidecar(cited_repo, repo, home, sidecar_left):  # noqa: F811
    old = sidecar_bytes(home)
    p = subprocess.run([sys.executable, "-c", DIE, str(home.root), str(repo.root)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    wal = home.memory_db.with_name(home.memory_db.name + ".wal")
    assert wal.exists() and sidecar_bytes(home).startswith(keys_sidecar.TOMBSTONE)  # marked before the commit
    if sidecar_left:  # had the mark failed, the write-ahead log still betrays the commit
        keys_sidecar.sidecar(home.memory_db).write_bytes(old)
    quick, full = quick_then_full(home, repo.root / "src/other.py")
    assert not quick and full is not None and "late" in full["hookSpecificOutput"]["additionalContext"]
    assert keys_sidecar.read(home.memory_db) is not None  # rewritten by the full path's connections
    quick, full = quick_then_full(home, repo.root / "src/other.py")
    assert not quick and full is not None


def test_a_path_a_ref_reads_otherwise_takes_the_full_path(cited_repo, repo, home):  # noqa: F811
    repo.write("cgs_notes.txt", "notes\n")
    assert not certainly_silent(home.memory_db, repo.root / "cgs_notes.txt")
