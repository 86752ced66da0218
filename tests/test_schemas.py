"""The JSON Schemas in docs/schemas/ describe the real outputs of brief and validate."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from citegraph import schemas
from citegraph.cli.main import cli
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.memory import api
from citegraph.memory.lifecycle.store import MemoryStore, bulk_insert
from citegraph.memory.worksets import workset as ws
from citegraph.validator.model import Receipt

SCHEMAS = Path(__file__).resolve().parent.parent / "docs" / "schemas"


def schema(name: str) -> dict:
    return schemas.load(name.removesuffix(".schema.json"))


def check(name: str, doc: object, part: str | None = None) -> None:
    """Validate through the one loader (cross-file refs into common.schema.json resolved)."""
    schemas.validator(name.removesuffix(".schema.json"), part).validate(doc)


def invoke(home: Home, *args: str) -> str:
    res = CliRunner().invoke(cli, ["--home", str(home.root), *args])
    assert res.exit_code in (0, 1), res.output
    return res.output


@pytest.mark.parametrize("name", ["brief.schema.json", "validate.schema.json"])
def test_schemas_are_valid_draft_2020_12(name):
    jsonschema.Draft202012Validator.check_schema(schema(name))


@pytest.fixture
def scene(make_repo, home):
    """Memories in every state: exact, relocated, changed, deleted, legacy, handoff, limit."""
    r = make_repo("svc")
    r.write("src/retry.py", "class Retry:\n    def delay(self, n):\n        return 2 ** n\n\n\ndef key():\n    return 1\n")
    r.write("src/gone.py", "def old():\n    return 0\n")
    r.write("notes.txt", "a\nb\nc\n")
    r.commit("init")
    build_snapshot(r.root, home)
    refs = {
        "exact": ["src/retry.py::Retry.delay", "src/retry.py#L1-L3"],
        "moved": ["notes.txt#L2-L3"],
        "changed": ["src/retry.py::key"],
        "deleted": ["src/gone.py::old", "src/gone.py"],
    }
    for topic, rr in refs.items():
        api.remember(home, f"retry claim {topic}", repo=r.root, refs=rr, topic=topic)
    api.remember(home, "retry claim legacy", topic="legacy", source_commit=r.head())
    api.remember(home, "retry claim handoff", kind="handoff", topic="handoff")
    r.write("src/retry.py", "class Retry:\n    def delay(self, n):\n        return 2 ** n\n\n\ndef key():\n    return 2\n")
    r.rm("src/gone.py")
    r.mv("notes.txt", "docs/notes.txt")
    r.commit("c2")
    build_snapshot(r.root, home)
    fake = [Receipt(id=f"cgc_{i:032x}", ref=f"x{i}.py", kind="file", repository_id=f"{i + 1:032x}",
                    repository_kind="remote", snapshot_id="s", commit="0" * 40, dirty=False, extractor_version="t",
                    path=f"x{i}.py", blob_id="0" * 40) for i in range(40)]
    with MemoryStore.open(home) as ms:
        bulk_insert(ms, [{"text": f"fleet claim {k}", "topic": f"fleet{k}", "receipts": fake[8 * k:8 * k + 8]}
                         for k in range(5)])
    return r


def test_brief_outputs_match_the_schema(scene, home, run_cli):
    root = str(scene.root)
    docs = [
        json.loads(invoke(home, "brief", "--task", "retry claim", "--json", "--repo", root)),
        json.loads(invoke(home, "brief", "--task", "retry claim fleet", "--json", "--budget-tokens", "800",
                          "--repo", root, "--code-ref", "../bad", "--code-ref", "src/retry.py")),
        json.loads(invoke(home, "brief", "--task", "fleet claim", "--json", "--repo", root)),
        json.loads(invoke(home, "brief", "--task", "nothing at all", "--json", "--repo", root)),
        # few enough to be shown in full (the fleet memories above fill the budget with
        # compact forms whose citations are only counted)
        json.loads(invoke(home, "brief", "--task", "exact moved changed deleted", "--json", "--repo", root)),
        json.loads(invoke(home, "brief", "--task", "fleet0", "--json", "--repo", root)),
    ]
    p = run_cli("brief", "--task", "retry claim", "--json", cwd=root)
    assert p.returncode == 0, p.stderr
    docs.append(json.loads(p.stdout))
    ws.create(home, "w", [root])
    docs.append(api.brief(home, "retry claim", workset="w").to_json())
    for d in docs:
        check("brief.schema.json", d)
    assert any("cut" in m for d in docs for m in d["memories"] + d["stale"])  # the cut form is checked too
    seen = {m["freshness"] for d in docs for m in d["memories"] + d["stale"]}
    outcomes = {c["outcome"] for d in docs for m in d["memories"] + d["stale"] for c in m["citations"]}
    issues = {i["kind"] for d in docs for i in d["issues"]}
    assert seen == {"fresh", "stale", "unknown"}
    assert outcomes == {"exact", "relocated", "changed", "deleted", "unknown"}
    assert issues == {"stale-memory", "stale-link", "unknown-memory-freshness", "invalid-code-citation", "limit"}


def test_validate_outputs_match_the_schema(scene, home):
    root = str(scene.root)
    doc = json.loads(invoke(home, "validate", "--format", "json", "--repo", root))
    check("validate.schema.json", doc)
    assert {m["freshness"] for m in doc["memories"]} == {"fresh", "stale", "unknown"}
    lines = invoke(home, "validate", "--format", "jsonl", "--repo", root).strip().splitlines()
    assert len(lines) == len(doc["memories"])
    for line in lines:
        check("validate.schema.json", json.loads(line), part="memory")
    ws.create(home, "w", [root])
    check("validate.schema.json", json.loads(invoke(home, "validate", "--workset", "w", "--format", "json")))


@pytest.mark.parametrize("name", ["cited.schema.json", "refresh.schema.json", "history.schema.json",
                                  "hook.schema.json", "repo.schema.json"])
def test_agent_loop_schemas_are_valid_draft_2020_12(name):
    jsonschema.Draft202012Validator.check_schema(schema(name))


def test_cited_outputs_match_the_schema(scene, home):
    root = str(scene.root)
    docs = [json.loads(invoke(home, "cited", *refs, "--repo", root, "--json"))
            for refs in (["src/retry.py"], ["src/retry.py#L2-L3"], ["src/retry.py::Retry.delay"],
                         ["docs/notes.txt"], ["src/gone.py::old"], ["nothing.txt"])]
    for d in docs:
        check("cited.schema.json", d)
    assert {m["freshness"] for d in docs for m in d["memories"]} >= {"fresh", "stale"}
    assert {x["how"] for d in docs for m in d["memories"] for x in m["matches"]} >= {"path", "overlap", "handle",
                                                                                      "file", "content"}
    assert docs[-1]["memories"] == [] and any(not t["resolved"] for d in docs for t in d["refs"])


def test_refresh_and_history_outputs_match_the_schema(scene, home):
    root = str(scene.root)
    dry = json.loads(invoke(home, "refresh", "--all", "--repo", root, "--dry-run", "--json"))
    done = json.loads(invoke(home, "refresh", "--all", "--repo", root, "--accept", "relocated,successor", "--json"))
    for d in (dry, done):
        check("refresh.schema.json", d)
    assert {c["action"] for m in done["memories"] for c in m["citations"]} == {"refresh", "keep", "refuse"}
    moved = next(m["id"] for m in done["memories"] if m["written"])
    hist = json.loads(invoke(home, "history", moved, "--json"))
    check("history.schema.json", hist)
    assert hist["revisions"][0]["refresh"] is None and hist["revisions"][-1]["refresh"]


def test_hook_and_repo_outputs_match_the_schema(scene, home, run_cli):
    from citegraph.memory.agent.hooks import pre_edit, session_start

    out = pre_edit(home, scene.root / "src" / "retry.py")
    assert out is not None and "systemMessage" in out  # the changed memory is stale
    check("hook.schema.json", out)
    check("hook.schema.json", session_start(home, scene.root))
    shown = json.loads(invoke(home, "repo", "show", str(scene.root), "--json"))
    check("repo.schema.json", shown)
    moved = json.loads(invoke(home, "repo", "move", "https://a.example/x", "https://b.example/y", "--json"))
    check("repo.schema.json", moved)


def test_observed_and_reason_mean_the_same_in_validate_and_brief(scene, home):
    """One memory, one citation: validate, brief and cited give the same outcome, reason
    and observed (common.schema.json#/$defs/observation), and the same memory reason."""
    root = str(scene.root)
    val = json.loads(invoke(home, "validate", "--json", "--repo", root))
    by_v = {m["id"]: m for m in val["memories"]}
    seen_in_place = seen_moved = 0
    for task in ("exact moved changed deleted", "retry claim legacy"):
        doc = json.loads(invoke(home, "brief", "--task", task, "--json", "--repo", root))
        for m in doc["memories"] + doc["stale"]:
            v = by_v[m["id"]]
            assert (m["freshness"], m["status"], m["reason"]) == (v["freshness"], v["status"], v["reason"])
            vc = {c["id"]: c for c in v["citations"]}
            for c in m["citations"]:
                want = vc[c["id"]]
                assert (c["outcome"], c["reason"], c["observed"]) == (want["outcome"], want["reason"],
                                                                     want["observed"])
                if c["outcome"] == "exact":
                    assert c["observed"] and c["observed"]["path"] == want["path"]  # in place: still observed
                    seen_in_place += 1
                seen_moved += c["outcome"] == "relocated"
    assert seen_in_place and seen_moved
    assert any(m["reason"] for m in val["memories"])  # codes are compared, not only nulls
