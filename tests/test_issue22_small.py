"""Issue 22 item 9: the smaller correctness bugs of the agent's first hour, each as the
case that showed it."""

from __future__ import annotations

import json
import threading

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import atomic_write_json
from citegraph.memory import api
from citegraph.memory.agent.hooks import pre_edit
from citegraph.memory.escape import md_code


def test_concurrent_atomic_writes_of_one_file_in_one_process(tmp_path):
    """Two worktrees of one repository under one `serve` write its .repo.json from two
    threads of one process: each write uses its own temporary file (before: both used
    .repo.json.<pid>.tmp and the slower one failed with FileNotFoundError)."""
    target = tmp_path / "repo.json"
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def writer(n: int) -> None:
        start.wait(timeout=30)
        try:
            for i in range(200):
                atomic_write_json(target, {"writer": n, "i": i, "pad": "x" * 4096})
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert json.loads(target.read_text())["i"] == 199
    assert [p.name for p in tmp_path.iterdir()] == ["repo.json"]  # no temporary file left


def test_one_memory_cites(make_repo, home):
    r = make_repo("grammar")
    r.write("a.py", "def f():\n    return 1\n")
    r.commit("c1")
    build_snapshot(r.root, home)
    api.remember(home, "f returns one", repo=r.root, refs=["a.py::f"], topic="one")
    ctx = pre_edit(home, str(r.root / "a.py"))["hookSpecificOutput"]["additionalContext"]
    assert ctx.startswith("citegraph: 1 memory cites a.py,"), ctx
    api.remember(home, "f is small", repo=r.root, refs=["a.py"], topic="two")
    ctx = pre_edit(home, str(r.root / "a.py"))["hookSpecificOutput"]["additionalContext"]
    assert ctx.startswith("citegraph: 2 memories cite a.py,"), ctx


def test_out_files_follow_the_umask(tmp_path):
    """`check --out` / `report --out`: a new file gets 0666 less the umask (before: 0600
    from mkstemp, whatever the umask); a replaced file keeps its mode."""
    import os
    import stat

    from citegraph.cli.check_cmds import write_output

    def mode(p) -> int:
        return stat.S_IMODE(os.stat(p).st_mode)

    old = os.umask(0o022)
    try:
        write_output(str(tmp_path / "a.sarif"), "{}\n")
        os.umask(0o002)
        write_output(str(tmp_path / "b.md"), "x\n")
        os.umask(0o077)
        write_output(str(tmp_path / "c.md"), "x\n")
        os.chmod(tmp_path / "a.sarif", 0o640)
        os.umask(0o022)
        write_output(str(tmp_path / "a.sarif"), "{\"v\": 2}\n")
    finally:
        os.umask(old)
    assert (mode(tmp_path / "a.sarif"), mode(tmp_path / "b.md"), mode(tmp_path / "c.md")) == (0o640, 0o664, 0o600)
    assert (tmp_path / "a.sarif").read_text() == "{\"v\": 2}\n"


def test_symbols_of_a_directory_says_it_is_a_directory(make_repo, home, run_cli):
    r = make_repo("dirs")
    r.write("src/a.py", "def f():\n    return 1\n")
    r.commit("c1")
    build_snapshot(r.root, home)
    for args in (["symbols", "src", "--no-service"], ["symbols", str(r.root / "src"), "--no-service"]):
        p = run_cli(*args, cwd=r.root)
        assert p.returncode == 2 and p.stdout == "", p.stderr
        line = p.stderr.strip()
        assert "\n" not in line and "is a directory" in line and "find NAME --path DIR" in line, line
        assert "not in the snapshot" not in line


def test_find_says_when_it_stops_at_the_limit(make_repo, home, run_cli):
    """Before: find printed 50 rows and nothing else when 60 matched."""
    r = make_repo("many")
    r.write("a.py", "".join(f"def handler_{i}():\n    return {i}\n\n\n" for i in range(60)))
    r.commit("c1")
    build_snapshot(r.root, home)
    p = run_cli("find", "handler_", "--repo", str(r.root), "--no-service")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 50
    assert "more symbols match: showing the best 50" in p.stderr and "--limit" in p.stderr
    doc = json.loads(run_cli("find", "handler_", "--repo", str(r.root), "--no-service", "--json").stdout)
    assert (len(doc["symbols"]), doc["truncated"], doc["limit"]) == (50, True, 50)
    doc = json.loads(run_cli("find", "handler_", "--repo", str(r.root), "--no-service", "--json",
                             "--limit", "60").stdout)
    assert (len(doc["symbols"]), doc["truncated"]) == (60, False)
    p = run_cli("find", "handler_", "--repo", str(r.root), "--no-service", "--limit", "60")
    assert p.returncode == 0 and p.stderr == ""


def test_cited_on_a_mistyped_path_suggests_the_close_one(make_repo, home, run_cli):
    """Before: `cited src/retyr.py` only said that no memory cites this code."""
    r = make_repo("typo")
    r.write("src/retry.py", "def f():\n    return 1\n")
    r.commit("c1")
    build_snapshot(r.root, home)
    api.remember(home, "f returns one", repo=r.root, refs=["src/retry.py"], topic="one")
    p = run_cli("cited", "src/retyr.py", "--repo", str(r.root), "--no-service")
    assert p.returncode == 1
    assert "src/retyr.py (src/retyr.py is not in the current code; closest: src/retry.py)" in p.stdout, p.stdout
    doc = json.loads(run_cli("cited", "src/retyr.py#L1-L2", "--repo", str(r.root), "--no-service", "--json").stdout)
    assert "closest: src/retry.py" in doc["refs"][0]["note"]
    found = json.loads(run_cli("cited", "src/retry.py", "--repo", str(r.root), "--no-service", "--json").stdout)
    assert found["refs"][0]["note"] is None and len(found["memories"]) == 1


def test_graph_takes_a_name_find_resolves_uniquely(make_repo, home, run_cli):
    """Before: `graph callers make_str` was refused ("does not name a symbol") though
    `find make_str` named exactly one symbol."""
    r = make_repo("graphname")
    r.write("src/util.py", "def make_str(x):\n    return str(x)\n\n\ndef twice(x):\n    return x * 2\n")
    r.write("src/app.py", "from src.util import make_str\n\n\ndef run():\n    return make_str(1)\n")
    r.write("src/other.py", "def twice(x):\n    return x + x\n")
    r.commit("c1")
    build_snapshot(r.root, home)
    p = run_cli("graph", "callers", "make_str", "--repo", str(r.root), "--json", "--no-service")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["root"]["qualified_name"] == "make_str" and doc["root"]["path"] == "src/util.py"
    assert [n["qualified_name"] for n in doc["nodes"]] == ["run"]
    p = run_cli("graph", "callers", "twice", "--repo", str(r.root), "--no-service")
    assert p.returncode == 2 and p.stdout == ""
    line = p.stderr.strip()
    assert "\n" not in line and "2 symbols are named 'twice': src/other.py::twice, src/util.py::twice" in line, line
    p = run_cli("graph", "callers", "no_such_thing", "--repo", str(r.root), "--no-service")
    assert p.returncode == 2 and "names no symbol" in p.stderr and "find NAME" in p.stderr
    p = run_cli("graph", "callers", "src/util.py", "--repo", str(r.root), "--no-service")
    assert p.returncode == 2 and "does not name a symbol" in p.stderr


def test_report_shows_deleted_code_and_locators_not_hashes(make_repo, home):
    """Issue 22 item 7 (part): deleted code had no diff in the report, and a citation made
    by handle showed the raw hash instead of the code's name."""
    from citegraph.graph import queries
    from citegraph.memory.review import report
    from citegraph.memory.review.report_html import render

    r = make_repo("report")
    r.write("a.py", "def f():\n    return 1\n\n\ndef gone():\n    x = 2\n    return x\n")
    r.commit("c1")
    build_snapshot(r.root, home)
    handle = next(s["handle"] for s in queries.symbols_of_file(r.root / "a.py", home) if s["name"] == "f")
    api.remember(home, "gone returns two", repo=r.root, refs=["a.py::gone"], topic="gone")
    api.remember(home, "f returns one", repo=r.root, refs=[handle], topic="byhandle")
    r.write("a.py", "def f():\n    return 1\n")
    r.commit("c2")
    build_snapshot(r.root, home)
    data = report.build(home, repo_paths=[str(r.root)])
    cites = {m["topic"]: m["citations"][0] for m in data["memories"]}
    assert cites["gone"]["outcome"] == "deleted"
    diff = cites["gone"]["diff"]
    assert diff and [row["tag"] for row in diff] == ["delete"] and diff[0]["old"][0] == "def gone():"
    md = report.to_markdown(data)
    assert md_code("a.py::f") in md and handle not in md  # Markdown code spans: memory/escape.py
    page = render(data)
    assert "<code>a.py::f</code>" in page and f"<code>{handle}</code>" not in page


def test_report_diffs_a_moved_then_changed_span_against_its_own_lines(make_repo, home):
    """Issue 22 item 7: a span that moved and then changed was diffed against whatever
    now sits at its old line numbers (`render_finish` shown against `pct`)."""
    from citegraph.memory.review import report

    pct = "def pct(done, total):\n    return 100 * done // total\n\n\n"
    finish = "def render_finish(bar):\n    bar.finish()\n    return bar.text\n"
    r = make_repo("moved")
    r.write("bar.py", pct + finish)
    r.commit("c1")
    build_snapshot(r.root, home)
    api.remember(home, "render_finish returns the text", repo=r.root, refs=["bar.py#L5-L7"], topic="span")
    r.write("bar.py", "import os\n\n\n" + pct.replace("bar", "x") + pct.replace("pct", "pct2")
            + finish.replace("bar.text", "bar.label"))
    r.commit("c2")
    build_snapshot(r.root, home)
    data = report.build(home, repo_paths=[str(r.root)])
    c = data["memories"][0]["citations"][0]
    assert c["outcome"] == "changed", c
    new_side = [ln for row in c["diff"] for ln in row["new"]]
    old_side = [ln for row in c["diff"] for ln in row["old"]]
    assert old_side == ["def render_finish(bar):", "    bar.finish()", "    return bar.text"]
    assert new_side == ["def render_finish(bar):", "    bar.finish()", "    return bar.label"], c["diff"]
    assert report.follow_span(b"a\nb\nc\n", b"x\ny\nz\n", 2, 3) == (2, 3)  # nothing survived: same numbers
