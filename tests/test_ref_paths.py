"""Paths in refs (SPEC §19, issue 12 "Paths"): cwd-relative, ./, absolute inside the
repository and GitHub blob/permalink URLs of the same repository are normalised to the
repository-relative form before the SPEC §5 rules apply, which stay strict — one
normalisation (graph/ref_paths.py) for remember, cited, brief, symbols and find."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from citegraph.graph.ref_paths import RefPaths, normalize_ref
from citegraph.indexer.errors import CitegraphError

CORE = """\
class Context:
    def invoke(self, callback):
        return callback()


def helper():
    return 1
"""
URL = "https://github.com/pallets/click"
BLOB = f"{URL}/blob/8e87fb2a1b2c3d4e5f60718293a4b5c6d7e8f901/src/click/core.py"


def cli(home, *args, cwd=None):
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def click_repo(make_repo, home):
    repo = make_repo("click", remote=f"{URL}.git")
    repo.write("src/click/core.py", CORE)
    repo.write("src/click/util.py", "def util():\n    return 2\n")
    repo.write("core.py", "def top():\n    return 0\n")  # same name at the root
    repo.commit("c1")
    r = cli(home, "index", str(repo.root), "--no-service")
    assert r.returncode == 0, r.stderr
    return repo


def ctx(repo, sub: str | None = "") -> RefPaths:
    cwd = None if sub is None else (repo.root / sub if sub else repo.root)
    return RefPaths.at(repo.root, cwd)


# --- the normalisation itself ------------------------------------------------------------------

def test_cwd_relative_from_a_subdirectory(click_repo):
    c = ctx(click_repo, "src/click")
    assert normalize_ref("core.py::Context", c) == "src/click/core.py::Context"
    assert normalize_ref("./core.py#L1-L2", c) == "src/click/core.py#L1-L2"
    assert normalize_ref("../click/util.py", c) == "src/click/util.py"
    # a path that exists only from the root keeps its repository-relative meaning
    assert normalize_ref("src/click/util.py", c) == "src/click/util.py"


def test_from_the_root_refs_are_unchanged_except_a_leading_dot_slash(click_repo):
    c = ctx(click_repo)
    for ref in ("core.py", "src/click/core.py::Context.invoke", "src/click/core.py#L2-L3", "cgs_" + "0" * 32):
        assert normalize_ref(ref, c) == ref
    assert normalize_ref("./src/click/core.py", c) == "src/click/core.py"
    # outside the worktree (or no caller directory): repository-relative as written
    assert normalize_ref("core.py", ctx(click_repo, None)) == "core.py"


def test_absolute_inside_and_outside(click_repo, tmp_path):
    c = ctx(click_repo, "src")
    assert normalize_ref(f"{click_repo.root}/src/click/core.py::Context", c) == "src/click/core.py::Context"
    with pytest.raises(CitegraphError, match="outside the repository"):
        normalize_ref(f"{tmp_path}/elsewhere.py", c)


def test_github_blob_urls_of_the_same_repository(click_repo):
    c = ctx(click_repo, "src/click")
    assert normalize_ref(BLOB, c) == "src/click/core.py"
    assert normalize_ref(BLOB + "#L10-L20", c) == "src/click/core.py#L10-L20"
    assert normalize_ref(BLOB + "#L10", c) == "src/click/core.py#L10"
    assert normalize_ref(BLOB + "?plain=1#L3C5-L4C9", c) == "src/click/core.py#L3-L4"
    assert normalize_ref(f"{URL}/blob/main/src/click/my%20file.py", c) == "src/click/my file.py"
    assert normalize_ref(BLOB.replace("pallets/click", "PALLETS/Click"), c) == "src/click/core.py"
    with pytest.raises(CitegraphError, match="not this repository"):
        normalize_ref(BLOB.replace("pallets/click", "psf/requests"), c)
    with pytest.raises(CitegraphError, match="blob link"):
        normalize_ref(f"{URL}/tree/main/src", c)


def test_the_rules_stay_strict_after_normalisation(click_repo):
    c = ctx(click_repo, "src/click")
    with pytest.raises(CitegraphError, match="climbs above the repository root"):
        normalize_ref("../../../x.py", c)
    # inner empty, '.' and '..' segments are not rewritten: SPEC §5 refuses them
    assert normalize_ref("a//b.py", ctx(click_repo)) == "a//b.py"
    assert normalize_ref("a/../b.py", ctx(click_repo)) == "a/../b.py"


# --- every command that reads a ref ------------------------------------------------------------

def remember(home, repo, *refs, cwd):
    args = ["remember", "--repo", ".", "--text", "x", "--json", "--no-service"]
    for r in refs:
        args += ["--code-ref", r]
    return cli(home, *args, cwd=cwd)


def test_remember_from_a_subdirectory_accepts_each_spelling(click_repo, home):
    sub = click_repo.root / "src/click"
    for ref in ("core.py::Context", "./core.py::Context", f"{sub}/core.py::Context", BLOB):
        r = remember(home, click_repo, ref, cwd=sub)
        assert r.returncode == 0, (ref, r.stderr)
        c = json.loads(r.stdout)["citations"][0]
        assert c["path"] == "src/click/core.py", ref
    r = remember(home, click_repo, BLOB + "#L2-L3", cwd=sub)
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)["citations"][0]
    assert (c["kind"], c["ref"]) == ("span", "src/click/core.py#L2-L3")  # stored normalised


def test_remember_rejects_with_one_clear_line(click_repo, home, tmp_path):
    sub = click_repo.root / "src/click"
    outside = tmp_path / "outside.py"
    outside.write_text("x = 1\n")
    for ref, why in ((str(outside), "outside the repository"),
                     (BLOB.replace("pallets/click", "psf/requests"), "not this repository"),
                     ("../../../etc/passwd", "climbs above the repository root"),
                     ("a//b.py", "empty, '.' or '..' path segments")):
        r = remember(home, click_repo, ref, cwd=sub)
        assert r.returncode == 2, (ref, r.stdout)
        assert r.stderr.count("\n") == 1 and why in r.stderr, r.stderr
    assert json.loads(cli(home, "list", "--json").stdout)["memories"] == []  # nothing stored


def test_cited_symbols_find_and_brief_take_the_same_spellings(click_repo, home):
    sub = click_repo.root / "src/click"
    assert remember(home, click_repo, "src/click/core.py::Context.invoke", cwd=click_repo.root).returncode == 0
    for ref in ("core.py::Context.invoke", f"{sub}/core.py", BLOB + "#L2-L3"):
        r = cli(home, "cited", ref, "--json", "--no-service", cwd=sub)
        assert r.returncode == 0, (ref, r.stderr)
        assert len(json.loads(r.stdout)["memories"]) == 1, ref
    for spelled in ("core.py", "./core.py", BLOB):
        r = cli(home, "symbols", spelled, "--json", "--no-service", cwd=sub)
        assert r.returncode == 0, (spelled, r.stderr)
        assert {s["qualified_name"] for s in json.loads(r.stdout)["symbols"]} == {"Context", "Context.invoke", "helper"}
    r = cli(home, "find", "helper", "--path", "./core.py", "--json", "--no-service", cwd=sub)
    assert [s["path"] for s in json.loads(r.stdout)["symbols"]] == ["src/click/core.py"]
    b = cli(home, "brief", "--task", "unrelated words", "--code-ref", "core.py::Context.invoke", "--json",
            "--no-service", cwd=sub)
    assert b.returncode == 0, b.stderr
    data = json.loads(b.stdout)
    assert [m["id"] for m in data["memories"]]  # the memory citing it ranks in
    assert not [i for i in data["issues"] if i["kind"] == "invalid-code-ref"]
    bad = cli(home, "brief", "--task", "x", "--code-ref", "/etc/passwd", "--json", "--no-service", cwd=sub)
    assert bad.returncode == 0
    assert any("outside the repository" in i["message"] for i in json.loads(bad.stdout)["issues"])


def test_the_api_the_mcp_server_calls_reads_refs_from_its_repo_path(click_repo, home):
    """The MCP tools pass callerCwd as ``repo`` (server/mcp_server.py): without ``cwd``,
    relative refs are read from that directory, so an agent in src/click cites
    ``core.py::Context`` as a person there would."""
    from citegraph.memory import api

    res = api.remember(home, "x", repo=str(click_repo.root / "src/click"), refs=["core.py::Context", BLOB])
    assert [c["path"] for c in res["citations"]] == ["src/click/core.py", "src/click/core.py"]
    assert "ref 'core.py::Context' taken as 'src/click/core.py::Context'" in res["notes"]
    with pytest.raises(CitegraphError, match="outside the repository"):
        api.remember(home, "y", repo=str(click_repo.root), refs=["/etc/hosts"])
