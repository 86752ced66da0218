"""Portable checkpoints (issue 24, acceptance 1; SPEC §22; docs/checkpoints.md): export →
import into a fresh data home gives the same snapshot (ids, content id, rows), ready at once
(`status` exact-current, `index` reused, the next commit a delta over it that parses only
new blobs), and `validate` the same outcomes; anything that does not verify is refused by
name with nothing imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import blake3
import pyarrow.parquet as pq
import pytest
from gitutil import GitRepo

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home
from citegraph.memory import api
from citegraph.memory.lifecycle.store import MemoryStore

ORIGIN = "https://example.com/org/checkpoint.git"
TABLES = ("files", "symbols", "edges", "damage", "contents", "resolved_edges", "import_targets", "overrides")

RETRY = '''"""Retries."""


class RetryPolicy:
    def next_delay(self, attempt):
        return min(2 ** attempt, 60)

    def reset(self):
        return 0


def keep_key(request):
    return request.idempotency_key


def drop_key(request):
    return None
'''


def cli(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "CITEGRAPH_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Memories captured at c1; c2 edits, moves and deletes code and is built as a delta;
    the checkpoint of c2 (a directory and a tar)."""
    base = tmp_path_factory.mktemp("ckpt")
    home = Home.open(base / "home")
    repo = GitRepo(base / "a", remote=ORIGIN)
    repo.write("src/retry.py", RETRY)
    repo.write("src/util.py", "def helper(x):\n    return x + 1\n")
    repo.write("README.md", "# repo\n\nsome words\nmore words\n")
    repo.commit("c1")
    build_snapshot(repo.root, home)
    for topic, refs in (("delay", ["src/retry.py::RetryPolicy.next_delay"]), ("keep", ["src/retry.py::keep_key"]),
                        ("drop", ["src/retry.py::drop_key"]), ("span", ["src/retry.py#L9-L10"]),
                        ("helper", ["src/util.py::helper", "README.md"])):
        api.remember(home, f"claim about {topic}", repo=repo.root, project="team", topic=topic, refs=refs)
    repo.write("src/retry.py", RETRY.replace("min(2 ** attempt, 60)", "min(3 ** attempt, 60)")
               .replace('\n\ndef drop_key(request):\n    return None\n', ""))
    repo.mv("src/util.py", "lib/util.py")
    repo.commit("c2")
    c2 = build_snapshot(repo.root, home)
    ckpt = base / "ckpt"
    r = cli(home.root, "export", "--parquet", str(ckpt), "--repo", str(repo.root), "--json")
    assert r.returncode == 0, r.stderr
    assert cli(home.root, "export", "--parquet", str(base / "ckpt.tar"), "--repo", str(repo.root)).returncode == 0
    return {"base": base, "home": home, "repo": repo, "c2": c2, "ckpt": ckpt, "tar": base / "ckpt.tar",
            "export": json.loads(r.stdout)}


def clone_at_origin(world, name: str) -> GitRepo:
    dest = world["base"] / name
    subprocess.run(["git", "clone", "-q", str(world["repo"].root), str(dest)], check=True, capture_output=True)
    clone = GitRepo.__new__(GitRepo)
    clone.root = dest
    clone.git("remote", "set-url", "origin", ORIGIN)
    return clone


def outcomes(home: Path, repo: Path) -> list[tuple]:
    r = cli(home, "validate", "--repo", str(repo), "--json", "--no-service")
    assert r.returncode == 0, r.stderr
    return sorted((m["id"], m["freshness"], m["status"], m["reason"],
                   tuple((c["id"], c["outcome"], c["reason"], json.dumps(c["observed"], sort_keys=True))
                         for c in m["citations"])) for m in json.loads(r.stdout)["memories"])


def logical(home: Home, repository_id: str, snapshot_id: str) -> dict[str, list]:
    with Snapshot.open(home.repo(repository_id), snapshot_id) as snap:
        out = {t: sorted(map(repr, snap.query(f"SELECT * FROM {t}"))) for t in TABLES if t != "overrides"}
        meta = dict(snap.query("SELECT key, value FROM meta"))
    meta.pop("base")
    out["meta"] = sorted(meta.items())
    return out


@pytest.mark.parametrize("form", ["dir", "tar"])
def test_round_trip_into_a_fresh_home(world, tmp_path, form):
    exp = world["export"]["repositories"][0]
    assert exp["snapshot_id"] == world["c2"].snapshot_id
    assert exp["memories"] == 5
    fresh = tmp_path / "fresh"
    clone = clone_at_origin(world, f"clone-{form}")
    src = world["ckpt"] if form == "dir" else world["tar"]
    r = cli(fresh, "import", "--parquet", str(src), "--repo", str(clone.root), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert [x["state"] for x in rep["repositories"]] == ["imported"]
    assert len(rep["memories"]["imported"]) == 5 and not rep["memories"]["unverified"]
    home2 = Home.open(fresh)
    rs = home2.repo(world["c2"].repository_id)
    entries = rs.entries()
    assert [e["snapshot_id"] for e in entries] == [world["c2"].snapshot_id]  # nothing built
    assert entries[0]["content_id"] == world["c2"].content_id and entries[0]["layout"] == "full"
    # status: exact-current for the exported commit, without any build
    st = cli(fresh, "status", str(clone.root), "--json", "--no-service")
    assert st.returncode == 0, st.stderr
    assert json.loads(st.stdout)["exact_current"] is True
    assert [e["snapshot_id"] for e in rs.entries()] == [world["c2"].snapshot_id]
    # the same logical snapshot as the exporting home's (there a delta over c1)
    assert logical(home2, rs.repository_id, world["c2"].snapshot_id) == \
        logical(world["home"], rs.repository_id, world["c2"].snapshot_id)
    # validate: identical outcomes (a mix: exact, changed, deleted, relocated)
    there, here = outcomes(world["home"].root, world["repo"].root), outcomes(fresh, clone.root)
    assert here == there
    assert {c[1] for m in here for c in m[4]} >= {"exact", "changed", "deleted", "relocated"}
    # index of that commit: reused
    ix = cli(fresh, "index", str(clone.root), "--json", "--no-service")
    assert ix.returncode == 0 and json.loads(ix.stdout)["reused"] is True
    # the next commit builds as a delta over it; a moved file's blob is known (facts cache)
    clone.mv("lib/util.py", "lib/helpers.py")
    clone.write("src/new.py", "def fresh():\n    return 1\n")
    clone.commit("c3")
    nxt = build_snapshot(clone.root, home2)
    entry = rs.entry(nxt.snapshot_id)
    assert entry["layout"] == "delta" and entry["base"] == world["c2"].snapshot_id
    assert nxt.stats.parses == 1  # only src/new.py: the moved blob's rows came from the import


def test_import_is_idempotent_and_keeps_present_snapshots(world, tmp_path):
    fresh = tmp_path / "again"
    assert cli(fresh, "import", "--parquet", str(world["ckpt"])).returncode == 0
    r = cli(fresh, "import", "--parquet", str(world["ckpt"]), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert [x["state"] for x in rep["repositories"]] == ["present"]
    assert len(rep["memories"]["unchanged"]) == 5


def test_no_memories_and_export_errors(world, tmp_path):
    home, repo = world["home"], world["repo"]
    r = cli(home.root, "export", "--parquet", str(tmp_path / "s"), "--repo", str(repo.root), "--no-memories",
            "--json")
    assert r.returncode == 0, r.stderr
    assert not list((tmp_path / "s").rglob("memories.parquet"))
    assert json.loads(r.stdout)["memories"] is False
    # a non-empty destination, a commit that is not indexed: one line each, nothing written
    r = cli(home.root, "export", "--parquet", str(world["ckpt"]), "--repo", str(repo.root))
    assert r.returncode == 2 and "not an empty directory" in r.stderr and len(r.stderr.splitlines()) == 1
    r = cli(home.root, "export", "--parquet", str(tmp_path / "x"), "--repo", str(repo.root), "--rev", "HEAD~1")
    assert r.returncode == 0  # c1 is indexed
    r = cli(home.root, "export", "--parquet", str(tmp_path / "y"), "--repo", str(repo.root), "--rev", "HEAD^{tree}")
    assert r.returncode != 0 and not (tmp_path / "y").exists()


# --- refusals: by name, nothing imported ------------------------------------------------------------


def copy_ckpt(world, tmp_path) -> Path:
    dest = tmp_path / "ck"
    shutil.copytree(world["ckpt"], dest, symlinks=True)
    return dest


def part_file(ck: Path, table: str) -> Path:
    return next(ck.glob(f"repository_id=*/{table}.parquet"))


def edit_manifest(ck: Path, fn) -> None:
    m = json.loads((ck / "manifest.json").read_text())
    fn(m)
    (ck / "manifest.json").write_text(json.dumps(m))


def refresh_digest(ck: Path, rel: str) -> None:
    data = (ck / rel).read_bytes()

    def fix(m):
        for f in m["repositories"][0]["files"]:
            if f["path"] == rel:
                f["blake3"], f["bytes"] = blake3.blake3(data).hexdigest(), len(data)
    edit_manifest(ck, fix)


def tamper(ck: Path) -> None:
    p = part_file(ck, "symbols")
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))


def wrong_schema(ck: Path) -> None:
    edit_manifest(ck, lambda m: m.update(schema_version=m["schema_version"] - 1))


def wrong_extractor(ck: Path) -> None:
    edit_manifest(ck, lambda m: m.update(extractor_version="cgx-0"))


def missing(ck: Path) -> None:
    part_file(ck, "edges").unlink()


def outside(ck: Path) -> None:
    edit_manifest(ck, lambda m: m["repositories"][0]["files"][0].update(path="../outside/files.parquet"))


def symlinked(ck: Path) -> None:
    p = part_file(ck, "files")
    real = ck.parent / "elsewhere.parquet"
    shutil.move(p, real)
    p.symlink_to(real)


def forged_receipt(ck: Path) -> None:
    """A digest-consistent checkpoint whose receipt was edited: import's receipt checks."""
    p = part_file(ck, "citations")
    t = pq.read_table(p).to_pydict()
    t["path"][0] = "src/other.py"
    pq.write_table(pq.read_table(p).from_pydict(t, schema=pq.read_schema(p)), p)
    refresh_digest(ck, str(p.relative_to(ck)))


def forged_rows(ck: Path) -> None:
    """A digest-consistent checkpoint whose file rows do not add up to its content id."""
    p = part_file(ck, "files")
    t = pq.read_table(p)
    d = t.to_pydict()
    d["blob_id"][0] = "0" * 40
    pq.write_table(t.from_pydict(d, schema=t.schema), p)
    refresh_digest(ck, str(p.relative_to(ck)))


@pytest.mark.parametrize("spoil, words", [
    (tamper, "does not match its blake3 digest"),
    (wrong_schema, "wrong schema version"),
    (wrong_extractor, "wrong extractor version"),
    (missing, "edges.parquet is missing"),
    (outside, "outside the checkpoint (../outside/files.parquet)"),
    (symlinked, "symlink"),
    (forged_receipt, "does not match its fields (edited receipt)"),
    (forged_rows, "do not add up to the snapshot's content id"),
])
def test_a_checkpoint_that_does_not_verify_is_refused_whole(world, tmp_path, spoil, words):
    ck = copy_ckpt(world, tmp_path)
    spoil(ck)
    fresh = tmp_path / "fresh"
    r = cli(fresh, "import", "--parquet", str(ck))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert words in r.stderr and "nothing was imported" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert Home.open(fresh).repo_ids() == []
    assert not (fresh / "memories.duckdb").exists()


def test_a_tar_member_escaping_the_archive_is_refused(world, tmp_path):
    bad = tmp_path / "bad.tar"
    evil = tmp_path / "evil.txt"
    evil.write_text("x")
    with tarfile.open(world["tar"]) as src, tarfile.open(bad, "w") as dst:
        for m in src.getmembers():
            dst.addfile(m, src.extractfile(m))
        dst.add(evil, arcname="../../evil.txt")
    fresh = tmp_path / "fresh"
    r = cli(fresh, "import", "--parquet", str(bad))
    assert r.returncode == 2 and "member '../../evil.txt' is refused" in r.stderr, r.stderr
    assert Home.open(fresh).repo_ids() == [] and not (tmp_path / "evil.txt.1").exists()
    assert not any((fresh / "tmp").iterdir()) if (fresh / "tmp").exists() else True


def test_memories_of_a_refused_checkpoint_stay_out_of_an_existing_home(world, tmp_path):
    """An existing home keeps exactly what it had when an import is refused."""
    fresh = tmp_path / "home"
    with MemoryStore.open(Home.open(fresh)) as ms:
        ms.remember("mine", project="p", topic="t")
    ck = copy_ckpt(world, tmp_path)
    tamper(ck)
    assert cli(fresh, "import", "--parquet", str(ck)).returncode == 2
    with MemoryStore.open(Home.open(fresh)) as ms:
        assert [m.topic for m in ms.load()] == ["t"]
