"""Cosmetic change (SPEC §6.3a, issue 23): the token hash, and every output that says
"comments/formatting only" — validate (text and JSON), cited, check (SARIF note), brief,
report — and ``refresh --accept cosmetic``."""

from __future__ import annotations

import json

import pytest
from validation_helpers import cite, index

from citegraph import schemas
from citegraph.indexer.tokens import token_hash
from citegraph.memory import api
from citegraph.memory.review import check as chk
from citegraph.memory.review import check_formats, report, report_html

CODE = '''def scale(x, factor):
    total = x * factor
    return total


def label(n):
    return "n=%d" % n
'''
COMMENTED = CODE.replace("    total = x * factor\n", "    # scaled\n    total = x*factor  # product\n")


def h(language: str | None, src: bytes) -> str | None:
    return token_hash(language, src, 0, len(src))


# --- the token hash ----------------------------------------------------------------------------


def test_comments_and_layout_keep_the_hash_code_does_not():
    assert h("python", CODE.encode()) == h("python", COMMENTED.encode()) is not None
    assert h("python", CODE.encode()) != h("python", CODE.replace("n=%d", "n= %d").encode())  # in a string
    assert h("python", CODE.encode()) != h("python", CODE.replace("x * factor", "x * factor2").encode())


def test_not_token_exact_is_none():
    assert h("yaml", b"a:\n  b: 1\n") is None  # no grammar in the registry
    assert h("c", b"int f(void) { return 1; }\n") is None  # preprocessor lines end at a newline
    assert h(None, b"x") is None
    assert h("python", b"def f(:\n    return 1\n") is None  # an ERROR node
    assert h("tsx", b"const a = <a> <b/></a>;\n") is None  # JSX text renders spaces
    assert token_hash("python", b"x = 1\n", 3, 99) is None  # beyond the bytes


def test_a_variance_annotation_change_is_never_cosmetic():
    """The TypeScript repair blanks `in`/`out` for extraction (docs/languages.md); the token
    hash must not see the blanked text, or `<in T>` -> `<out T>` would hash equal."""
    a = b"interface Box<in T> {\n  f(x: T): void;\n}\n"
    b = b"interface Box<out T> {\n  f(x: T): void;\n}\n"
    assert token_hash("typescript", a, 0, len(a)) is None
    assert token_hash("typescript", b, 0, len(b)) is None


def test_a_fragment_is_judged_in_its_file_with_its_context():
    src = b"class A:\n    def f(self):\n        return 1\n"
    moved = b"class A:\n    pass\n\n\ndef f(self):\n    return 1\n"
    a = src.index(b"def f")
    b = moved.index(b"def f")
    assert token_hash("python", src, a, len(src)) != token_hash("python", moved, b, len(moved))  # other ancestors
    assert token_hash("python", src, a + 2, len(src)) is None  # the edge cuts the token ``def``


def test_meaningful_comments_are_code():
    go = b"package p\n\nfunc f() int {\n\treturn 1\n}\n"
    directive = b"package p\n\nfunc f() int {\n\t//go:noinline\n\treturn 1\n}\n"
    plain = b"package p\n\nfunc f() int {\n\t// one\n\treturn 1\n}\n"
    assert h("go", go) == h("go", plain) != h("go", directive)


# --- through validation and every output ---------------------------------------------------------


@pytest.fixture
def world(repo, home):
    repo.write("m.py", CODE)
    repo.commit("c0")
    index(repo, home)
    mid = cite(home, repo, "m.py::scale", "m.py#L2-L3", text="scale multiplies", topic="scale")["id"]
    base = repo.git("rev-parse", "HEAD").strip()
    repo.write("m.py", COMMENTED)
    repo.commit("comments and spaces")
    index(repo, home)
    return repo, home, mid, base


def conforms(schema: str, doc) -> None:
    assert not list(schemas.validator(schema).iter_errors(doc)), schema


def test_validate_says_comments_formatting_only(world, run_cli):
    repo, home, mid, _base = world
    out = json.loads(run_cli("validate", "--memory", mid, "--json", cwd=repo.root).stdout)
    conforms("validate", out)
    (m,) = out["memories"]
    assert m["freshness"] == "stale"  # the bytes changed: the outcome stays changed
    assert [(c["outcome"], c.get("change")) for c in m["citations"]] == [("changed", "cosmetic")] * 2
    span = next(c for c in m["citations"] if c["kind"] == "span")
    assert (span["observed"]["start_line"], span["observed"]["end_line"]) == (2, 4)
    text = run_cli("validate", "--memory", mid, cwd=repo.root)
    assert text.stdout.count("(comments/formatting only)") == 2, text.stdout
    cited = json.loads(run_cli("cited", "m.py::scale", "--json", cwd=repo.root).stdout)
    conforms("cited", cited)
    from citegraph.memory.agent.hooks import pre_edit_context  # the pre-edit hook says it too

    context, _stale = pre_edit_context(cited, "m.py")
    assert context.count("(comments/formatting only)") == 2, context
    assert cited["memories"][0]["citations"][0]["change"] == "cosmetic"
    # a real change afterwards: no detail
    repo.write("m.py", COMMENTED.replace("x*factor", "x*factor*2"))
    repo.commit("real")
    index(repo, home)
    out = api.validate_memories(home, repo_paths=[str(repo.root)]).to_json()
    assert [c.get("change") for c in out["memories"][0]["citations"]] == [None, None]


def test_check_reports_a_note_and_brief_and_report_say_so(world):
    repo, home, mid, base = world
    rep = chk.run_check(home, base=base, repo_path=repo.root)
    (f,) = [f for f in rep.findings if f.citation.kind == "symbol"]
    assert f.rule == "changed" and f.level == "note" and "comments/formatting only" in f.message()
    results = check_formats.to_sarif(rep)["runs"][0]["results"]
    assert {r["level"] for r in results} == {"note"}
    brief = api.brief(home, "scale multiplies", repo=repo.root).to_json()
    conforms("brief", brief)
    conforms("check", rep.to_json())
    assert "comments/formatting only" in json.dumps(brief)
    data = report.build(home, repo_paths=[str(repo.root)])
    assert "comments/formatting only" in report_html.render(data)


def test_refresh_accept_cosmetic_moves_the_citations(world, run_cli):
    repo, home, mid, _base = world
    refused = json.loads(run_cli("refresh", mid, "--json", cwd=repo.root).stdout)
    assert [c["why"] for c in refused["memories"][0]["citations"]] == ["cosmetic-not-accepted"] * 2
    done = json.loads(run_cli("refresh", mid, "--accept", "cosmetic", "--json", cwd=repo.root).stdout)
    conforms("refresh", done)
    assert [c["why"] for c in done["memories"][0]["citations"]] == ["cosmetic"] * 2
    assert done["summary"]["refreshed"] == 2
    out = api.validate_memories(home, repo_paths=[str(repo.root)]).to_json()
    assert out["memories"][0]["freshness"] == "fresh"
    history = json.loads(run_cli("history", mid, "--json", cwd=repo.root).stdout)
    assert len(history["revisions"]) == 2 and history["revisions"][-1]["refresh"]
