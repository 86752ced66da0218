"""``citegraph graph callers|callees|deps|dependents REF`` (SPEC §21): bounded traversals of
the resolved edges, output as docs/schemas/graph.schema.json says."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from citegraph.cli.main import cli
from citegraph.graph import graph_view
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.indexer.errors import CitegraphError
from citegraph.validator.impact import graph_query

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "schemas" / "graph.schema.json").read_text())

FILES = {
    "pay/retry.py": "def backoff(n):\n    return n * 2\n\n\ndef with_retry(fn):\n    return backoff(fn())\n",
    "pay/base.py": "class Base:\n    pass\n",
    "pay/charge.py": ("from pay.retry import with_retry\nfrom pay.base import Base\n\n\nclass Charger(Base):\n"
                      "    def charge(self):\n        return with_retry(lambda: 1)\n\n\n"
                      "def refund():\n    return with_retry(lambda: 0)\n"),
    "other/retry.py": "def with_retry(fn):\n    return None\n",
}


@pytest.fixture
def scene(repo, home):
    for p, t in FILES.items():
        repo.write(p, t)
    repo.commit("scene")
    build_snapshot(repo.root, home, jobs=1)
    return repo


def names(data: dict) -> list[tuple[int, str]]:
    return [(n["distance"], f"{n['path']}::{n['qualified_name']}") for n in data["nodes"]]


def test_callers_and_callees_follow_resolved_edges_only(scene, home):
    callers = graph_query(home, scene.root, "callers", "pay/retry.py::with_retry")
    jsonschema.Draft202012Validator(SCHEMA).validate(callers)
    assert names(callers) == [(1, "pay/charge.py::Charger.charge"), (1, "pay/charge.py::refund")]
    # the same name in other/retry.py is not imported by charge.py: nobody calls it
    assert names(graph_query(home, scene.root, "callers", "other/retry.py::with_retry")) == []
    assert names(graph_query(home, scene.root, "callees", "pay/charge.py::Charger.charge")) == [
        (1, "pay/retry.py::with_retry")]
    two = graph_query(home, scene.root, "callees", "pay/charge.py::Charger.charge", depth=2)
    assert names(two) == [(1, "pay/retry.py::with_retry"), (2, "pay/retry.py::backoff")]
    assert all(e["tier"] == "resolved" for e in two["edges"])


def test_deps_and_dependents_include_inheritance(scene, home):
    deps = graph_query(home, scene.root, "deps", "pay/charge.py::Charger")
    assert names(deps) == [(1, "pay/base.py::Base"), (1, "pay/retry.py::with_retry")]
    dependents = graph_query(home, scene.root, "dependents", "pay/retry.py::backoff", depth=3)
    assert names(dependents) == [(1, "pay/retry.py::with_retry"), (2, "pay/charge.py::Charger.charge"),
                                 (2, "pay/charge.py::refund")]


def test_traversal_is_bounded(repo, home):
    chain = "".join(f"def f{i}():\n    return f{i + 1}()\n\n\n" for i in range(30)) + "def f30():\n    return 0\n"
    repo.write("chain.py", chain)
    repo.commit("chain")
    build_snapshot(repo.root, home, jobs=1)
    data = graph_query(home, repo.root, "callees", "chain.py::f0", depth=graph_view.MAX_TRAVERSAL_DEPTH)
    assert [n["qualified_name"] for n in data["nodes"]] == [f"f{i}" for i in range(1, 6)]
    with pytest.raises(CitegraphError):
        graph_query(home, repo.root, "callees", "chain.py::f0", depth=graph_view.MAX_TRAVERSAL_DEPTH + 1)
    with pytest.raises(CitegraphError):
        graph_query(home, repo.root, "callees", "chain.py")  # a file is not a symbol


def test_cli_json_and_text(scene, home):
    run = CliRunner().invoke(cli, ["--home", str(home.root), "graph", "callers", "pay/retry.py::with_retry",
                                   "--repo", str(scene.root), "--json", "--no-service"])
    assert run.exit_code == 0, run.output
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(run.output))
    run = CliRunner().invoke(cli, ["--home", str(home.root), "graph", "callees", "pay/charge.py::refund",
                                   "--repo", str(scene.root), "--depth", "9", "--no-service"])
    assert run.exit_code == 2 and "--depth" in run.output
