"""`citegraph validate` (SPEC §6.5, §6.6, §16): output formats, exit codes, aggregation,
legacy memories and --at REV from the object database."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from gitutil import GitRepo
from validation_helpers import (
    RETRY,
    ChangeBeforeRecheck,
    assert_obs,
    cite,
    cli,
    handle,
    index,
    loc,
    memory_verdict,
)

from citegraph.graph.store import Home
from citegraph.memory.lifecycle.store import MemoryStore

OUTCOMES = {"exact", "relocated", "changed", "deleted", "unknown"}
OBSERVED_KEYS = {"path", "start_line", "end_line", "handle"}


def in_process(w, *args: str):
    """The CLI in this process (fast); exit codes are the real ones (SystemExit)."""
    return cli(w.home, *args)


def validate_cli(run_cli, w, *args: str):
    """The CLI in a subprocess at the repository's worktree."""
    return run_cli("--home", str(w.home.root), "validate", *args, cwd=w.repo.root)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Four projects, built once: 'fresh' (exact), 'stale' (changed + exact), 'moved'
    (relocated only) and 'unk' (a memory without citations or source commit)."""
    root = tmp_path_factory.mktemp("world")
    repo, home = GitRepo(root / "repo"), Home.open(root / "home")
    repo.write("src/retry.py", RETRY)
    repo.write("src/keep.py", "K = 1\n")
    repo.write("src/move.py", "M = 1\n")
    repo.commit("c1")
    index(repo, home)
    mems = {
        "fresh": cite(home, repo, "src/keep.py", project="fresh", topic="t"),
        "stale": cite(home, repo, "src/retry.py::helper", "src/keep.py#L1-L1", project="stale", topic="t"),
        "moved": cite(home, repo, "src/move.py", project="moved", topic="t"),
        "unk": cite(home, repo, project="unk", topic="t"),
    }
    repo.write("src/retry.py", RETRY.replace("return 42", "return 43"))
    repo.mv("src/move.py", "lib/move.py")
    repo.commit("c2")
    index(repo, home)
    return SimpleNamespace(repo=repo, home=home, mems=mems)


# --- formats ---------------------------------------------------------------------------------


def test_json_shape(run_cli, world):
    r = validate_cli(run_cli, world, "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data) >= {"memories", "summary"}
    assert set(data["summary"]) == OUTCOMES and all(isinstance(v, int) for v in data["summary"].values())
    assert data["summary"] == {"exact": 2, "relocated": 1, "changed": 1, "deleted": 0, "unknown": 0}
    by_id = {m["id"]: m for m in data["memories"]}
    assert set(by_id) == {m["id"] for m in world.mems.values()}
    for m in data["memories"]:
        assert set(m) >= {"id", "freshness", "status", "citations"}
        assert m["freshness"] in {"fresh", "stale", "unknown"}
        assert m["status"] in OUTCOMES | {None}
        for c in m["citations"]:
            assert set(c) >= {"id", "ref", "kind", "outcome", "reason", "observed"}
            assert c["kind"] in {"file", "span", "symbol"} and c["outcome"] in OUTCOMES
            assert c["observed"] is None or set(c["observed"]) == OBSERVED_KEYS
    stale = by_id[world.mems["stale"]["id"]]
    assert (stale["freshness"], stale["status"]) == ("stale", "changed")
    sym, span = stale["citations"]
    assert (sym["id"], sym["ref"], sym["kind"]) == (world.mems["stale"]["citations"][0]["id"],
                                                    "src/retry.py::helper", "symbol")
    assert_obs(sym, "changed", None, loc("src/retry.py", 12, 13, handle("src/retry.py", "helper")))
    assert (span["ref"], span["kind"]) == ("src/keep.py#L1-L1", "span")
    assert_obs(span, "exact", None, loc("src/keep.py", 1, 1))
    fresh = by_id[world.mems["fresh"]["id"]]
    assert (fresh["freshness"], fresh["status"]) == ("fresh", "exact")
    unk = by_id[world.mems["unk"]["id"]]
    assert (unk["freshness"], unk["status"], unk["citations"]) == ("unknown", None, [])


def test_jsonl_prints_one_memory_per_line(run_cli, world):
    full = json.loads(in_process(world, "validate", "--repo", str(world.repo.root), "--format", "json").stdout)
    r = validate_cli(run_cli, world, "--format", "jsonl")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 4
    assert [json.loads(line) for line in lines] == full["memories"]


def test_text_output(run_cli, world):
    r = validate_cli(run_cli, world)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert all(line == line.rstrip() for line in out)  # no trailing spaces
    stale = out.index(next(line for line in out if line.startswith(world.mems["stale"]["id"])))
    # id, freshness, status, then project/topic and a quoted excerpt of the text (SPEC §19)
    assert out[stale].split()[:4] == [world.mems["stale"]["id"], "stale", "changed", "stale/t"]
    assert out[stale + 1].split() == ["changed", "src/retry.py::helper"]
    assert out[stale + 2].split() == ["exact", "src/keep.py#L1-L1"]
    moved = out.index(next(line for line in out if line.startswith(world.mems["moved"]["id"])))
    assert out[moved].split()[:3] == [world.mems["moved"]["id"], "fresh", "relocated"]
    assert out[moved + 1].split() == ["relocated", "src/move.py", "→", "lib/move.py"]
    unk = next(line for line in out if line.startswith(world.mems["unk"]["id"]))
    assert unk.split()[:3] == [world.mems["unk"]["id"], "unknown", "-"] and unk.endswith("(no-basis)")
    # memories by freshness, then citations by outcome
    assert out[-1] == ("summary: 4 memories (fresh 2, stale 1, unknown 1); "
                       "4 citations (exact 2, relocated 1, changed 1, deleted 0, unknown 0)")


# --- aggregation ---------------------------------------------------------------------------------


def test_relocated_only_is_fresh_with_a_stale_link_warning(world):
    m = memory_verdict(world.home, world.repo, world.mems["moved"])
    assert (m["freshness"], m["status"]) == ("fresh", "relocated")
    cid = world.mems["moved"]["citations"][0]["id"]
    assert m["warnings"] == [f"stale-link: {cid} now at lib/move.py"]
    assert_obs(m["citations"][0], "relocated", None, loc("lib/move.py"))


def test_changed_plus_exact_is_stale_changed(world):
    m = memory_verdict(world.home, world.repo, world.mems["stale"])
    assert (m["freshness"], m["status"]) == ("stale", "changed")
    assert [c["outcome"] for c in m["citations"]] == ["changed", "exact"]
    assert "warnings" not in m


def test_unknown_plus_relocated_is_unknown(home, repo):
    repo.write("a.py", "A = 1\n")
    repo.write("b.py", "B = 1\n")
    repo.commit("c1")
    index(repo, home)
    mem = cite(home, repo, "a.py", "b.py")
    repo.mv("a.py", "x/a.py")  # relocated
    repo.mv("b.py", "y/b.py")
    repo.write("z/b.py", "B = 1\n")  # b: two copies → ambiguous
    repo.commit("c2")
    index(repo, home)
    m = memory_verdict(home, repo, mem)
    assert [(c["outcome"], c["reason"]) for c in m["citations"]] == [
        ("relocated", None), ("unknown", "ambiguous-relocation")]
    assert (m["freshness"], m["status"]) == ("unknown", "unknown")


# --- exit codes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("project", "fail_on", "code"), [
    ("fresh", None, 0), ("fresh", "stale", 0), ("fresh", "unknown", 0),
    ("moved", "stale", 0), ("moved", "unknown", 0),
    ("unk", "stale", 0), ("unk", "unknown", 1),
    ("stale", None, 0), ("stale", "stale", 1), ("stale", "unknown", 1),
])
def test_fail_on_exit_codes(world, project, fail_on, code):
    args = ["--project", project, "--format", "json"] + (["--fail-on", fail_on] if fail_on else [])
    r = in_process(world, "validate", "--repo", str(world.repo.root), *args)
    assert r.exit_code == code, r.output
    assert len(json.loads(r.stdout)["memories"]) == 1  # the report is printed either way


def test_fail_on_in_a_subprocess(run_cli, world):
    assert validate_cli(run_cli, world, "--fail-on", "stale").returncode == 1


@pytest.mark.parametrize("args", [
    ["--format", "xml"], ["--fail-on", "changed"], ["--all", "--memory", "cgm_0000000000000000"],
    ["--memory", "cgm_0000000000000000"], ["--at", "no-such-rev"], ["--bogus"],
])
def test_usage_errors_exit_2(world, args):
    r = in_process(world, "validate", "--repo", str(world.repo.root), *args)
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_usage_error_in_a_subprocess(run_cli, world):
    r = validate_cli(run_cli, world, "--at", "no-such-rev")
    assert r.returncode == 2 and "not a commit" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_not_a_repository_exits_3(run_cli, tmp_path, home):
    plain = tmp_path / "plain"
    plain.mkdir()
    r = run_cli("validate", cwd=plain)
    assert r.returncode == 3 and "not a git repository" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli(home, "validate", "--repo", str(plain), cwd=plain)
    assert r.exit_code == 3 and "not a git repository" in r.stderr
    r = cli(home, "validate", "--repo", str(tmp_path / "missing"), cwd=plain)
    assert r.exit_code == 3 and "no such directory" in r.stderr


# --- legacy memories (§6.5) ---------------------------------------------------------------------


def legacy(home, repo, source_commit, topic):
    return cite(home, repo, topic=topic, source_commit=source_commit)


def test_legacy_memories(repo, home):
    repo.write("a.py", "A = 1\n")
    c1 = repo.commit("c1")
    repo.git("checkout", "-q", "-b", "side")
    repo.write("side.py", "S = 1\n")
    side = repo.commit("side commit")
    repo.git("checkout", "-q", "main")
    repo.write("a.py", "A = 2\n")
    c2 = repo.commit("c2")
    # Through the CLI, as users write them: HEAD is stored as the commit it names now.
    r = cli(home, "remember", "--text", "claim at HEAD", "--topic", "head", "--source-commit", "HEAD",
            "--json", "--repo", str(repo.root))
    assert r.exit_code == 0, r.output
    r_bad = cli(home, "remember", "--text", "x", "--topic", "bad", "--source-commit", "no-such-rev",
                "--repo", str(repo.root))
    assert r_bad.exit_code == 2 and "not a commit" in r_bad.stderr
    mems = {
        "head": json.loads(r.stdout),
        "behind": legacy(home, repo, c1, "behind"),
        "not-ancestor": legacy(home, repo, side, "not-ancestor"),
        "gone": legacy(home, repo, "0123456789abcdef0123456789abcdef01234567", "gone"),
        "no-basis": legacy(home, repo, None, "no-basis"),
    }

    def verdict(name):
        m = memory_verdict(home, repo, mems[name])
        return m["freshness"], m["status"], m["reason"], m.get("warnings", [])

    # Legacy memories need no snapshot at all: they are judged by git alone.
    assert verdict("head") == ("fresh", None, None, [])
    assert verdict("behind") == ("unknown", None, "source-commit-behind", ["source commit is 1 commit(s) behind HEAD"])
    assert verdict("not-ancestor") == ("stale", None, "source-commit-not-ancestor", [])
    assert verdict("gone") == ("stale", None, "source-commit-gone", [])
    assert verdict("no-basis") == ("unknown", None, "no-basis", [])
    repo.write("a.py", "A = 3\n")  # HEAD, but the worktree is dirty
    assert verdict("head") == ("unknown", None, "dirty-worktree", [])
    repo.write("a.py", "A = 2\n")
    repo.write("b.py", "B = 1\n")
    c3 = repo.commit("c3")
    assert c3 != c2
    assert verdict("head")[:3] == ("unknown", None, "source-commit-behind")  # not "HEAD" re-read
    with MemoryStore.open(home) as ms:
        assert ms.require(mems["head"]["id"]).source_commit == c2
    r = cli(home, "validate", "--format", "json", "--fail-on", "stale", "--memory", mems["gone"]["id"],
            cwd=repo.root)
    assert r.exit_code == 1
    assert json.loads(r.stdout)["memories"][0]["freshness"] == "stale"


# --- --at REV (acceptance 6) ---------------------------------------------------------------------


def test_validate_at_a_commit_that_is_not_checked_out(run_cli, repo, home):
    repo.write("src/retry.py", RETRY)
    c1 = repo.commit("c1")
    index(repo, home)
    mem = cite(home, repo, "src/retry.py::helper", "src/retry.py#L12-L13")
    repo.write("src/retry.py", RETRY.replace("return 42", "return 43"))
    c2 = repo.commit("c2: helper changes")
    repo.write("src/retry.py", RETRY)
    repo.commit("c3: helper restored")
    repo.checkout(c1)  # the worktree is elsewhere (detached at c1) ...
    repo.write("src/retry.py", "# dirty\n")  # ... and dirty
    r = run_cli("index", "--rev", c2, "--json", cwd=repo.root)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["commit"] == c2
    r = run_cli("validate", "--at", c2, "--format", "json", "--fail-on", "stale", cwd=repo.root)
    assert r.returncode == 1, r.stderr
    (m,) = json.loads(r.stdout)["memories"]
    assert m["id"] == mem["id"] and (m["freshness"], m["status"]) == ("stale", "changed")
    sym, span = m["citations"]
    assert_obs(sym, "changed", None, loc("src/retry.py", 12, 13, handle("src/retry.py", "helper")))
    assert_obs(span, "changed", None, loc("src/retry.py"))
    # The same citations against the worktree state: not current (dirty, no overlay).
    r = cli(home, "validate", "--format", "json", cwd=repo.root)
    assert {c["reason"] for c in json.loads(r.stdout)["memories"][0]["citations"]} == {"not-current"}
    # An unindexed commit gives no authoritative answer.
    r = cli(home, "validate", "--at", "main", "--format", "json", cwd=repo.root)
    assert {c["reason"] for c in json.loads(r.stdout)["memories"][0]["citations"]} == {"not-current"}


def test_at_rev_racing_check_uses_the_commit_not_the_worktree(repo, home):
    repo.write("src/retry.py", RETRY)
    c1 = repo.commit("c1")
    index(repo, home)
    mem = cite(home, repo, "src/retry.py")

    def edit_worktree() -> None:
        repo.write("src/retry.py", "changed in the worktree\n")
        repo.write("new.py", "N = 1\n")
        repo.commit("a commit on the branch")

    m = memory_verdict(home, repo, mem, at=c1, source=ChangeBeforeRecheck(edit_worktree))
    assert_obs(m["citations"][0], "exact", None, loc("src/retry.py"))
