"""Finding a handle (SPEC §19, issue 12 "Finding a handle"): find matches exact,
qualified-suffix, prefix, glob and substring, ranked in that order (then shorter
qualified names), with --kind and --path; a ref naming no symbol suggests by closeness of
names, never by file order — in every command that resolves refs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from citegraph.graph.symbol_search import close_paths, close_symbols

CORE = """\
def aaa_first():
    return 0


def zzz_second():
    return 0


class Context:
    def invoke(self, callback):
        return callback()

    def invoke_all(self):
        return None

    def forward(self):
        return self.invoke(None)


def invoke(ctx):
    return ctx.invoke(None)
"""

RETRY = """\
class RetryPolicy:
    def next_delay(self, attempt):
        return min(2 ** attempt, 30)


def next_delay_default():
    return 1
"""


def cli(home, *args, cwd=None):
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def world(repo, home):
    repo.write("src/click/core.py", CORE)
    repo.write("src/payments/retry.py", RETRY)
    repo.write("tests/test_core.py", "def test_invoke():\n    assert True\n")
    repo.commit("c1")
    r = cli(home, "index", str(repo.root), "--no-service")
    assert r.returncode == 0, r.stderr
    return repo


def find(home, repo, *args):
    r = cli(home, "find", *args, "--repo", str(repo.root), "--json", "--no-service")
    assert r.returncode in (0, 1), r.stderr
    return [(s["path"], s["qualified_name"], s["match"]) for s in json.loads(r.stdout)["symbols"]], r.returncode


def test_readme_find_next_delay_finds_the_method(world, home):
    rows, code = find(home, world, "next_delay")
    assert code == 0
    assert rows[0] == ("src/payments/retry.py", "RetryPolicy.next_delay", "qualified-suffix")
    assert ("src/payments/retry.py", "next_delay_default", "prefix") in rows


def test_qualified_suffix_with_a_partial_last_part(world, home):
    rows, _ = find(home, world, "Context.inv")
    assert rows == [("src/click/core.py", "Context.invoke", "prefix"),
                    ("src/click/core.py", "Context.invoke_all", "prefix")]


def test_glob(world, home):
    rows, code = find(home, world, "invok*")
    assert code == 0
    names = [q for _, q, _ in rows]
    assert {"invoke", "Context.invoke", "Context.invoke_all"} <= set(names)
    assert "test_invoke" not in names  # a glob is anchored at a name part
    assert all(m in ("exact", "qualified-suffix", "prefix", "glob") for _, _, m in rows)


def test_ranking_exact_then_suffix_then_prefix_then_substring(world, home):
    rows, _ = find(home, world, "invoke")
    assert rows[0] == ("src/click/core.py", "invoke", "exact")
    assert rows[1] == ("src/click/core.py", "Context.invoke", "qualified-suffix")
    assert rows[2] == ("src/click/core.py", "Context.invoke_all", "prefix")
    assert rows[-1] == ("tests/test_core.py", "test_invoke", "substring")
    order = ["exact", "qualified-suffix", "prefix", "glob", "substring"]
    tiers = [order.index(m) for _, _, m in rows]
    assert tiers == sorted(tiers)


def test_shorter_qualified_names_first_within_a_tier(world, home):
    rows, _ = find(home, world, "Context.invoke*")
    globbed = [q for _, q, m in rows if m == "glob"]
    assert globbed == ["Context.invoke", "Context.invoke_all"]


def test_kind_and_path_filters(world, home):
    rows, _ = find(home, world, "invoke", "--kind", "function")
    assert [q for _, q, _ in rows] == ["invoke", "test_invoke"]
    rows, _ = find(home, world, "invoke", "--path", "tests")
    assert [q for _, q, _ in rows] == ["test_invoke"]
    rows, _ = find(home, world, "invoke", "--path", "src/click/*.py", "--kind", "method")
    assert [q for _, q, _ in rows] == ["Context.invoke", "Context.invoke_all"]
    # --path is a ref path like any other: cwd-relative from a subdirectory
    r = cli(home, "find", "invoke", "--path", ".", "--json", "--no-service", cwd=world.root / "tests")
    assert [s["qualified_name"] for s in json.loads(r.stdout)["symbols"]] == ["test_invoke"]


def test_no_match_exits_1_with_a_message(world, home):
    r = cli(home, "find", "nothing_like_this_at_all", "--repo", str(world.root), "--no-service")
    assert r.returncode == 1 and r.stdout == "" and "no symbol matches" in r.stderr


# --- suggestions by closeness ----------------------------------------------------------------------

def test_close_symbols_ranks_by_name_not_file_order():
    rows = [{"qualified_name": q, "name": q.rsplit(".", 1)[-1], "start_line": i}
            for i, q in enumerate(["aaa_first", "zzz_second", "Context", "Context.invoke", "invoke"])]
    assert [r["qualified_name"] for r in close_symbols("Contxt", rows)][:1] == ["Context"]
    assert [r["qualified_name"] for r in close_symbols("Context.invok", rows)][:1] == ["Context.invoke"]
    # nothing close: still the nearest by the same score, not the first rows of the file
    assert close_symbols("qqqq", rows, n=2)
    assert close_paths("src/click/cor.py", ["src/click/core.py", "src/a.py"]) == ["src/click/core.py"]
    assert close_paths("core.py", ["src/click/core.py", "src/x/y.py"]) == ["src/click/core.py"]


def test_a_typo_in_remember_suggests_the_close_name(world, home):
    r = cli(home, "remember", "--repo", str(world.root), "--text", "x", "--code-ref", "src/click/core.py::Contxt")
    assert r.returncode == 2
    line = r.stderr.strip()
    assert "\n" not in line
    assert "closest:" in line and "src/click/core.py::Context " in line
    # the first symbols of the file (aaa_first, zzz_second) are not what is offered
    assert line.split("closest: ", 1)[1].split(" ")[2] == "src/click/core.py::Context"
    assert "aaa_first" not in line


def test_a_typo_in_a_path_suggests_the_close_path(world, home):
    r = cli(home, "remember", "--repo", str(world.root), "--text", "x", "--code-ref", "src/click/cor.py::Context")
    assert r.returncode == 2 and "closest: src/click/core.py" in r.stderr


def test_a_name_defined_in_another_file_is_pointed_to(world, home):
    r = cli(home, "remember", "--repo", str(world.root), "--text", "x",
            "--code-ref", "src/click/core.py::RetryPolicy.next_delay")
    assert r.returncode == 2
    assert "defined elsewhere: src/payments/retry.py::RetryPolicy.next_delay" in r.stderr


def test_cited_uses_the_same_suggestion(world, home):
    r = cli(home, "cited", "src/click/core.py::Contxt", "--repo", str(world.root), "--json", "--no-service")
    assert r.returncode == 1  # nothing cites it
    note = json.loads(r.stdout)["refs"][0]["note"]
    assert "closest:" in note and "src/click/core.py::Context " in note


def test_cited_suggests_the_full_name_for_a_partial_one(world, home):
    ok = cli(home, "remember", "--repo", str(world.root), "--topic", "t", "--text", "invoke context",
             "--code-ref", "src/click/core.py::Context.invoke")
    assert ok.returncode == 0, ok.stderr
    r = cli(home, "cited", "src/click/core.py::Context.invok", "--repo", str(world.root), "--json", "--no-service")
    note = json.loads(r.stdout)["refs"][0]["note"]
    assert note.split("closest: ", 1)[1].split(" ")[0].startswith("cgs_")
    assert "src/click/core.py::Context.invoke " in note
