"""A hostile committed ``.citegraph.toml`` (issue 20, item 4): the file is untrusted input.

Each case is a real repository with the file committed; ``index``, ``check --base`` and a
validate served by ``citegraph serve`` (of the hostile repository and of another one)
answer within a bound: a correct index, or one error line naming the key, exit 2, no
traceback. The timeouts below are bounds on a hang (the catastrophic-backtracking pattern
ran for minutes before), not performance assertions."""

from __future__ import annotations

import json

import pytest
from service_helpers import js, needs_service, wait_exact

from citegraph.indexer.config import parse_config

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


def client_alive(run_cli, good) -> bool:
    st = js(run_cli("status", "--json", str(good.root), timeout=BOUND_S))
    return st["service"]["used"] is True
