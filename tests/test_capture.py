"""Capture (SPEC §5): refs resolve only against the exact-current ready snapshot; one bad
ref fails the whole write; racing is detected; nothing is stored on any failure."""

from __future__ import annotations

import json
import os

import pytest
from gitutil import GitRepo
from validation_helpers import HELPER, RETRY, ChangeBeforeRecheck, cite, cli, handle, index

from citegraph.graph.current import current_state
from citegraph.graph.handles import repo_handle
from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory.lifecycle.store import MemoryStore
from citegraph.validator.capture import capture

PROPERTY = """\
class Temperature:
    @property
    def celsius(self):
        return self._c

    @celsius.setter
    def celsius(self, value):
        self._c = value
"""


def stored(home: Home) -> list:
    with MemoryStore.open(home) as ms:
        return ms.load()


def expect_error(code: int, fn, *args, **kw) -> CitegraphError:
    with pytest.raises(CitegraphError) as info:
        fn(*args, **kw)
    assert info.value.code == code, info.value.line()
    return info.value


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One indexed repository for the read-only rejection cases (they mutate nothing)."""
    root = tmp_path_factory.mktemp("capture")
    repo = GitRepo(root / "repo")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("SECRET = 1\n")
    repo.write("src/retry.py", RETRY)
    repo.write("src/temp.py", PROPERTY)
    repo.write(".gitignore", "*.log\n")
    repo.write("debug.log", "ignored\n")
    os.symlink("/etc/passwd", repo.root / "link.py")
    os.symlink(str(outside), repo.root / "ext")
    repo.commit("c1")
    home = Home.open(root / "home")
    index(repo, home)
    return repo, home


# --- exact-current requirement -------------------------------------------------------------


def test_no_snapshot_is_a_retryable_error_naming_citegraph_index(repo, home, run_cli):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    r = run_cli("remember", "--text", "claim", "--code-ref", "src/retry.py", "--repo", str(repo.root))
    assert r.returncode == 1, r.stderr
    assert "citegraph index" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert json.loads(cli(home, "list", "--json").stdout) == {"memories": []}
    # Capture never starts indexing.
    assert current_state(repo.root, home).entry is None


def test_stale_snapshot_and_dirty_state_are_not_current(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    repo.write("src/other.py", "X = 1\n")
    repo.commit("c2")  # the ready snapshot is of c1 now
    err = expect_error(1, cite, home, repo, "src/retry.py")
    assert err.retryable and err.kind == "not-current" and "citegraph index" in err.line()
    index(repo, home)
    repo.write("src/other.py", "X = 2\n")  # dirty, no overlay built
    err = expect_error(1, cite, home, repo, "src/retry.py")
    assert err.retryable and "dirty worktree" in err.what
    assert stored(home) == []


# --- ref rules -------------------------------------------------------------------------------


SEGMENTS = "empty, '.' or '..' path segments are not allowed"
ABSOLUTE = "absolute paths are not allowed"
NOT_IN_SNAPSHOT = "is not in the current snapshot"


@pytest.mark.parametrize(("ref", "why"), [
    # ../, ./ and absolute paths are normalised first (SPEC §19, graph/ref_paths.py): what
    # climbs above the root or lies outside the repository is refused there
    ("../x", "climbs above the repository root"), ("/etc/passwd", "outside the repository"),
    ("a\\b", "backslashes are not allowed"), ("./x", NOT_IN_SNAPSHOT), ("", "empty ref"), ("   ", "empty ref"), ("src//retry.py", SEGMENTS),
    ("src/./retry.py", SEGMENTS), ("src/../src/retry.py", SEGMENTS), ("C:/x.py", ABSOLUTE),
    ("../x#L1-L2", "climbs above the repository root"), ("/etc/passwd::x", "outside the repository"),
    ("src/retry.py#L0-L2", "1-based"), ("src/retry.py#L5-L2", "start ≤ end"),
    ("src/retry.py#L1-L99", "has 13 lines"), ("src/retry.py#X", "a span is path#L"),
    ("src/retry.py::", "symbol name after :: is empty"), ("src/retry.py::A..b", "malformed"),
    ("missing.py", NOT_IN_SNAPSHOT), ("debug.log", NOT_IN_SNAPSHOT),  # ignored by .gitignore
])
def test_rejected_refs(shared, ref, why):
    repo, home = shared
    err = expect_error(2, cite, home, repo, "src/retry.py", ref)  # one bad ref fails all
    assert why in err.what
    assert err.line().startswith("citegraph: ") and "\n" not in err.line()
    assert stored(home) == []


@pytest.mark.parametrize("ref", ["link.py", "link.py#L1-L1", "link.py::x", "ext/secret.py", "ext/secret.py::SECRET"])
def test_symlinks_pointing_outside_are_rejected(shared, ref):
    repo, home = shared
    err = expect_error(2, cite, home, repo, ref)
    assert "symlink" in err.what or "not in the current snapshot" in err.what or "outside" in err.what
    assert stored(home) == []


def test_nine_refs_is_a_usage_error(repo, home):
    for i in range(9):
        repo.write(f"f{i}.py", f"V = {i}\n")
    repo.commit("c1")
    index(repo, home)
    args = [a for i in range(9) for a in ("--code-ref", f"f{i}.py")]
    r = cli(home, "remember", "--text", "claim", "--repo", str(repo.root), *args)
    assert r.exit_code == 2 and "at most 8" in r.stderr
    assert json.loads(cli(home, "list", "--json").stdout) == {"memories": []}
    # Duplicates are removed before the bound is checked: 8 distinct refs are fine, and
    # the collapse is told, not silent.
    refs = [f"f{i}.py" for i in range(8)] + ["f0.py"]
    mem = cite(home, repo, *refs)
    assert [c["ref"] for c in mem["citations"]] == [f"f{i}.py" for i in range(8)]
    assert mem["notes"] == ["ref 'f0.py' was given twice; stored once"]
    # A ref is never stripped: surrounding whitespace is an error that shows it.
    err = expect_error(2, cite, home, repo, " f1.py ")
    assert "' f1.py '" in err.what and "whitespace" in err.what


@pytest.mark.parametrize("ref", ["cgs_123", "cgr_zz", "cgs_" + "A" * 32, "cgr_" + "0" * 16 + "_" + "0" * 31,
                                 "cgs_" + "0" * 33])
def test_malformed_handles_exit_2(shared, ref):
    repo, home = shared
    r = cli(home, "remember", "--text", "claim", "--code-ref", ref, "--repo", str(repo.root))
    assert r.exit_code == 2, r.output
    assert "handle" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_malformed_handle_in_a_subprocess(shared, run_cli):
    repo, home = shared
    r = run_cli("--home", str(home.root), "remember", "--text", "claim", "--code-ref", "cgs_123",
                "--repo", str(repo.root))
    assert r.returncode == 2 and "cgs_ followed by 32 lowercase hex" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_unknown_well_formed_handle_is_rejected(shared):
    repo, home = shared
    err = expect_error(2, cite, home, repo, "cgs_" + "0" * 32)
    assert "no symbol with this handle" in err.what


def test_ambiguous_symbol_lists_candidates_with_handles(shared):
    repo, home = shared
    err = expect_error(2, cite, home, repo, "src/temp.py::Temperature.celsius")
    getter = handle("src/temp.py", "Temperature.celsius", "method", 1)
    setter = handle("src/temp.py", "Temperature.celsius", "method", 2)
    assert "2 symbols match" in err.what
    # candidates carry their ordinal, the spelling that names one of them (SPEC §18)
    assert f"{getter} method src/temp.py::Temperature.celsius[1] L2-4" in err.what
    assert f"{setter} method src/temp.py::Temperature.celsius[2] L6-8" in err.what
    assert "src/temp.py::Temperature.celsius[N]" in err.todo
    # Either candidate can then be cited by its handle.
    mem = cite(home, repo, setter, topic="ambiguous-ok")
    assert mem["citations"][0]["handle"] == setter and mem["citations"][0]["path"] == "src/temp.py"
    with MemoryStore.open(home) as ms:
        ms.forget(mem["id"])  # the shared home stays empty for the other cases


def test_unknown_symbol_lists_candidates(shared):
    repo, home = shared
    err = expect_error(2, cite, home, repo, "src/retry.py::RetryPolicy.helper")
    assert "no symbol RetryPolicy.helper in src/retry.py" in err.what
    assert f"{handle('src/retry.py', 'helper')} function src/retry.py::helper L12-13" in err.what
    err = expect_error(2, cite, home, repo, "src/retry.py::nothing_like_it")
    assert handle("src/retry.py", "RetryPolicy", "class") in err.what  # falls back to the file's symbols


def test_repository_handle_of_another_repository_is_rejected(shared, make_repo):
    repo, home = shared
    other = make_repo("other")
    other.write("x.py", HELPER)
    other.commit("c1")
    other_id = current_state(other.root, home).identity.repository_id
    mine = current_state(repo.root, home).identity.repository_id
    h = handle("src/retry.py", "helper")
    err = expect_error(2, cite, home, repo, repo_handle(other_id, h))
    assert "belongs to repository" in err.what
    mem = cite(home, repo, repo_handle(mine, h), topic="cgr-ok")
    assert mem["citations"][0]["handle"] == h
    with MemoryStore.open(home) as ms:
        ms.forget(mem["id"])


# --- racing, dirty, duplicates, rewrite ----------------------------------------------------


def test_head_move_between_resolve_and_store_is_retryable(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)

    def move_head() -> None:
        repo.write("src/new.py", "N = 1\n")
        repo.commit("racing commit")

    err = expect_error(1, cite, home, repo, "src/retry.py", source=ChangeBeforeRecheck(move_head))
    assert err.retryable and err.kind == "racing"
    assert stored(home) == []


def test_dirty_edit_between_resolve_and_store_is_retryable(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    err = expect_error(1, cite, home, repo, "src/retry.py::helper",
                       source=ChangeBeforeRecheck(lambda: repo.write("src/retry.py", RETRY + "\n")))
    assert err.retryable and err.kind == "racing"
    assert stored(home) == []


def test_citation_into_a_dirty_file_is_marked_dirty(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.write("src/clean.py", "C = 1\n")
    repo.commit("c1")
    repo.write("src/retry.py", RETRY.replace("return 42", "return 7"))  # modified
    repo.write("src/untracked.py", HELPER)  # untracked, not ignored
    index(repo, home)  # overlay snapshot
    mem = cite(home, repo, "src/retry.py::helper", "src/retry.py#L1-L1", "src/untracked.py",
               "src/clean.py")
    assert [c["dirty"] for c in mem["citations"]] == [True, True, True, False]
    with MemoryStore.open(home) as ms:
        receipts = ms.require(mem["id"]).citations
    assert {r.commit for r in receipts} == {repo.head()}


def test_receipts_record_the_capture_state(repo, home, run_cli):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    res = index(repo, home)
    r = run_cli("remember", "--text", "claim", "--json", "--code-ref", "src/retry.py",
                "--code-ref", "src/retry.py#L4-L6", "--code-ref", "src/retry.py::helper", cwd=repo.root)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) >= {"id", "citations"}
    assert [(c["ref"], c["kind"], c["path"], c["handle"]) for c in out["citations"]] == [
        ("src/retry.py", "file", "src/retry.py", None),
        ("src/retry.py#L4-L6", "span", "src/retry.py", None),
        ("src/retry.py::helper", "symbol", "src/retry.py", handle("src/retry.py", "helper")),
    ]
    assert all(c["id"].startswith("cgc_") for c in out["citations"])
    with MemoryStore.open(home) as ms:
        f, s, y = ms.require(out["id"]).citations
    blob = repo.git("rev-parse", "HEAD:src/retry.py")
    for rc in (f, s, y):
        assert (rc.commit, rc.snapshot_id, rc.blob_id, rc.dirty) == (repo.head(), res.snapshot_id, blob, False)
    assert (s.start_line, s.end_line) == (4, 6) and s.span_hash
    assert (y.qualified_name, y.symbol_kind, y.ordinal, y.start_line, y.end_line) == ("helper", "function", 0, 12, 13)
    assert y.fragment_hash and y.body_hash and y.fragment_hash != y.body_hash


def test_duplicates_are_removed(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    mem = cite(home, repo, "src/retry.py", "src/retry.py", "src/retry.py#L4-L6", "src/retry.py#L4-L6")
    assert [c["ref"] for c in mem["citations"]] == ["src/retry.py", "src/retry.py#L4-L6"]


def test_same_evidence_collapses_with_a_note(repo, home):
    """#L2 and #L2-L2, a locator and its own handle: one citation each, and a note."""
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    h = handle("src/retry.py", "RetryPolicy.next_delay", "method")
    mem = cite(home, repo, "src/retry.py#L2", "src/retry.py#L2-L2",
               "src/retry.py::RetryPolicy.next_delay", h)
    assert [c["ref"] for c in mem["citations"]] == ["src/retry.py#L2", "src/retry.py::RetryPolicy.next_delay"]
    assert mem["notes"] == [
        "ref 'src/retry.py#L2-L2' names the same evidence as 'src/retry.py#L2'; stored once",
        f"ref '{h}' names the same evidence as 'src/retry.py::RetryPolicy.next_delay'; stored once"]


@pytest.mark.parametrize(("ref", "why"), [
    (" src/retry.py", "whitespace"), ("src/retry.py ", "whitespace"), ("src/retry.py\t", "whitespace"),
    ("src/retry.py#L١-L٢", "ASCII digits"), ("src/retry.py#L1-L99999999999", "line numbers above"),
    ("src/re\x00try.py", "NUL"), ("src/retry.py#L1\n", "whitespace"), ("src/re\ntry.py", "control"),
])
def test_refs_are_taken_exactly_as_written(repo, home, ref, why):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    err = expect_error(2, cite, home, repo, ref)
    assert why in err.what, err.what


def test_capture_without_refs_needs_no_snapshot(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    assert capture(home, repo.root, []) == []
    mem = cite(home, repo, source_commit=repo.head())
    assert mem["citations"] == []


def test_rewriting_text_without_refs_clears_citations(repo, home):
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    index(repo, home)
    first = cite(home, repo, "src/retry.py", "src/retry.py::helper", text="helper returns 42",
                 project="p", topic="t")
    assert len(first["citations"]) == 2
    r = cli(home, "remember", "--text", "helper returns the answer", "--project", "p", "--topic", "t",
            "--repo", str(repo.root))
    assert r.exit_code == 0, r.output
    assert "cleared 2 citation(s)" in r.stdout
    with MemoryStore.open(home) as ms:
        mem = ms.require(first["id"])
        hist = ms.history(first["id"])
    assert (mem.revision, mem.citations, mem.text) == (2, [], "helper returns the answer")
    assert [(h["revision"], len(h["citation_ids"]), h["cleared"]) for h in hist] == [(1, 2, 0), (2, 0, 2)]
    again = cite(home, repo, text="helper returns the answer!", project="p", topic="t")
    assert again["cleared_citations"] == 0  # nothing left to clear
    with_refs = cite(home, repo, "src/retry.py", text="new sentence", project="p", topic="t")
    assert (with_refs["cleared_citations"], len(with_refs["citations"])) == (0, 1)


def test_a_batch_of_refs_reads_its_files_and_their_symbols_in_one_query_each(shared, monkeypatch):
    """The refs' file rows are read together (``Snapshot.files_at``), and the symbols of the
    files that symbol locators name (``symbols_at``): not a read per ref and again per symbol
    (a symbols scan each on ruff, ≈ 9 ms); a handle's file, unknown before its symbol is
    found, is one of them here."""
    from citegraph.graph.snapshot_reader import Snapshot

    repo, home = shared
    other = capture(home, repo.root, ["src/retry.py::RetryPolicy.reset"])[0]
    calls: list[tuple] = []
    for name in ("file", "files_at", "symbols_in", "symbols_at"):
        real = getattr(Snapshot, name)
        monkeypatch.setattr(Snapshot, name, lambda self, arg, _r=real, _n=name: calls.append((_n, arg)) or _r(self, arg))
    got = capture(home, repo.root, ["src/retry.py::RetryPolicy.next_delay", "src/retry.py::helper",
                                    "src/retry.py#L4-L6", "src/temp.py", "src/temp.py::Temperature", other.handle])
    assert [r.path for r in got] == ["src/retry.py"] * 3 + ["src/temp.py"] * 2 + ["src/retry.py"]
    assert calls == [("files_at", ["src/retry.py", "src/retry.py", "src/retry.py", "src/temp.py", "src/temp.py"]),
                     ("symbols_at", ["src/retry.py", "src/retry.py", "src/temp.py"])]
