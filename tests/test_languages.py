"""Per-language extraction fixtures: every language's tags query against a small sample.

Each ``tests/fixtures/languages/<language>/`` holds ``sample.<ext>`` and ``sample.expected``
with one line per extracted symbol, sorted by (start line, qualified name)::

    <start_line>-<end_line> <kind> <qualified_name>[ #<ordinal>]

(the ordinal suffix only when it is > 0). The expected files were reviewed by hand against
the sources; see docs/languages.md for the naming rules and known gaps.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from citegraph.indexer.extract import FileFacts, SymbolFact, compiled_query, extract
from citegraph.indexer.languages import LANGUAGES, QUERY_DIR, language_for_path

FIXTURES = Path(__file__).parent / "fixtures" / "languages"
FIXTURE_LANGUAGES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())


def _sample(language: str) -> Path:
    sources = [
        p for p in (FIXTURES / language).iterdir() if p.stem == "sample" and p.suffix != ".expected"
    ]
    assert len(sources) == 1, f"{language}: expected exactly one sample.<ext>, found {sources}"
    return sources[0]


def _format(symbol: SymbolFact) -> str:
    line = f"{symbol.start_line}-{symbol.end_line} {symbol.kind} {symbol.qualified_name}"
    return f"{line} #{symbol.ordinal}" if symbol.ordinal > 0 else line


def _formatted(facts: FileFacts) -> list[str]:
    ordered = sorted(facts.symbols, key=lambda s: (s.start_line, s.qualified_name))
    return [_format(s) for s in ordered]


def _extract_fixture(language: str) -> FileFacts:
    return extract(language, _sample(language).read_bytes())


# --- registry coverage ------------------------------------------------------------------------


def test_every_language_has_a_fixture() -> None:
    assert sorted(LANGUAGES) == FIXTURE_LANGUAGES


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_every_language_has_a_query_file(language: str) -> None:
    assert (QUERY_DIR / f"{language}.scm").is_file()


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_query_compiles(language: str) -> None:
    query = compiled_query(language)
    assert query.pattern_count > 0
    names = {query.capture_name(i) for i in range(query.capture_count)}
    assert "name" in names
    assert any(n.startswith("definition.") for n in names)
    assert "reference.call" in names


# --- fixtures -----------------------------------------------------------------------------------


@pytest.mark.parametrize("language", FIXTURE_LANGUAGES)
def test_fixture_is_well_formed(language: str) -> None:
    sample = _sample(language)
    assert language_for_path(sample.name) == language
    assert 15 <= len(sample.read_text(encoding="utf-8").splitlines()) <= 60
    assert (FIXTURES / language / "sample.expected").is_file()


@pytest.mark.parametrize("language", FIXTURE_LANGUAGES)
def test_fixture_symbols_match_expected(language: str) -> None:
    facts = _extract_fixture(language)
    assert facts.status == "indexed", facts.reason
    expected = (FIXTURES / language / "sample.expected").read_text(encoding="utf-8").splitlines()
    assert _formatted(facts) == expected


@pytest.mark.parametrize("language", FIXTURE_LANGUAGES)
def test_fixture_has_call_edges(language: str) -> None:
    facts = _extract_fixture(language)
    calls = [e for e in facts.edges if e.kind == "calls"]
    assert calls, f"{language}: no calls edge extracted"
    assert all(-1 <= e.source < len(facts.symbols) for e in facts.edges)


# --- syntax errors --------------------------------------------------------------------------------

BROKEN = {
    "python": (
        b"import os\n"
        b"\n"
        b"def ok():\n"
        b"    return os.getcwd()\n"
        b"\n"
        b"class Fine:\n"
        b"    def m(self):\n"
        b"        return ok()\n"
        b"\n"
        b"def broken(:\n"
        b"    pass\n",
        ["3-4 function ok", "6-8 class Fine", "7-8 method Fine.m"],
    ),
    "go": (
        b"package p\n"
        b"\n"
        b"func Ok() int { return helper() }\n"
        b"\n"
        b"type T struct{}\n"
        b"\n"
        b"func (t *T) M() {}\n"
        b"\n"
        b"func Broken( {\n",
        ["3-3 function Ok", "5-5 struct T", "7-7 method T.M"],
    ),
    "typescript": (
        b"export function ok(): number { return helper(); }\n"
        b"\n"
        b"export class Fine {\n"
        b"  m(): void {}\n"
        b"}\n"
        b"\n"
        b"function broken( {\n",
        ["1-1 function ok", "3-5 class Fine", "4-4 method Fine.m"],
    ),
}


@pytest.mark.parametrize("language", sorted(BROKEN))
def test_syntax_error_is_partial_and_keeps_earlier_symbols(language: str) -> None:
    source, before_error = BROKEN[language]
    facts = extract(language, source)
    assert facts.status == "partial"
    formatted = _formatted(facts)
    for line in before_error:
        assert line in formatted
    assert any(e.kind == "calls" for e in facts.edges)


def test_tsx_inherits_every_typescript_pattern_first():
    """`; inherits: typescript` puts TypeScript's whole query before the JSX patterns, so
    the earlier-pattern-wins rule gives TSX exactly TypeScript's definitions."""
    from citegraph.indexer.languages import query_source

    ts, tsx = query_source("typescript"), query_source("tsx")
    assert tsx.startswith(ts)
    assert "jsx_opening_element" in tsx and "jsx_opening_element" not in ts
    src = b"namespace N {\n  export function f(a: number): number;\n  export function f(a: any) { return g(a); }\n}\n"
    assert [(s.kind, s.qualified_name, s.ordinal) for s in extract("tsx", src).symbols] == \
        [(s.kind, s.qualified_name, s.ordinal) for s in extract("typescript", src).symbols]


# --- scopes written out of line or as statements (issue 15) -----------------------------------

SCOPE_FORMS = {
    "cpp: out-of-line member, written namespace": (
        "cpp", b"double render::Circle::area() const { return 1.0; }\n",
        ["1-1 method render.Circle.area"]),
    "cpp: out-of-line member inside its namespace": (
        "cpp", b"namespace render {\ndouble Circle::area() const { return 1.0; }\n}\n",
        ["1-3 namespace render", "2-2 method render.Circle.area"]),
    "cpp: both spellings agree, templates and deeper scopes": (
        "cpp", b"namespace a {\nnamespace b {\nvoid Foo::bar() {}\n}\n}\n"
               b"void a::b::Foo::baz() {}\ntemplate <class T> T* a::Box<T>::get() { return 0; }\n",
        ["1-5 namespace a", "2-4 namespace a.b", "3-3 method a.b.Foo.bar", "6-6 method a.b.Foo.baz",
         "7-7 method a.Box.get"]),
    "csharp: file-scoped namespace": (
        "csharp", b"namespace Shop.Orders;\n\npublic class Order\n{\n    public void Pay() { }\n}\n",
        ["1-1 namespace Shop.Orders", "3-6 class Shop.Orders.Order", "5-5 method Shop.Orders.Order.Pay"]),
    "php: namespace statements, each up to the next": (
        "php", b"<?php\nnamespace App\\Billing;\n\nclass Invoice {\n    public function total() { return 1; }\n}\n"
               b"\nnamespace App\\Audit;\n\nfunction log() {}\n",
        ["2-2 namespace App\\Billing", "4-6 class App\\Billing.Invoice",
         "5-5 method App\\Billing.Invoice.total", "8-8 namespace App\\Audit", "10-10 function App\\Audit.log"]),
    "scala: package clauses chain": (
        "scala", b"package com.example\npackage jobs\n\nobject Runner {\n  def run(): Unit = ()\n}\n",
        ["1-1 namespace com.example", "2-2 namespace com.example.jobs", "4-6 object com.example.jobs.Runner",
         "5-5 method com.example.jobs.Runner.run"]),
}


@pytest.mark.parametrize("case", sorted(SCOPE_FORMS))
def test_scope_forms_qualify_names(case: str) -> None:
    language, source, expected = SCOPE_FORMS[case]
    facts = extract(language, source)
    assert facts.status == "indexed"
    assert _formatted(facts) == expected
