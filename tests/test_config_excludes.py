""".citegraph.toml (docs/config.md; issue 12 "Configuration"): excludes with gitignore
semantics (pathspec), so ``tests``, ``tests/`` and ``tests/*`` all exclude; unknown keys
are refused; and ``index`` and the service read the same copy — the committed one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from citegraph.indexer.config import DEFAULT_EXCLUDES, KEYS, IndexConfig, parse_config
from citegraph.indexer.errors import CitegraphError


def cli(home, *args, cwd=None):
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def cfg(*patterns: str) -> IndexConfig:
    return parse_config(("[index]\nexclude = " + json.dumps(list(patterns)) + "\n").encode())


@pytest.mark.parametrize("pattern", ["tests/", "tests", "tests/*", "/tests"])
def test_every_spelling_of_a_directory_excludes_it(pattern):
    c = cfg(pattern)
    assert c.excluded("tests/test_a.py") and c.excluded("tests/sub/test_b.py")
    assert not c.excluded("src/a.py") and not c.excluded("testsuite/a.py")


def test_gitignore_semantics():
    c = cfg("*.gen.py", "build/", "!build/keep.py", "docs/**/*.txt")
    assert c.excluded("a/b/x.gen.py")  # no slash: any depth
    assert c.excluded("build/out.py") and c.excluded("pkg/build/out.py")
    assert not c.excluded("build/keep.py")  # negation re-includes
    assert c.excluded("docs/a/b/c.txt") and not c.excluded("docs/a/b/c.md")
    # the defaults keep their meaning under the new matcher
    d = IndexConfig()
    assert d.exclude == DEFAULT_EXCLUDES
    assert d.excluded("web/app.min.js") and d.excluded("node_modules/x/y.js") and d.excluded("a/b/node_modules/z.js")
    assert not d.excluded("src/app.js")


def test_unknown_keys_and_bad_values_are_one_clear_error():
    with pytest.raises(CitegraphError, match="unknown key.*excludes.*known: max_file_bytes"):
        parse_config(b'[index]\nexcludes = ["tests"]\n')
    with pytest.raises(CitegraphError, match="exclude must be a list of strings"):
        parse_config(b'[index]\nexclude = "tests"\n')
    assert set(KEYS) == {"max_file_bytes", "parse_timeout_s", "exclude"}


def test_the_fingerprint_names_the_matcher():
    # the same patterns under the former fnmatch matching named other files: a snapshot
    # built then is not reused as if built with gitignore matching
    import blake3

    c = cfg("tests/*")
    old = blake3.blake3(f"{c.max_file_bytes}|{c.parse_timeout_s}|{'|'.join(c.exclude)}".encode()).hexdigest(8)
    assert c.fingerprint() != old
    assert cfg("tests").fingerprint() != cfg("tests/").fingerprint()


def _indexed_paths(home, repo) -> set[str]:
    data = json.loads(cli(home, "find", "*", "--repo", str(repo.root), "--json", "--limit", "10000",
                          "--no-service").stdout)
    return {s["path"] for s in data["symbols"]}


@pytest.mark.parametrize("pattern", ["tests/", "tests", "tests/*"])
def test_index_excludes_the_directory(repo, home, pattern):
    repo.write("src/a.py", "def a():\n    return 1\n")
    repo.write("tests/test_a.py", "def test_a():\n    assert True\n")
    repo.write(".citegraph.toml", f'[index]\nexclude = ["{pattern}"]\n')
    repo.commit("c1")
    assert cli(home, "index", str(repo.root), "--no-service").returncode == 0
    assert _indexed_paths(home, repo) == {"src/a.py"}


def test_index_and_the_service_read_the_committed_copy(repo, home, serve):
    repo.write("src/a.py", "def a():\n    return 1\n")
    repo.write("tests/test_a.py", "def test_a():\n    assert True\n")
    repo.write(".citegraph.toml", "[index]\nexclude = []\n")
    repo.commit("c1")
    repo.write(".citegraph.toml", '[index]\nexclude = ["tests"]\n')  # uncommitted edit
    one_shot = cli(home, "index", str(repo.root), "--no-service")
    assert one_shot.returncode == 0, one_shot.stderr
    assert "uncommitted changes; snapshots use the committed copy" in one_shot.stderr
    assert _indexed_paths(home, repo) == {"src/a.py", "tests/test_a.py"}
    snap = json.loads(cli(home, "status", str(repo.root), "--json", "--no-service").stdout)["snapshot_id"]
    s = serve(str(repo.root))
    try:
        deadline = time.monotonic() + 60
        while True:  # the service publishes its exact-current snapshot of the same state
            st = json.loads(cli(home, "status", str(repo.root), "--json").stdout)
            if st.get("service", {}).get("used") and st["exact_current"]:
                break
            assert time.monotonic() < deadline, st
            time.sleep(0.2)
        assert st["snapshot_id"] == snap  # same config fingerprint: the same snapshot
        served = json.loads(cli(home, "find", "test_a", "--repo", str(repo.root), "--json").stdout)["symbols"]
        assert [x["path"] for x in served] == ["tests/test_a.py"]
        repo.commit("c2")  # now the committed copy excludes tests/, for both
        deadline = time.monotonic() + 60
        while True:
            r = cli(home, "find", "test_a", "--repo", str(repo.root), "--json")
            if r.returncode == 1 and json.loads(r.stdout)["symbols"] == []:
                break
            assert time.monotonic() < deadline, r.stdout + r.stderr
            time.sleep(0.2)
    finally:
        s.stop()
    assert cli(home, "index", str(repo.root), "--no-service").returncode == 0
    assert _indexed_paths(home, repo) == {"src/a.py"}
