"""Identity continuity (SPEC §18): when a clone's ``origin`` changes, memories captured
under the old identity stay validatable in that clone (the identity history of the
repository's catalog entry, recorded at the next build); ``citegraph repo move OLD NEW``
records a move made elsewhere. A different repository at the same path is never linked,
and content is still checked byte for byte."""

from __future__ import annotations

import json
import shutil

from citegraph.graph.identity import former_ids, identity_for_url
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.memory import api
from citegraph.memory.agent.cited import cited

OLD = "https://git.old-host.example/acme/payments.git"
NEW = "git@new-host.example:acme/payments-service.git"
PY = "def next_delay(attempt):\n    return 2 ** attempt\n"


def remembered(repo, home, remote=OLD):
    repo.write("src/retry.py", PY)
    repo.commit("init")
    build_snapshot(repo.root, home)
    return api.remember(home, "delays double", repo=repo.root,
                        refs=["src/retry.py", "src/retry.py::next_delay", "src/retry.py#L1-L2"], topic="retry")


def verdict(home, repo, mid) -> tuple[str, list[tuple[str, str | None]]]:
    v = api.validate_memories(home, memory_ids=[mid], repo_paths=[str(repo.root)]).to_json()["memories"][0]
    return v["freshness"], [(c["outcome"], c["reason"]) for c in v["citations"]]


def test_a_changed_origin_keeps_the_memories_of_the_clone(make_repo, home, run_cli):
    repo = make_repo("payments", remote=OLD)
    mem = remembered(repo, home)
    repo.git("remote", "set-url", "origin", NEW)
    # until a build sees the clone under its new identity, the old one is another
    # repository: out of scope, never an answer
    assert verdict(home, repo, mem["id"]) == ("unknown", [("unknown", "out-of-scope")] * 3)
    build_snapshot(repo.root, home)  # the build sees this clone under another identity
    assert former_ids(home, identity_for_url(NEW).repository_id) == (identity_for_url(OLD).repository_id,)
    assert verdict(home, repo, mem["id"]) == ("fresh", [("exact", None)] * 3)
    shown = json.loads(run_cli("repo", "show", str(repo.root), "--json").stdout)
    assert shown["source"] == "new-host.example/acme/payments-service"
    assert [(e["repository_id"], e["how"]) for e in shown["identity_history"]] == \
        [(identity_for_url(OLD).repository_id, "origin-changed")]
    # cited and brief find them too, and content still decides
    assert [m["id"] for m in cited(home, ["src/retry.py"], repo=repo.root)["memories"]] == [mem["id"]]
    repo.write("src/retry.py", PY.replace("2 **", "3 **"))
    repo.commit("edit")
    build_snapshot(repo.root, home)
    assert verdict(home, repo, mem["id"])[0] == "stale"
    # a cgr_ handle of the old identity still names this repository
    old_cgr = "cgr_" + identity_for_url(OLD).repository_id[:16] + "_" + mem["citations"][1]["handle"][4:]
    again = api.remember(home, "by old cgr", repo=repo.root, refs=[old_cgr], topic="cgr")
    assert again["citations"][0]["path"] == "src/retry.py"


def test_an_explicit_move_for_another_clone(make_repo, home, run_cli):
    first = make_repo("first", remote=OLD)
    mem = remembered(first, home)
    second = make_repo("second", remote=NEW)  # a fresh clone of the new URL, never under the old identity
    second.write("src/retry.py", PY)
    second.commit("init")
    build_snapshot(second.root, home)
    assert verdict(home, second, mem["id"]) == ("unknown", [("unknown", "out-of-scope")] * 3)
    p = run_cli("repo", "move", OLD, NEW, "--json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    assert res["memories"] == 1 and res["added"] == [identity_for_url(OLD).repository_id]
    assert verdict(home, second, mem["id"]) == ("fresh", [("exact", None)] * 3)
    p = run_cli("repo", "move", OLD, NEW)
    assert p.returncode == 0 and "already recorded" in p.stdout
    p = run_cli("repo", "move", OLD, OLD.replace(".git", ""))  # the same identity
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_another_repository_at_the_same_path_is_not_linked(make_repo, home, tmp_path):
    repo = make_repo("payments", remote=OLD)
    mem = remembered(repo, home)
    shutil.rmtree(repo.root)
    other = make_repo("payments", remote=NEW)  # the same path, another history
    other.write("src/retry.py", PY)
    other.commit("unrelated init")
    build_snapshot(other.root, home)
    assert former_ids(home, identity_for_url(NEW).repository_id) == ()
    assert verdict(home, other, mem["id"]) == ("unknown", [("unknown", "out-of-scope")] * 3)


def test_a_home_from_before_clone_records_is_matched_by_its_catalog(make_repo, home):
    repo = make_repo("payments", remote=OLD)
    mem = remembered(repo, home)
    shutil.rmtree(home.root / "clones")  # as a home made before identity continuity existed
    repo.git("remote", "set-url", "origin", NEW)
    build_snapshot(repo.root, home)
    assert verdict(home, repo, mem["id"]) == ("fresh", [("exact", None)] * 3)


def test_two_moves_chain(make_repo, home):
    repo = make_repo("payments", remote=OLD)
    mem = remembered(repo, home)
    repo.git("remote", "set-url", "origin", NEW)
    build_snapshot(repo.root, home)
    third = "https://third.example/acme/payments"
    repo.git("remote", "set-url", "origin", third)
    build_snapshot(repo.root, home)
    assert set(former_ids(home, identity_for_url(third).repository_id)) == {
        identity_for_url(OLD).repository_id, identity_for_url(NEW).repository_id}
    assert verdict(home, repo, mem["id"])[0] == "fresh"


def test_a_malformed_history_is_ignored(make_repo, home):
    repo = make_repo("payments", remote=NEW)
    repo.write("a.py", "x = 1\n")
    repo.commit("c")
    build_snapshot(repo.root, home)
    info = home.repo(identity_for_url(NEW).repository_id).root / "repo.json"
    data = json.loads(info.read_text())
    data["identity_history"] = [{"repository_id": "../../etc"}, "x", {"repository_id": 5}]
    info.write_text(json.dumps(data))
    assert former_ids(home, identity_for_url(NEW).repository_id) == ()
