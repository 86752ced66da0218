"""Errors and bad input (SPEC §12): one clear line, the right exit code, no traceback; and
every awkward file is inventoried with its coverage status and reason."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from gitutil import GIT_ENV, GitRepo
from stall_launcher import hung_report, stalled_argv

from citegraph.graph.snapshot_reader import Snapshot
from citegraph.graph.store import Home

# --- helpers ----------------------------------------------------------------------------


def assert_clean_error(proc: subprocess.CompletedProcess, code: int, *words: str) -> str:
    """Exit ``code``, exactly one stderr line starting ``citegraph:``, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("citegraph: "), lines[0]
    for w in words:
        assert w.lower() in lines[0].lower(), (w, lines[0])
    return lines[0]


def index_ok(run_cli, path: Path, *extra: str) -> dict:
    proc = run_cli("index", "--json", *extra, str(path))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    data = json.loads(proc.stdout)
    assert data["state"] == "ready"
    return data


def _open(home_root: Path, result: dict) -> Snapshot:
    return Snapshot.open(Home(home_root).repo(result["repository_id"]), result["snapshot_id"])


def files_table(home_root: Path, result: dict) -> dict[str, dict]:
    """Per-file coverage rows of a snapshot (its logical ``files`` table)."""
    with _open(home_root, result) as snap:
        return {r["path"]: r for r in snap.dicts("SELECT * FROM files ORDER BY path")}


def symbols_table(home_root: Path, result: dict, path: str) -> list[dict]:
    with _open(home_root, result) as snap:
        return snap.dicts("SELECT * FROM symbols WHERE path = ? ORDER BY start_byte", [path])


def git(cwd: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV},
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


# --- one repository full of awkward files (built once) -----------------------------------

CONFIG = b'[index]\nmax_file_bytes = 1000\nexclude = ["generated/*"]\n'
GOOD = "def good():\n    return 1\n"
CRLF = b"import os\r\n\r\n\r\ndef one():\r\n    return 1\r\n\r\n\r\nclass Two:\r\n    def three(self):\r\n        return one()\r\n"
LATIN1 = b"# caf\xe9\nGREETING = 'd\xe9j\xe0 vu'\n\n\ndef hello():\n    return GREETING\n"
SYNTAX = "def before():\n    return 1\n\n\nclass AlsoBefore:\n    pass\n\n\ndef broken(:\n    pass\n"
HUGE = "def huge():\n" + "    x = 1\n" * 200  # > 1000 bytes
LFS = "version https://git-lfs.github.com/spec/v1\noid sha256:" + "a" * 64 + "\nsize 123456\n"
UNICODE_PATH = "src/naïve dir/ü.py"

EXPECTED = [
    # path, status, reason
    ("good.py", "indexed", None),
    ("link.py", "skipped", "symlink"),
    ("vendor/sub", "skipped", "submodule"),
    ("data.bin", "skipped", "binary"),
    ("nul.py", "skipped", "binary"),
    ("huge.py", "skipped", "too-large"),
    ("web/app.min.js", "skipped", "excluded"),
    ("generated/gen.py", "skipped", "excluded"),
    ("crlf.py", "indexed", None),
    ("syntax.py", "partial", 'MISSING ")" in parameters'),  # a partial file names its first error
    (UNICODE_PATH, "indexed", None),
    ("notes.txt", "skipped", "unsupported-language"),
    ("asset.psd", "skipped", "lfs-pointer"),
]


@pytest.fixture(scope="module")
def awkward(tmp_path_factory):
    base = tmp_path_factory.mktemp("awkward")
    sub = GitRepo(base / "subrepo")
    sub.write("lib.py", "def lib():\n    pass\n")
    sub.commit("sub")
    repo = GitRepo(base / "repo")
    repo.write(".citegraph.toml", CONFIG)
    repo.write("good.py", GOOD)
    os.symlink("good.py", repo.root / "link.py")
    repo.write("data.bin", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00")
    repo.write("nul.py", b"def x():\n    return 1\n\x00\x00\n")
    repo.write("huge.py", HUGE)
    repo.write("web/app.min.js", "function a(){return 1}\n")
    repo.write("generated/gen.py", GOOD)
    repo.write("crlf.py", CRLF)
    repo.write("latin1.py", LATIN1)
    repo.write("syntax.py", SYNTAX)
    repo.write(UNICODE_PATH, "def umlaut():\n    return 'ü'\n")
    repo.write("notes.txt", "plain notes\n")
    repo.write("asset.psd", LFS)
    repo.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub.root), "vendor/sub")
    repo.commit("awkward")
    home_root = base / "home"
    env = {**os.environ, "CITEGRAPH_HOME": str(home_root)}

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], env=env,
                              capture_output=True, text=True, timeout=120)

    proc = cli("index", "--json", str(repo.root))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads(proc.stdout)
    return {"repo": repo, "home": home_root, "result": result, "cli": cli,
            "files": files_table(home_root, result)}


@pytest.mark.parametrize(("path", "status", "reason"), EXPECTED, ids=[e[0] for e in EXPECTED])
def test_awkward_file_coverage_recorded(awkward, path, status, reason):
    files = awkward["files"]
    assert path in files, sorted(files)
    row = files[path]
    assert (row["status"], row["reason"]) == (status, reason)
    assert row["dirty"] is False
    if status == "skipped":
        assert symbols_table(awkward["home"], awkward["result"], path) == []
    else:
        assert symbols_table(awkward["home"], awkward["result"], path) != []


def test_awkward_index_summary(awkward):
    res = awkward["result"]
    assert res["state"] == "ready"
    assert res["files"] == len(awkward["files"])
    assert set(awkward["files"]) >= {e[0] for e in EXPECTED} | {"latin1.py", ".gitmodules"}
    py = res["coverage"]["python"]
    assert py["partial"] >= 1 and py["skipped"] >= 4 and py["indexed"] >= 4
    assert sum(c["indexed"] + c["partial"] + c["skipped"] for c in res["coverage"].values()) == res["files"]
    assert py["partial_causes"] == {'MISSING ")" in parameters': py["partial"]}
    assert sum(py["skipped_reasons"].values()) == py["skipped"]


def test_non_utf8_source_is_indexed_without_crash(awkward):
    row = awkward["files"]["latin1.py"]
    assert row["status"] in ("indexed", "partial")
    names = [s["name"] for s in symbols_table(awkward["home"], awkward["result"], "latin1.py")]
    assert "hello" in names


def test_crlf_line_numbers(awkward):
    proc = awkward["cli"]("symbols", str(awkward["repo"].root / "crlf.py"), "--json")
    assert proc.returncode == 0, proc.stderr
    spans = {s["qualified_name"]: (s["start_line"], s["end_line"])
             for s in json.loads(proc.stdout)["symbols"]}
    assert spans == {"one": (4, 5), "Two": (8, 10), "Two.three": (9, 10)}
    # Byte ranges address the CRLF bytes exactly.
    (one,) = [s for s in symbols_table(awkward["home"], awkward["result"], "crlf.py")
              if s["name"] == "one"]
    assert CRLF[one["start_byte"]:one["end_byte"]] == b"def one():\r\n    return 1"


def test_syntax_error_keeps_symbols_before_the_error(awkward):
    names = [s["qualified_name"] for s in symbols_table(awkward["home"], awkward["result"],
                                                        "syntax.py")]
    assert names[:2] == ["before", "AlsoBefore"]


def test_unicode_and_space_in_path(awkward):
    full = awkward["repo"].root / UNICODE_PATH
    proc = awkward["cli"]("symbols", str(full), "--json")
    assert proc.returncode == 0, proc.stderr
    (sym,) = json.loads(proc.stdout)["symbols"]
    assert sym["path"] == UNICODE_PATH
    assert sym["qualified_name"] == "umlaut"
    found = awkward["cli"]("find", "umlaut", "--repo", str(awkward["repo"].root), "--json")
    assert found.returncode == 0, found.stderr
    assert [s["path"] for s in json.loads(found.stdout)["symbols"]] == [UNICODE_PATH]


def test_symlink_and_submodule_do_not_make_the_worktree_dirty(awkward):
    proc = awkward["cli"]("status", "--json", str(awkward["repo"].root))
    assert proc.returncode == 0, proc.stderr
    st = json.loads(proc.stdout)
    assert st["dirty"] is False
    assert st["exact_current"] is True


# --- repository-level errors --------------------------------------------------------------


def test_not_a_repository(tmp_path, run_cli):
    plain = tmp_path / "plain"
    plain.mkdir()
    for cmd in (("index",), ("status", "--json")):
        line = assert_clean_error(run_cli(*cmd, str(plain)), 3, "not a git repository")
        assert str(plain) in line


def test_missing_directory(tmp_path, run_cli):
    assert_clean_error(run_cli("index", str(tmp_path / "nope")), 3, "no such directory")


def test_bare_repository(tmp_path, repo, run_cli, home):
    repo.write("a.py", GOOD)
    c1 = repo.commit("c1")
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    repo.git("push", "-q", str(bare), "main")
    assert_clean_error(run_cli("index", str(bare)), 2, "bare", "--rev")
    data = index_ok(run_cli, bare, "--rev", "main")
    assert data["commit"] == c1 and data["dirty"] is False and data["files"] == 1
    assert files_table(home.root, data)["a.py"]["status"] == "indexed"
    again = index_ok(run_cli, bare, "--rev", c1)
    assert again["reused"] is True and again["snapshot_id"] == data["snapshot_id"]


def test_empty_repository(repo, run_cli):
    assert_clean_error(run_cli("index", str(repo.root)), 3, "no commits")
    assert_clean_error(run_cli("status", str(repo.root)), 3, "no commits")
    assert_clean_error(run_cli("index", "--rev", "HEAD", str(repo.root)), 2, "not a commit")


def test_detached_head(repo, run_cli, home):
    repo.write("a.py", "def first():\n    pass\n")
    c1 = repo.commit("c1")
    repo.write("a.py", "def second():\n    pass\n")
    repo.commit("c2")
    repo.checkout(c1)
    assert repo.git("rev-parse", "--abbrev-ref", "HEAD") == "HEAD"
    data = index_ok(run_cli, repo.root)
    assert data["commit"] == c1
    assert [s["name"] for s in symbols_table(home.root, data, "a.py")] == ["first"]
    st = json.loads(run_cli("status", "--json", str(repo.root)).stdout)
    assert st["head"] == c1 and st["exact_current"] is True


def test_shallow_clone(tmp_path, repo, run_cli, home):
    repo.write("a.py", "def old():\n    pass\n")
    repo.commit("c1")
    repo.write("a.py", "def new():\n    pass\n")
    repo.write("b.py", GOOD)
    c2 = repo.commit("c2")
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo.root}", str(shallow)],
                   check=True, env={**os.environ, **GIT_ENV})
    assert (shallow / ".git" / "shallow").exists()
    data = index_ok(run_cli, shallow)
    assert data["commit"] == c2 and data["files"] == 2
    files = files_table(home.root, data)
    assert {p: r["status"] for p, r in files.items()} == {"a.py": "indexed", "b.py": "indexed"}
    assert [s["name"] for s in symbols_table(home.root, data, "a.py")] == ["new"]


def test_missing_blob_is_skipped_and_redone_once_present(repo, run_cli, home, tmp_path):
    repo.write("a.py", "def present_later():\n    pass\n")
    repo.write("b.py", "def other():\n    pass\n")
    repo.commit("c1")
    blob = repo.git("rev-parse", "HEAD:a.py")
    obj = repo.root / ".git" / "objects" / blob[:2] / blob[2:]
    assert obj.exists(), "expected a loose object"
    saved = tmp_path / "saved-object"
    saved.write_bytes(obj.read_bytes())
    obj.unlink()

    data = index_ok(run_cli, repo.root)
    files = files_table(home.root, data)
    assert (files["a.py"]["status"], files["a.py"]["reason"]) == ("skipped", "missing-blob")
    assert files["b.py"]["status"] == "indexed"
    assert data["dirty"] is False

    # The object comes back (a partial clone fetched it); a new commit touches another file.
    obj.write_bytes(saved.read_bytes())
    repo.write("b.py", "def other():\n    return 2\n")
    repo.commit("c2")
    data2 = index_ok(run_cli, repo.root)
    files2 = files_table(home.root, data2)
    assert (files2["a.py"]["status"], files2["a.py"]["reason"]) == ("indexed", None)
    assert [s["name"] for s in symbols_table(home.root, data2, "a.py")] == ["present_later"]


def test_invalid_config_file(repo, run_cli):
    repo.write("a.py", GOOD)
    repo.write(".citegraph.toml", "[index\nmax_file_bytes = = 3\n")
    repo.commit("bad config")
    assert_clean_error(run_cli("index", str(repo.root)), 2, ".citegraph.toml", "invalid")
    repo.write(".citegraph.toml", "[index]\nmax_file_bytes = -5\n")
    repo.commit("bad bound")
    assert_clean_error(run_cli("index", str(repo.root)), 2, ".citegraph.toml")
    repo.write(".citegraph.toml", "[index]\nmax_file_bytes = 'lots'\n")
    repo.commit("bad type")
    assert_clean_error(run_cli("index", str(repo.root)), 2, ".citegraph.toml")


@pytest.mark.parametrize("rev", ["nonsense", "HEAD~5", "deadbeef" * 5, "main..HEAD"])
def test_malformed_rev(repo, run_cli, rev):
    repo.write("a.py", GOOD)
    repo.commit("c1")
    assert_clean_error(run_cli("index", "--rev", rev, str(repo.root)), 2, rev)


def test_sigint_during_build(repo, home, run_cli, tmp_path):
    repo.write("a.py", GOOD)
    c1 = repo.commit("c1")
    marker = tmp_path / "stalled"
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    proc = subprocess.Popen(stalled_argv("extract", marker, 120, "index", "--json", str(repo.root)),
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and marker.read_text()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "build never reached its stall point"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail("the stalled build did not exit within 60 s of SIGINT:\n" + hung_report(proc))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert_clean_error(done, 130, "interrupted")
    assert out == ""

    st = run_cli("status", "--json", str(repo.root))
    assert st.returncode == 0, st.stderr
    status = json.loads(st.stdout)
    assert status["exact_current"] is False
    (snap,) = status["snapshots"]
    assert snap["state"] == "failed" and snap["commit"] == c1
    rs = home.repo(status["repository_id"])
    assert not rs.snapshot_files(snap["snapshot_id"])
    # The interrupted builder cleaned up after itself (no gc needed).
    assert [p.name for p in (rs.root / "tmp").iterdir() if f".{proc.pid}." in p.name] == []

    data = index_ok(run_cli, repo.root)
    assert data["snapshot_id"] == snap["snapshot_id"] and data["reused"] is False


@pytest.mark.parametrize("damage", ["garbage", "foreign-duckdb", "same-size-garbage"])
def test_corrupt_snapshot_file_heals(repo, home, run_cli, damage):
    """A damaged snapshot is found, marked failed (never exact-current), rebuilt by the
    next index and removed by gc — no file deleted by hand (SPEC §12.1)."""
    repo.write("a.py", GOOD)
    repo.commit("c1")
    data = index_ok(run_cli, repo.root)
    snap = home.repo(data["repository_id"]).snapshot_path(data["snapshot_id"])
    size = snap.stat().st_size
    if damage == "garbage":
        snap.unlink()
        snap.write_bytes(b"this is not a database\n" * 300)
    elif damage == "foreign-duckdb":
        snap.unlink()
        con = duckdb.connect(str(snap))
        con.execute("CREATE TABLE unrelated(x INTEGER)")
        con.close()
    else:  # same size, so only opening the file can tell
        snap.write_bytes(b"\x00garbage" * (size // 8) + b"\x00" * (size % 8))
        assert snap.stat().st_size == size

    first = run_cli("symbols", str(repo.root / "a.py"), "--json")
    line = assert_clean_error(first, 1, "run citegraph index")
    assert "damaged" in line or "failed" in line, line
    assert_clean_error(run_cli("find", "good", "--repo", str(repo.root)), 1, "failed")
    st = run_cli("status", "--json", str(repo.root))
    assert st.returncode == 0, st.stderr
    status = json.loads(st.stdout)
    assert status["exact_current"] is False and status["snapshot_id"] is None
    (entry,) = status["snapshots"]
    assert entry["state"] == "failed" and "damaged" in entry["reason"]

    again = index_ok(run_cli, repo.root)
    assert again["snapshot_id"] == data["snapshot_id"] and again["reused"] is False
    sym = run_cli("symbols", str(repo.root / "a.py"), "--json")
    assert sym.returncode == 0, sym.stderr
    assert [s["name"] for s in json.loads(sym.stdout)["symbols"]] == ["good"]


def test_symbols_of_unknown_or_outside_file(repo, run_cli, tmp_path):
    repo.write("a.py", GOOD)
    repo.commit("c1")
    index_ok(run_cli, repo.root)
    assert_clean_error(run_cli("symbols", str(repo.root / "missing.py")), 2, "missing.py")
    outside = tmp_path / "outside.py"
    outside.write_text(GOOD)
    assert_clean_error(run_cli("symbols", str(outside)), 3, "not a git repository")


def test_data_home_path_with_quote_space_and_unicode(repo, run_cli, tmp_path):
    odd_home = tmp_path / "o'brien ü home"
    env = {"CITEGRAPH_HOME": str(odd_home)}
    repo.write("a.py", GOOD)
    repo.write("b.py", "def stays():\n    pass\n")
    repo.commit("c1")
    first = run_cli("index", "--json", str(repo.root), env=env)
    assert first.returncode == 0, first.stderr
    repo.write("a.py", "def changed():\n    pass\n")
    repo.commit("c2")  # a second build reads the first one back (facts, base)
    second = run_cli("index", "--json", str(repo.root), env=env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["state"] == "ready"
    for path, names in (("a.py", ["changed"]), ("b.py", ["stays"])):
        sym = run_cli("symbols", str(repo.root / path), "--json", env=env)
        assert sym.returncode == 0, sym.stderr
        assert [s["name"] for s in json.loads(sym.stdout)["symbols"]] == names
    found = run_cli("find", "stays", "--repo", str(repo.root), "--json", env=env)
    assert found.returncode == 0, found.stderr
    assert [s["path"] for s in json.loads(found.stdout)["symbols"]] == ["b.py"]
