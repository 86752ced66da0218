"""Readable results (SPEC §19, issue 12 "Reading results"): validate's text shows topic
and excerpt per memory without trailing spaces, a summary of memories by freshness and
citations by outcome, and a next step for every unknown — the same words as the JSON
``next_step`` and brief's messages (one mapping, validator/next_steps.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from citegraph.validator.decisions import Reason
from citegraph.validator.next_steps import next_step

CODE = "def f():\n    return 1\n\n\ndef g():\n    return 2\n"


def cli(home, *args, cwd=None):
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_every_unknown_reason_has_a_next_step():
    for reason in Reason:
        step = next_step(str(reason))
        assert step and step == step.strip(), reason
    assert next_step(None) is None and next_step("") is None
    assert next_step("not-current") == "run `citegraph index` (or start `citegraph serve`), then run " \
                                       "`citegraph validate` again"
    assert next_step("not-current", at="HEAD~5") == "commit HEAD~5 is not indexed: run `citegraph index --rev " \
                                                    "HEAD~5`, then run `citegraph validate` again"
    assert next_step("racing", command="brief").endswith("run `citegraph brief` again")
    assert next_step("racing", command="check").endswith("run the check again")
    assert next_step("not-current,racing") == next_step("not-current")  # the first reason's
    assert next_step("no-basis")  # a memory without citations


def test_through_the_service_no_step_says_index_or_serve():
    """Read through the resident service (issue 21): it builds every change itself."""
    assert next_step("racing", indexing_s=2.34) == "the citegraph service is still indexing this repository's " \
                                                   "latest change (2.3s so far): run `citegraph validate` again " \
                                                   "in a moment"
    assert next_step("racing", service=True) == next_step("racing")  # a real race: the usual step
    step = next_step("not-current", service=True, command="brief")
    assert "citegraph status" in step and step.endswith("run `citegraph brief` again")
    for reason in Reason:
        if reason != Reason.SNAPSHOT_UNREADABLE:  # a damaged snapshot: rebuilding it is the step
            s = next_step(str(reason), service=True, indexing_s=1.0) or ""
            assert "citegraph index`" not in s and "citegraph serve" not in s, reason


@pytest.fixture
def world(repo, home):
    repo.write("a.py", CODE)
    repo.commit("c1")
    repo.write("a.py", CODE.replace("return 2", "return 3"))
    repo.commit("c2")
    assert cli(home, "index", str(repo.root), "--no-service").returncode == 0
    r = cli(home, "remember", "--repo", str(repo.root), "--project", "pay", "--topic", "f-rule", "--json",
            "--text", "f   returns one;\nnever\tmore, and this sentence is long enough to be cut somewhere "
            "before its end for the excerpt", "--code-ref", "a.py::f", "--code-ref", "a.py#L4-L5")
    assert r.returncode == 0, r.stderr
    return repo, json.loads(r.stdout)["id"]


def test_text_shows_topic_excerpt_and_both_summaries(world, home):
    repo, mid = world
    r = cli(home, "validate", "--repo", str(repo.root), "--no-service")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert all(line == line.rstrip() for line in lines)
    head = lines[0]
    assert head.startswith(f"{mid} fresh   exact     pay/f-rule \"f returns one; never more, and")
    assert head.endswith("…\"")  # whitespace collapsed, cut with an ellipsis
    assert lines[-1] == ("summary: 1 memory (fresh 1, stale 0, unknown 0); "
                         "2 citations (exact 2, relocated 0, changed 0, deleted 0, unknown 0)")


def test_legacy_memories_count_in_the_memory_summary(world, home):
    repo, _ = world
    rec = [{"text": f"legacy {i}", "project": "old", "topic": f"t{i}"} for i in range(4)]
    r = subprocess.run([sys.executable, "-m", "citegraph.cli.main", "import-legacy", "-"], input=json.dumps(rec),
                       env={**os.environ, "CITEGRAPH_HOME": str(home.root)}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = cli(home, "validate", "--repo", str(repo.root), "--project", "old", "--no-service")
    # 4 legacy memories: no citations, yet the summary is not all zeros
    assert out.stdout.splitlines()[-1].startswith("summary: 4 memories (fresh 0, stale 0, unknown 4); 0 citations")
    assert out.stdout.count("next: it cites no code") == 4
    js = json.loads(cli(home, "validate", "--repo", str(repo.root), "--project", "old", "--format", "json",
                        "--no-service").stdout)
    assert js["freshness_summary"] == {"fresh": 0, "stale": 0, "unknown": 4}
    assert all(m["next_step"] == next_step("no-basis") for m in js["memories"])


def test_not_current_gives_the_next_step_in_text_and_json(world, home):
    repo, mid = world
    repo.write("a.py", CODE + "\n# dirty, not indexed\n")
    js = json.loads(cli(home, "validate", "--repo", str(repo.root), "--format", "json", "--no-service").stdout)
    cites = js["memories"][0]["citations"]
    assert {(c["outcome"], c["reason"]) for c in cites} == {("unknown", "not-current")}
    assert {c["next_step"] for c in cites} == {next_step("not-current")}
    text = cli(home, "validate", "--repo", str(repo.root), "--no-service").stdout
    assert text.count(f"  next: {next_step('not-current')}\n") == 1  # once per memory, not per citation
    # a verdict that is not unknown has no next step
    repo.write("a.py", CODE.replace("return 2", "return 3"))
    js = json.loads(cli(home, "validate", "--repo", str(repo.root), "--format", "json", "--no-service").stdout)
    assert all("next_step" not in c for m in js["memories"] for c in m["citations"])


def test_validate_at_an_unindexed_commit_says_so(world, home):
    repo, _ = world
    r = cli(home, "validate", "--repo", str(repo.root), "--at", "HEAD~1", "--no-service")
    assert r.returncode == 0  # unknown is an answer; --fail-on unknown makes it a failure
    assert "commit HEAD~1 is not indexed" in r.stderr and "citegraph index --rev HEAD~1" in r.stderr
    assert r.stderr.count("\n") == 1
    assert "next: commit HEAD~1 is not indexed: run `citegraph index --rev HEAD~1`" in r.stdout
    js = json.loads(cli(home, "validate", "--repo", str(repo.root), "--at", "HEAD~1", "--format", "json",
                        "--no-service").stdout)
    assert {c["next_step"] for c in js["memories"][0]["citations"]} == {next_step("not-current", at="HEAD~1")}
    assert cli(home, "validate", "--repo", str(repo.root), "--at", "HEAD~1", "--fail-on", "unknown",
               "--no-service").returncode == 1
    assert cli(home, "validate", "--repo", str(repo.root), "--at", "HEAD~1", "--fail-on", "stale",
               "--no-service").returncode == 0
    # the next step works: after it, the commit validates (g changed between the commits: f is exact)
    assert cli(home, "index", str(repo.root), "--rev", "HEAD~1", "--no-service").returncode == 0
    after = cli(home, "validate", "--repo", str(repo.root), "--at", "HEAD~1", "--no-service")
    assert "not indexed" not in after.stderr and "unknown" not in after.stdout.splitlines()[0]


def test_brief_words_unknowns_with_the_same_mapping(world, home):
    repo, mid = world
    repo.write("a.py", CODE + "\n# dirty\n")
    b = json.loads(cli(home, "brief", "--repo", str(repo.root), "--task", "f returns one", "--json",
                       "--no-service").stdout)
    msgs = [i["message"] for i in b["issues"] if i["memory_id"] == mid]
    assert msgs and msgs[0].startswith(next_step("not-current", command="brief")[:60])
