"""A hostile committed ``.citegraph.toml`` (issue 20, item 4): the file is untrusted input.

Each case is a real repository with the file committed; ``index``, ``check --base`` and a
validate served by ``citegraph serve`` (of the hostile repository and of another one)
answer within a bound: a correct index, or one error line naming the key, exit 2, no
traceback. The timeouts below are bounds on a hang (the catastrophic-backtracking pattern
ran for minutes before), not performance assertions."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pathspec
import pytest
from gitutil import GitRepo
from hypothesis import given, settings
from hypothesis import strategies as st
from service_helpers import js, needs_service, wait_exact
from stall_launcher import stalled_argv

from citegraph.graph import queries
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.indexer.config import KEYS, MAX_FILE_BYTES, MAX_TIMEOUT_S, parse_config
from citegraph.indexer.errors import CitegraphError

BOUND_S = 60  # a hang, not a speed: each call takes about a second
LONG_NAME = "a" * 60 + ".py"
BACKTRACK = "a*" * 25 + "b"  # exponential under Python's re against LONG_NAME
PY = "def f():\n    return 1\n"

# (the committed file, the key its error line must name, or None when it indexes)
HOSTILE = {
    "backtracking": (f'[index]\nexclude = ["{BACKTRACK}"]\n', None),
    "inf": ("[index]\nmax_file_bytes = inf\n", "max_file_bytes"),
    "bad-range": ('[index]\nexclude = ["[z-a]"]\n', "exclude"),
    "deep": ("[index]\nexclude = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    "nan": ("[index]\nparse_timeout_s = nan\n", "parse_timeout_s"),
    "string": ('[index]\nmax_file_bytes = "12"\n', "max_file_bytes"),
    "bool": ("[index]\nmax_file_bytes = true\n", "max_file_bytes"),
    "huge": ("[index]\nmax_file_bytes = 9223372036854775807\n", "max_file_bytes"),
    "escape": ('[index]\nexclude = ["\\u001b]0;pwned\\u0007[z-a]"]\n', "exclude"),
}


def hostile_repo(make_repo, toml: str):
    r = make_repo()
    r.write("src/a.py", PY)
    r.write("src/" + LONG_NAME, "x = 1\n")
    base = r.commit("c1")
    r.write(".citegraph.toml", toml)
    r.commit("hostile config")
    return r, base


def one_clear_line(proc, key: str) -> None:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "\x1b" not in proc.stderr + proc.stdout
    assert key in proc.stderr, proc.stderr


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_index_and_check_answer_in_bounded_time(case, make_repo, run_cli):
    toml, key = HOSTILE[case]
    r, base = hostile_repo(make_repo, toml)
    idx = run_cli("index", cwd=r.root, timeout=BOUND_S)
    chk = run_cli("check", "--base", base, "--format", "json", cwd=r.root, timeout=BOUND_S)
    if key is None:
        assert idx.returncode == 0, idx.stderr
        assert chk.returncode == 0 and "Traceback" not in chk.stderr, chk.stderr
        assert json.loads(chk.stdout)["status"] != "unknown"
    else:
        one_clear_line(idx, key)
        assert len(idx.stderr.strip().splitlines()) == 1, idx.stderr
        assert chk.returncode == 2 and "Traceback" not in chk.stderr, chk.stderr
        assert key in chk.stdout + chk.stderr


def test_the_backtracking_pattern_keeps_gitignore_semantics(make_repo, run_cli):
    """RE2 matches what Python's re would: ``a*…a*b`` excludes a name that ends in b and
    keeps the 60-a name; the index says which."""
    r, _ = hostile_repo(make_repo, f'[index]\nexclude = ["{BACKTRACK}"]\n')
    r.write("src/" + "a" * 30 + "b", "y = 2\n")
    r.commit("a name the pattern matches")
    cfg = parse_config(r.read(".citegraph.toml").encode())
    assert cfg.excluded("src/" + "a" * 30 + "b") and not cfg.excluded("src/" + LONG_NAME)
    assert run_cli("index", cwd=r.root, timeout=BOUND_S).returncode == 0
    st = js(run_cli("status", "--json", "--no-service", str(r.root), timeout=BOUND_S))
    assert st["exact_current"], st


@needs_service
def test_a_served_validate_of_another_repository_is_not_blocked(make_repo, run_cli, serve):
    """Under ``serve``, a hostile repository (a pattern that backtracked for minutes, then
    an unreadable config) neither hangs the service nor delays another repository."""
    bad, _ = hostile_repo(make_repo, f'[index]\nexclude = ["{BACKTRACK}"]\n')
    good = make_repo()
    good.write("a.py", PY)
    c1 = good.commit("c1")
    serve(str(bad.root), str(good.root))
    wait_exact(run_cli, bad.root, bad.head(), False)
    bad.write(".citegraph.toml", HOSTILE["deep"][0])
    bad.commit("now nested 5000 deep")
    wait_exact(run_cli, good.root, c1, False)
    mem = js(run_cli("remember", "--text", "f returns one", "--repo", str(good.root), "--code-ref", "a.py::f",
                     "--json", timeout=BOUND_S))
    via = js(run_cli("validate", "--format", "json", "--repo", str(good.root), timeout=BOUND_S))
    assert via["memories"][0]["id"] == mem["id"] and via["memories"][0]["freshness"] == "fresh"
    # the hostile repository's own read is one clear error or an honest answer, through the service
    st = run_cli("status", "--json", str(bad.root), timeout=BOUND_S)
    assert "Traceback" not in st.stderr, st.stderr
    assert client_alive(run_cli, good)


@needs_service
def test_a_stalled_build_holds_its_own_lane_only(make_repo, run_cli, home, tmp_path):
    """Under ``serve``, a repository whose build hangs (stalled for a minute at extraction,
    tests/stall_launcher.py) does not hold up another repository: that one is built in its
    own lane and a validate through the service answers fresh."""
    slow, good = make_repo("slowrepo"), make_repo("goodrepo")
    slow.write("src/a.py", PY)
    slow.commit("c1")
    good.write("a.py", PY)
    c1 = good.commit("c1")
    marker, log = tmp_path / "stalled", tmp_path / "serve.log"
    env = {**os.environ, "CITEGRAPH_HOME": str(home.root)}
    with open(log, "w") as err:
        p = subprocess.Popen(stalled_argv("extract@slowrepo", marker, 60, "serve", "--debounce-ms", "10",
                                          str(slow.root), str(good.root)),
                             env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + BOUND_S
        while not marker.exists():
            assert p.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        st = wait_exact(run_cli, good.root, c1, False)  # while the slow build still stalls
        assert st["service"]["used"] is True and p.poll() is None
        js(run_cli("remember", "--text", "f returns one", "--repo", str(good.root), "--code-ref", "a.py::f",
                   "--json", timeout=BOUND_S))
        via = js(run_cli("validate", "--format", "json", "--repo", str(good.root), timeout=BOUND_S))
        assert [m["freshness"] for m in via["memories"]] == ["fresh"]
        slow_st = js(run_cli("status", "--json", str(slow.root), timeout=BOUND_S))
        assert not slow_st["exact_current"]  # still stalled: never reported ready
    finally:
        p.kill()
        p.wait(BOUND_S)


def client_alive(run_cli, good) -> bool:
    st = js(run_cli("status", "--json", str(good.root), timeout=BOUND_S))
    return st["service"]["used"] is True


# --- generated documents (acceptance 3): a clear error or a correct index, bounded ---------------

HANG_S = 30  # a bound on a hang, far above the milliseconds each example takes
FILES = ["src/a.py", "tests/t.py", "docs/x/y.py", "src/" + LONG_NAME, "b/ab.py", "node_modules/m.py"]
GLOB = st.text(alphabet="ab*?/[]!\\-.#", min_size=1, max_size=12)
PATHOLOGICAL = st.integers(1, 40).map(lambda n: "a*" * n + "b")


@contextlib.contextmanager
def bounded(seconds: int = HANG_S):
    """Fail (rather than hang the suite) if the body runs past ``seconds``."""
    def expire(_signum, _frame):
        raise AssertionError(f"no answer within {seconds}s: a hang")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, str):
        return json.dumps(v)  # JSON escapes are TOML's (a lone surrogate is a TOML error: fine)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return str(v)


values = st.one_of(
    st.integers(min_value=-(10 ** 30), max_value=10 ** 30), st.integers(0, 1 << 21),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.text(max_size=8),
    st.lists(st.one_of(GLOB, PATHOLOGICAL), max_size=6), st.lists(st.integers(), max_size=3),
)
documents = st.one_of(
    st.dictionaries(st.sampled_from([*KEYS, "excludes", "index"]), values, max_size=3).map(
        lambda d: "[index]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in d.items())),
    st.tuples(st.sampled_from(["[index]\nexclude = ", "x = ", "[index]\nmax_file_bytes = "]),
              st.integers(1, 6000), st.sampled_from(["[", "{a="])).map(
        lambda t: t[0] + t[2] * t[1] + ("]" if t[2] == "[" else "}") * t[1] + "\n"),
    st.text(max_size=200).map(lambda s: "[index]\n" + s),
)


def check_answer(doc: str):
    """parse_config's answer to ``doc``: a valid configuration or one clear error line."""
    try:
        cfg = parse_config(doc.encode("utf-8", "surrogatepass"))
    except CitegraphError as err:
        line = err.line()
        assert err.code == 2 and "\n" not in line and line.startswith("citegraph: .citegraph.toml")
        assert not any(not c.isprintable() for c in line), repr(line)  # a hostile value is shown escaped
        return None
    assert type(cfg.max_file_bytes) is int and 1 <= cfg.max_file_bytes <= MAX_FILE_BYTES
    assert type(cfg.parse_timeout_s) is float and math.isfinite(cfg.parse_timeout_s)
    assert 0 < cfg.parse_timeout_s <= MAX_TIMEOUT_S
    assert all(isinstance(p, str) for p in cfg.exclude)
    return cfg


@given(documents)
def test_generated_documents_are_a_config_or_one_clear_error(doc):
    with bounded():
        cfg = check_answer(doc)
        if cfg is not None:
            for path in FILES:
                cfg.excluded(path)


@given(st.lists(GLOB, min_size=1, max_size=5), st.lists(st.text(alphabet="ab/.-", min_size=1, max_size=10),
                                                         min_size=1, max_size=8))
def test_re2_matches_what_pythons_re_matches(patterns, paths):
    """The engine changed, not the semantics: on inputs too short to backtrack badly, RE2's
    answers equal pathspec's Python-re backend's."""
    try:
        cfg = parse_config(("[index]\nexclude = " + toml_value(patterns) + "\n").encode())
    except CitegraphError:
        return  # an invalid pattern: one clear error (checked above)
    reference = pathspec.GitIgnoreSpec.from_lines(cfg.exclude, backend="simple")
    for path in paths:
        assert cfg.excluded(path) == reference.match_file(path), (patterns, path)


@settings(max_examples=max(3, settings.default.max_examples // 5))
@given(documents)
def test_a_committed_generated_config_indexes_correctly_or_errs(doc):
    """In a real repository with the document committed: the build is one clear error, or
    a ready snapshot holding exactly the files the configuration does not exclude."""
    with tempfile.TemporaryDirectory() as tmp, bounded(2 * HANG_S):
        repo, home = GitRepo(Path(tmp) / "repo"), Home.open(Path(tmp) / "home")
        for path in FILES:
            repo.write(path, "def f():\n    return 1\n")
        repo.write(".citegraph.toml", doc.encode("utf-8", "surrogatepass"))
        repo.commit("generated config")
        cfg = check_answer(doc)
        try:
            res = build_snapshot(repo.root, home, jobs=1)
        except CitegraphError as err:
            assert cfg is None and err.code == 2, err.line()
            return
        assert cfg is not None and res.state == "ready"
        rows = queries.find_symbols(str(repo.root), home, "f", 100, cwd=str(repo.root))["symbols"]
        found = {r["path"] for r in rows}
        size = len("def f():\n    return 1\n")
        expected = {p for p in FILES if not cfg.excluded(p)} if size <= cfg.max_file_bytes else set()
        assert found <= expected
        if cfg.parse_timeout_s >= 1:  # a shorter bound may honestly skip a parse (skipped/timeout)
            assert found == expected
