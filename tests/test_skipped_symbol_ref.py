"""Issue 20, item 11: citing a symbol in a file the indexer skipped (too large for
``max_file_bytes``) says why — "skipped: too large (N bytes)" and what to cite instead —
not "the file has no symbols". Through the CLI, one-shot and through the service."""

from __future__ import annotations

import json

from service_helpers import TIMEOUT, needs_service, wait_exact

CONFIG = "[index]\nmax_file_bytes = 200\n"
BIG = "def f():\n    return 1\n" + "".join(f"def g{i}():\n    return {i}\n" for i in range(30))


def refused(p) -> str:
    assert p.returncode == 2 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    (line,) = p.stderr.strip().splitlines()
    return line


def check(line: str) -> None:
    size = len(BIG.encode())
    assert f"the file was skipped: too large ({size} bytes)" in line, line
    assert "has no symbols" not in line
    assert "big.py#L1-L9" in line and "max_file_bytes" in line


@needs_service
def test_a_symbol_in_a_too_large_file(repo, home, run_cli, serve):
    repo.write(".citegraph.toml", CONFIG)
    repo.write("big.py", BIG)
    repo.write("small.py", "def s():\n    return 1\n")
    head = repo.commit("c1")
    assert run_cli("index", str(repo.root), "--no-service").returncode == 0
    args = ("remember", "--text", "f returns one", "--repo", str(repo.root), "--code-ref", "big.py::f")
    check(refused(run_cli(*args, "--no-service")))
    # the file and its lines can still be cited; a symbol of an indexed file too
    ok = run_cli("remember", "--text", "big", "--repo", str(repo.root), "--code-ref", "big.py", "--code-ref",
                 "big.py#L1-L2", "--code-ref", "small.py::s", "--json", "--no-service")
    assert ok.returncode == 0, ok.stderr
    assert [c["kind"] for c in json.loads(ok.stdout)["citations"]] == ["file", "span", "symbol"]
    # a name that is simply absent from an indexed file keeps the usual suggestion
    miss = refused(run_cli("remember", "--text", "x", "--repo", str(repo.root), "--code-ref", "small.py::nope",
                           "--no-service"))
    assert "skipped" not in miss and "no symbol nope in small.py" in miss
    serve(str(repo.root))
    wait_exact(run_cli, repo.root, head, False)
    check(refused(run_cli(*args, timeout=TIMEOUT)))
