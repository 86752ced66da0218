"""Worksets (SPEC §9): records, prepare (bounded, pinned), status, and reads that never build."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

import citegraph.graph.snapshot_builder as sb
from citegraph.cli.main import cli
from citegraph.graph.handles import repo_handle
from citegraph.graph.retention import collect, pinned_ids
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.memory import api
from citegraph.memory.worksets import workset as ws
from citegraph.schemas import iso_time

SRC = "def handler(event):\n    return event['id']\n\n\nclass Service:\n    def run(self):\n        return 1\n"


def invoke(home: Home, *args: str):
    return CliRunner().invoke(cli, ["--home", str(home.root), *args])


def service(make_repo, name: str, remote: str | None = None, text: str = SRC):
    r = make_repo(name, remote=remote)
    r.write("svc/handler.py", text)
    r.write("README.md", f"{name}\n")
    r.commit("init")
    return r


def count_catalog(home: Home) -> int:
    return sum(1 for _ in (home.root / "repos").glob("*/catalog/*.json"))


def no_builds(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("reads over a workset must never build")

    monkeypatch.setattr(sb, "build_snapshot", boom)


def test_workset_records_and_cli_errors(make_repo, home, tmp_path):
    a, b = service(make_repo, "a"), service(make_repo, "b")
    res = invoke(home, "workset", "create", "prod", str(a.root), "--json")
    assert res.exit_code == 0, res.output
    assert [m["path"] for m in json.loads(res.output)["members"]] == [str(a.root.resolve())]
    assert invoke(home, "workset", "add", "prod", str(b.root), str(a.root / "svc")).exit_code == 0
    data = ws.show(home, "prod")
    assert [m["path"] for m in data["members"]] == [str(a.root.resolve()), str(b.root.resolve())]
    assert all(len(m["repository_id"]) == 32 and m["prepared"] is None for m in data["members"])
    assert json.loads(invoke(home, "workset", "list", "--json").output)["worksets"] == [
        {"name": "prod", "created_at": iso_time(data["created_at"]), "members": 2}]  # the CLI prints ISO 8601
    assert invoke(home, "workset", "remove", "prod", str(b.root)).exit_code == 0
    assert len(ws.show(home, "prod")["members"]) == 1

    for args in (("create", "../evil"), ("create", "prod"), ("show", "nope"), ("add", "prod", str(tmp_path)),
                 ("remove", "prod", str(b.root)), ("prepare", "nope")):
        res = invoke(home, "workset", *args)
        assert res.exit_code == 2, (args, res.output)
        assert res.output.startswith("citegraph: ") and len(res.output.strip().splitlines()) == 1
    assert invoke(home, "workset", "delete", "prod").exit_code == 0
    assert ws.list_worksets(home)["worksets"] == []


def test_prepare_builds_members_concurrently_and_pins_them(make_repo, home):
    a, b, c = service(make_repo, "a"), service(make_repo, "b"), service(make_repo, "c")
    build_snapshot(c.root, home)  # already exact-current: reused, no build
    ws.create(home, "prod", [str(a.root), str(b.root), str(c.root)])
    res = api.workset_prepare(home, "prod", concurrency=2)
    assert [m["state"] for m in res["members"]] == ["ready"] * 3
    assert [m["reused"] for m in res["members"]] == [False, False, True]
    ids = {m["snapshot_id"] for m in res["members"]}
    assert set(res["pinned"]) == ids and ids <= pinned_ids(home)
    st = ws.status(home, "prod")
    assert st["ready"] and all(m["pinned"] for m in st["members"])
    # a pinned snapshot survives gc after the repository moved on
    old = res["members"][0]["snapshot_id"]
    a.write("svc/handler.py", SRC + "\n# v2\n")
    a.commit("v2")
    build_snapshot(a.root, home)
    collect(home, keep_last=0)
    assert home.repo(res["members"][0]["repository_id"]).entry(old)["state"] == "ready"
    # prepare again: reused where current, rebuilt where needed; pins replaced
    again = ws.prepare(home, "prod", jobs=1)
    assert again["members"][0]["snapshot_id"] != old and old not in pinned_ids(home)


def test_missing_and_stale_members_give_unknown_and_never_build(make_repo, home, monkeypatch):
    a, b = service(make_repo, "a"), service(make_repo, "b")
    ws.create(home, "prod", [str(a.root), str(b.root)])
    assert ws.prepare(home, "prod", jobs=1)["ready"]
    ma = api.remember(home, "Handler returns the event id.", repo=a.root, refs=["svc/handler.py::handler"],
                      topic="ha")
    mb = api.remember(home, "Handler returns the event id in b.", repo=b.root,
                      refs=["svc/handler.py::handler", "README.md"], topic="hb")
    brief = api.brief(home, "handler event id", workset="prod")
    by = {m["id"]: m for m in brief.data["memories"]}
    assert by[ma["id"]]["freshness"] == by[mb["id"]]["freshness"] == "fresh"

    a.write("svc/handler.py", SRC.replace("event['id']", "event['key']"))
    a.commit("stale now")  # a: no exact-current snapshot any more
    shutil.rmtree(b.root)  # b: missing
    before = count_catalog(home)
    no_builds(monkeypatch)
    brief = api.brief(home, "handler event id", workset="prod")
    assert count_catalog(home) == before
    by = {m["id"]: m for m in brief.data["memories"]}
    assert by[ma["id"]]["freshness"] == "unknown"
    assert [c["reason"] for c in by[ma["id"]]["citations"]] == ["not-current"]
    assert [c["reason"] for c in by[mb["id"]]["citations"]] == ["member-missing", "member-missing"]
    assert brief.data["coverage"] == "none"

    st = ws.status(home, "prod")
    assert [m["state"] for m in st["members"]] == ["stale", "missing"] and not st["ready"]
    res = invoke(home, "validate", "--workset", "prod", "--format", "json", "--fail-on", "unknown")
    assert res.exit_code == 1, res.output
    out = {m["id"]: m for m in json.loads(res.output)["memories"]}
    assert out[ma["id"]]["citations"][0]["reason"] == "not-current"
    assert out[mb["id"]]["citations"][0]["reason"] == "member-missing"
    assert count_catalog(home) == before
    assert invoke(home, "workset", "prepare", "prod").exit_code == 1  # b is missing


def test_repository_id_matching_two_members_is_ambiguous(make_repo, home):
    url = "https://example.com/team/svc.git"
    c1 = service(make_repo, "c1", remote=url)
    c2 = service(make_repo, "c2", remote=url, text=SRC + "\n# fork\n")
    build_snapshot(c1.root, home)
    m = api.remember(home, "Service.run returns one.", repo=c1.root, refs=["svc/handler.py::Service.run"],
                     topic="run")
    ws.create(home, "both", [str(c1.root), str(c2.root)])
    brief = api.brief(home, "Service run returns one", workset="both")
    mem = brief.data["memories"][0]
    assert mem["id"] == m["id"] and mem["citations"][0]["reason"] == "repository-ambiguous"
    assert mem["freshness"] == "unknown"
    # the same citation through a one-member workset is exact
    ws.create(home, "one", [str(c1.root)])
    assert api.brief(home, "Service run returns one", workset="one").data["memories"][0]["status"] == "exact"


def test_cgr_handles_route_to_their_member(make_repo, home):
    a, b = service(make_repo, "a"), service(make_repo, "b")
    ws.create(home, "prod", [str(a.root), str(b.root)])
    ws.prepare(home, "prod", jobs=1)
    ma = api.remember(home, "zeta claim", repo=a.root, refs=["svc/handler.py::Service.run"], topic="za")
    mb = api.remember(home, "zeta claim", repo=b.root, refs=["svc/handler.py::Service.run"], topic="zb")
    rid_b = ws.show(home, "prod")["members"][1]["repository_id"]
    handle = ma["citations"][0]["handle"]
    assert handle == mb["citations"][0]["handle"]  # same place, two repositories
    res = api.brief(home, "zeta claim", workset="prod", code_refs=[repo_handle(rid_b, handle)])
    ranked = [m["id"] for m in res.data["memories"]]
    assert ranked[0] == mb["id"] and set(ranked) == {ma["id"], mb["id"]}
    assert all(m["status"] == "exact" for m in res.data["memories"])


@pytest.mark.parametrize("bad", ["0", "-1"])
def test_prepare_rejects_bad_concurrency(make_repo, home, bad):
    ws.create(home, "w", [str(service(make_repo, "a").root)])
    assert invoke(home, "workset", "prepare", "w", "--jobs", bad).exit_code == 2
