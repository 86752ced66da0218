"""The synthetic monorepo generator (bench/monorepo.py) and a smoke run of bench/scale_bench.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from citegraph.bench.monorepo import GenerateError, generate_repo


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                          timeout=60).stdout


def tree(repo: Path) -> list[tuple[str, str, str]]:
    """(mode, blob id, path) of every entry of HEAD's tree."""
    out = []
    for line in git(repo, "ls-tree", "-r", "--full-tree", "HEAD").splitlines():
        meta, path = line.split("\t", 1)
        mode, _, oid = meta.split()
        out.append((mode, oid, path))
    return out


def test_synthetic_repo_is_committed_unique_checked_out_and_indexable(tmp_path, run_cli):
    gen = generate_repo(tmp_path / "mono", files=200, seed=3)
    repo = gen.path
    assert git(repo, "cat-file", "-t", gen.commit).strip() == "commit"
    assert git(repo, "rev-parse", "HEAD").strip() == gen.commit
    entries = tree(repo)
    assert len(entries) == gen.files == 200
    assert len({oid for _, oid, _ in entries}) == 200  # every blob unique
    assert git(repo, "status", "--porcelain") == ""  # checked out, clean
    assert all((repo / path).is_file() for _, _, path in entries)
    langs = {Path(p).suffix for _, _, p in entries}
    assert {".py", ".ts", ".go", ".rs", ".java"} <= langs
    # Deterministic from the seed: same parameters, same commit; another seed differs.
    assert generate_repo(tmp_path / "again", files=200, seed=3, checkout=False).commit == gen.commit
    assert generate_repo(tmp_path / "other", files=200, seed=4, checkout=False).commit != gen.commit

    proc = run_cli("index", "--json", str(repo), timeout=120)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["files"] == 200 and res["state"] == "ready"
    assert res["symbols"] > 5 * 200 * 0.9  # realistic density: several definitions per file
    for lang in ("python", "typescript", "go", "rust", "java"):
        cov = res["coverage"][lang]
        assert cov["indexed"] > 0 and cov["partial"] == 0 and cov["skipped"] == 0, (lang, cov)


def test_copies_mode_makes_every_blob_unique_and_keeps_the_code(tmp_path, make_repo):
    src = make_repo("src")
    body = "def f():\n    return 1\n"
    src.write("a.py", body)
    src.write("b.py", body)  # the same blob twice in the source
    src.write("pkg/__init__.py", "")
    src.write("c.py", body + "\n")  # collides with a.py plus one newline
    os.symlink("a.py", src.root / "link.py")
    src.commit("source")
    gen = generate_repo(tmp_path / "copies", source=src.root, copies=3)
    entries = tree(gen.path)
    assert gen.files == len(entries) == 3 * 5
    assert {p.split("/", 1)[0] for _, _, p in entries} == {"copy00", "copy01", "copy02"}
    regular = [(oid, p) for mode, oid, p in entries if mode != "120000"]
    assert len({oid for oid, _ in regular}) == len(regular) == 12
    for _, _, path in entries:
        copy = gen.path / path
        original = src.root / path.split("/", 1)[1]
        if copy.is_symlink():
            assert os.readlink(copy) == os.readlink(original)
            continue
        data, want = copy.read_bytes(), original.read_bytes()
        assert data.startswith(want) and set(data[len(want):]) <= {ord("\n")}


def test_bad_destination_and_source_are_one_line_errors(tmp_path):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("keep me")
    with pytest.raises(GenerateError):
        generate_repo(busy, files=10)
    assert (busy / "x").read_text() == "keep me"
    for args in ([str(busy), "--files", "10"], [str(tmp_path / "new"), "--source", str(tmp_path / "nope")]):
        proc = subprocess.run([sys.executable, "-m", "citegraph.bench.monorepo", *args], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_scale_bench_smoke(tmp_path):
    gen = generate_repo(tmp_path / "mono", files=120, seed=5)
    proc = subprocess.run([sys.executable, "-m", "citegraph.bench.scale_bench", "--repo", str(gen.path),
                           "--replay", "1", "--switch-files", "3", "--figures", "cold,commit,dirty,switch,storage",
                           "--json", "--quiet"], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    fig = json.loads(proc.stdout)["figures"]
    assert fig["cold"]["files"] == 120 and fig["cold"]["floor_seconds"] > 0 and fig["cold"]["ratio"] > 0
    for key in ("commit_warm", "commit_cold_process_rev", "commit_cold_process_worktree", "dirty_cold_process",
                "switch_cold_process", "switch_back_reused"):
        assert fig[key]["n"] == 1 and fig[key]["floor_p50_ms"] > 0, key
    assert fig["storage"]["cold_full"]["n"] == 1 and fig["storage"]["home_bytes"] > 0
    assert git(gen.path, "rev-parse", "HEAD").strip() == gen.commit  # the repository was not touched
    assert git(gen.path, "status", "--porcelain") == ""
