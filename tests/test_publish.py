"""Publish and import (SPEC §10): the publish gate, the file format, and imported citations
validating against the importer's own snapshots."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from gitutil import GitRepo

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.indexer.errors import CitegraphError
from citegraph.memory import api
from citegraph.memory.exchange.share import FORMAT, FORMAT_VERSION, import_file, publish
from citegraph.memory.lifecycle.store import MemoryStore

ORIGIN = "https://example.com/org/repo.git"

RETRY = '''"""Retries."""


class RetryPolicy:
    def next_delay(self, attempt):
        return min(2 ** attempt, 60)


def keep_key(request):
    return request.idempotency_key
'''


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A remote-identity repository with a clean, a dirty, a local-only, a handoff and a
    tampered memory (built once per module; tests that change the store copy it)."""
    base = tmp_path_factory.mktemp("publish")
    home = Home.open(base / "home")

    def make_repo(name, remote=None):
        return GitRepo(base / name, remote=remote)

    repo = make_repo("origin-clone", remote=ORIGIN)
    repo.write("src/retry.py", RETRY)
    repo.write("README.md", "# repo\n\nsome words\n")
    repo.commit("c1")
    build_snapshot(repo.root, home)
    clean = api.remember(home, "retries keep the idempotency key", repo=repo.root, project="team",
                         topic="retry-key", refs=["src/retry.py::keep_key", "src/retry.py#L5-L6", "README.md"])
    repo.write("src/new.py", "def fresh():\n    return 1\n")  # untracked: dirty overlay
    build_snapshot(repo.root, home)
    dirty = api.remember(home, "fresh returns one", repo=repo.root, project="team", topic="fresh",
                         refs=["src/new.py::fresh"])
    repo.commit("c2")
    local = make_repo("local-only")
    local.write("lib.py", "def helper():\n    return 2\n")
    local.commit("l1")
    build_snapshot(local.root, home)
    loc = api.remember(home, "helper returns two", repo=local.root, project="team", topic="helper",
                       refs=["lib.py::helper"])
    handoff = api.remember(home, "half way through the retry refactor", repo=repo.root, project="team",
                           topic="handoff", kind="handoff")
    build_snapshot(repo.root, home)
    bad = api.remember(home, "the readme has words", repo=repo.root, project="team", topic="tampered",
                       refs=["README.md"])
    # Tamper with one stored receipt: it no longer matches its id (a malformed memory).
    con = duckdb.connect(str(home.memory_db))
    con.execute("UPDATE citations SET content_hash = 'deadbeef' WHERE memory_id = ?", [bad["id"]])
    con.close()
    return {"repo": repo, "local": local, "clean": clean, "dirty": dirty, "local_mem": loc,
            "handoff": handoff, "bad": bad, "home": home}


def cli(home: Home, *args: str, cwd=None):
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_publish_gate(world, tmp_path):
    home = world["home"]
    out = tmp_path / "team.jsonl"
    res = cli(home, "publish", "--project", "team", "--out", str(out), "--json")
    assert res.returncode == 1, res.stderr  # something was refused
    report = json.loads(res.stdout)
    assert report["published"] == [world["clean"]["id"]]
    reasons = {r["id"]: r["reason"] for r in report["refused"]}
    assert reasons == {world["dirty"]["id"]: "dirty-citation", world["local_mem"]["id"]: "local-repository",
                       world["bad"]["id"]: "malformed"}
    messages = {r["id"]: r["message"] for r in report["refused"]}
    assert "dirty" in messages[world["dirty"]["id"]]
    assert "does not match" in messages[world["bad"]["id"]]
    assert report["skipped"]["handoff"] == 1

    lines = read_jsonl(out)
    assert lines[0]["type"] == "header" and lines[0]["format"] == FORMAT
    assert lines[0]["format_version"] == FORMAT_VERSION and lines[0]["memories"] == 1
    assert len(lines) == 2
    mem = lines[1]
    assert mem["id"] == world["clean"]["id"] and mem["text"] == "retries keep the idempotency key"
    # Nothing is stripped: every citation with its full receipt.
    assert [c["id"] for c in mem["citations"]] == [c["id"] for c in world["clean"]["citations"]]
    assert all(c["repository_kind"] == "remote" and c["dirty"] is False for c in mem["citations"])
    sym = next(c for c in mem["citations"] if c["kind"] == "symbol")
    assert sym["fragment_hash"] and sym["handle"].startswith("cgs_")

    # Text mode names every refused memory and its reason.
    res = cli(home, "publish", "--project", "team", "--out", str(tmp_path / "t2.jsonl"))
    assert res.returncode == 1
    for key, reason in (("dirty", "dirty-citation"), ("local_mem", "local-repository"), ("bad", "malformed")):
        assert f"refused {world[key]['id']} ({reason})" in res.stderr


def test_publish_all_clean_exits_zero(world, tmp_path):
    home = Home.open(tmp_path / "copy")
    shutil.copy(world["home"].memory_db, home.memory_db)
    with MemoryStore.open(home) as ms:
        for key in ("dirty", "local_mem", "bad"):
            ms.forget(world[key]["id"])
    report = publish(home, str(tmp_path / "ok.jsonl"))
    assert report.refused == [] and report.published == [world["clean"]["id"]]
    res = cli(home, "publish", "--out", str(tmp_path / "ok2.jsonl"))
    assert res.returncode == 0 and "published 1 memory" in res.stdout


def test_import_validates_against_second_clone(world, tmp_path):
    out = tmp_path / "team.jsonl"
    publish(world["home"], str(out), project="team")

    # A second clone with the same origin URL, in another data home.
    clone = GitRepo(tmp_path / "second-clone")
    clone.git("pull", "-q", str(world["repo"].root), "main")
    clone.git("remote", "add", "origin", ORIGIN)
    home2 = Home.open(tmp_path / "home2")
    build_snapshot(clone.root, home2)

    res = cli(home2, "import", str(out), "--json")
    assert res.returncode == 0, res.stderr
    rep = json.loads(res.stdout)
    assert rep["imported"] == [world["clean"]["id"]] and rep["format_version"] == FORMAT_VERSION

    res = cli(home2, "validate", "--format", "json", cwd=clone.root)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert len(data["memories"]) == 1
    m = data["memories"][0]
    assert m["freshness"] == "fresh" and m["status"] == "exact"
    assert [c["outcome"] for c in m["citations"]] == ["exact"] * 3

    # Idempotent: importing again changes nothing (no new revision).
    rep2 = import_file(home2, str(out)).to_json()
    assert rep2["imported"] == [] and rep2["unchanged"] == [world["clean"]["id"]]
    with MemoryStore.open(home2) as ms:
        assert len(ms.history(world["clean"]["id"])) == 1

    # The imported receipts follow the code in the importer's clone: a body change is seen.
    clone.write("src/retry.py", RETRY.replace("request.idempotency_key", "request.key"))
    clone.commit("edit")
    build_snapshot(clone.root, home2)
    rep = api.validate_memories(home2, repo_paths=[str(clone.root)]).to_json()
    outcomes = {c["kind"]: c["outcome"] for c in rep["memories"][0]["citations"]}
    assert outcomes == {"symbol": "changed", "span": "exact", "file": "exact"}  # README unchanged

    # The publisher's own clone still validates it too (same repository id).
    assert api.validate_memories(world["home"], memory_ids=[world["clean"]["id"]],
                                 repo_paths=[str(world["repo"].root)]).to_json()["memories"][0]["freshness"] \
        in ("fresh", "unknown")


def test_import_refuses_bad_files(world, tmp_path):
    out = tmp_path / "team.jsonl"
    publish(world["home"], str(out), project="team")
    lines = out.read_text().splitlines()
    home2 = Home.open(tmp_path / "home2")

    def refused(name: str, text: str) -> CitegraphError:
        p = tmp_path / name
        p.write_text(text)
        with pytest.raises(CitegraphError) as info:
            import_file(home2, str(p))
        assert info.value.code == 2 and "nothing was imported" in info.value.line()
        return info.value

    header = json.loads(lines[0])
    newer = refused("newer.jsonl", json.dumps({**header, "format_version": 99}) + "\n" + lines[1] + "\n")
    assert "newer" in newer.line()

    mem = json.loads(lines[1])
    mem["citations"][0]["dirty"] = True  # a receipt edited by hand no longer matches its id
    edited = refused("edited.jsonl", lines[0] + "\n" + json.dumps(mem) + "\n")
    assert "does not match" in edited.line() and "edited.jsonl:2" in edited.line()

    assert "truncated" in refused("trunc.jsonl", json.dumps({**header, "memories": 3}) + "\n"
                                  + lines[1] + "\n").line()
    assert "garbage.jsonl:2" in refused("garbage.jsonl", lines[0] + "\n{not json\n").line()
    missing = dict(json.loads(lines[1]))
    del missing["text"]
    assert "lacks text" in refused("missing.jsonl", lines[0] + "\n" + json.dumps(missing) + "\n").line()
    nine = json.loads(lines[1])
    nine["citations"] = nine["citations"] * 3
    assert "at most 8" in refused("nine.jsonl", lines[0] + "\n" + json.dumps(nine) + "\n").line()
    assert "not a citegraph-memories file" in refused(
        "foreign.jsonl", json.dumps({"type": "header", "format": "other"}) + "\n").line()

    # The CLI: one line, exit code 2.
    res = cli(home2, "import", str(tmp_path / "newer.jsonl"))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and res.stderr.startswith("citegraph: ")
    # Nothing was loaded by any refused import.
    with MemoryStore.open(home2) as ms:
        assert ms.load() == []


def test_import_points_legacy_records_elsewhere(home, tmp_path):
    p = tmp_path / "legacy.jsonl"
    p.write_text(json.dumps({"text": "the cache is warmed at boot", "source_commit": "abc123"}) + "\n")
    with pytest.raises(CitegraphError) as info:
        import_file(home, str(p))
    assert info.value.code == 2 and "import-legacy" in info.value.line()
