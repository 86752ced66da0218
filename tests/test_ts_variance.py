"""TS 4.7 variance annotations parse (issue 23): the byte-preserving pre-parse of
indexer/preparse.py blanks `in`/`out` modifiers of the type-parameter lists the grammar
fails on; offsets, lines and hashes stay those of the original bytes, and nothing but a
modifier in such a list is ever blanked."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from citegraph.indexer.extract import blake3_hex, extract, parse, parse_source
from citegraph.indexer.overloads import overload_stubs
from citegraph.indexer.preparse import blank_variance, repaired

ZOD = b"""\
export interface ZodType<out Output = unknown, in Input = Output> {
  parse(data: unknown): Output;
  _input: Input;
}

export class Cache<in out Key, in out A, out E = never> implements Lookup<Key, A> {
  get(key: Key): A {
    for (const k in this.entries) {
      if (k === String(key)) return this.entries[k];
    }
    throw new Error("missing");
  }
}

export function lift<const in T>(x: T): T {
  return x;
}

export type Fn<in out T> = (x: T) => T;
"""


def _spaced(data: bytes, words: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for s, e in words:
        out[s:e] = b" " * (e - s)
    return bytes(out)


def _modifier_spans(data: bytes) -> list[tuple[int, int]]:
    """Where a test fixture's modifiers are, found independently of the tree: an `in`/`out`
    followed by a space and another word, right after `<`, `,` or `const`."""
    pat = re.compile(rb"(?<=[<,] )(in|out)\b(?= \w)|(?<=[<,])(in|out)\b(?= \w)|(?<=const )(in|out)\b(?= \w)"
                     rb"|(?<=in )out\b(?= \w)")
    return sorted((m.start(), m.end()) for m in pat.finditer(data))


def _facts(symbols):
    return [(s.kind, s.qualified_name, s.start_byte, s.end_byte, s.start_line, s.end_line, s.parent)
            for s in symbols]


def test_grammar_still_fails_without_the_preparse():
    """The gap is real: the bundled grammar leaves ERRORs in these lists (if a grammar
    upgrade parses them, the pre-parse simply never fires and this test says so)."""
    assert parse("typescript", ZOD, 5.0).root_node.has_error
    assert extract("typescript", ZOD, repair=False).status == "partial"  # bench/repair_check.py's view


def test_variance_file_is_indexed_with_true_offsets_and_original_hashes():
    facts = extract("typescript", ZOD)
    assert facts.status == "indexed" and facts.reason is None and facts.damage == []
    # the same file with the modifiers replaced by spaces by hand: same spans and lines
    spaced = _spaced(ZOD, _modifier_spans(ZOD))
    assert spaced != ZOD and len(spaced) == len(ZOD)
    assert _facts(facts.symbols) == _facts(extract("typescript", spaced).symbols)
    names = {s.qualified_name for s in facts.symbols}
    assert {"ZodType", "ZodType.parse", "Cache", "Cache.get", "lift", "Fn"} <= names
    for s in facts.symbols:  # fragments and hashes are the original bytes, modifiers included
        assert s.fragment_hash == blake3_hex(ZOD[s.start_byte:s.end_byte])
    zt = next(s for s in facts.symbols if s.qualified_name == "ZodType")
    assert ZOD[zt.start_byte:zt.end_byte].startswith(b"interface ZodType<out Output = unknown, in Input")
    assert (zt.start_line, zt.end_line) == (1, 4)
    get = next(s for s in facts.symbols if s.qualified_name == "Cache.get")
    assert ZOD[get.start_byte:get.end_byte].startswith(b"get(key: Key): A {") and get.kind == "method"


def test_exactly_the_modifiers_are_blanked():
    root = parse("typescript", ZOD, 5.0).root_node
    blanking = blank_variance("typescript", root, ZOD)
    assert blanking is not None
    assert list(blanking.tokens) == _modifier_spans(ZOD)
    assert [ZOD[s:e] for s, e in blanking.tokens] == [
        b"out", b"in", b"in", b"out", b"in", b"out", b"out", b"in", b"in", b"out"]
    # `for (const k in …)`, `const` itself and every other byte are untouched
    diff = [i for i in range(len(ZOD)) if blanking.text[i] != ZOD[i]]
    assert diff == [i for s, e in blanking.tokens for i in range(s, e)]
    assert b"const k in this.entries" in blanking.text and b"<const    T>" in blanking.text
    assert repaired(parse("typescript", blanking.text, 5.0).root_node, blanking)


@pytest.mark.parametrize(("source", "blanked"), [
    (b"interface A<in out> { x: out }\n", [b"in"]),         # `in` on a parameter named `out`
    (b"interface A<in T, U V> {}\n", [b"in"]),               # `U V` is no modified head: kept
    (b"interface A<T = \"in\", out U> {}\n", [b"out"]),      # a string "in" is not a modifier
    (b"class K<in /* c */ T> { in = 1; out(x: any) { for (const k in x) {} } }\n", [b"in"]),
    (b"type A<X, out U = <in V>(v: V) => V> = 1;\n", [b"out", b"in"]),  # nested list: its own
    (b"interface A<out out T> {}\n", []),                     # a modifier twice: not TypeScript's
    (b"interface A<X in T> {}\n", []),                        # X is no modifier: not a modified head
    (b"interface A<out T = Foo<X, in Y>> {}\n", [b"out"]),    # type arguments hold no parameter heads
])
def test_only_modifier_heads_are_blanked(source, blanked):
    root = parse("typescript", source, 5.0).root_node
    assert root.has_error
    got = blank_variance("typescript", root, source)
    assert [source[s:e] for s, e in (got.tokens if got else ())] == blanked


@pytest.mark.parametrize("source", [
    b"interface A<out> { x: out }\nfunction f(o: object) { for (const in_ in o) {} }\n",
    b"function f(o: object) { for (const k in o) { const out = k; } }\n",
    b"const inOut = { in: 1, out: 2 };\nlet x = 'in' in inOut;\n",
])
def test_error_free_files_are_never_touched(source):
    root = parse("typescript", source, 5.0).root_node
    assert not root.has_error
    assert blank_variance("typescript", root, source) is None
    assert extract("typescript", source).status == "indexed"


def test_an_error_elsewhere_blanks_nothing_outside_type_parameters():
    """A file with a real error and a for-in: no type-parameter list fails, nothing blanked."""
    source = b"function f(o: object) {\n  for (const k in o) { g(k }\n}\nconst out = 1 +;\n"
    root = parse("typescript", source, 5.0).root_node
    assert root.has_error and blank_variance("typescript", root, source) is None


def test_other_languages_are_never_blanked():
    source = b"interface A<out T> {}\n"
    for language in ("javascript", "java", "csharp"):
        root = parse(language, source, 5.0).root_node
        assert blank_variance(language, root, source) is None


def test_a_reparse_that_does_not_repair_keeps_the_honest_answer():
    """`<in T, U V>`: the `in` is blanked but `U V` still fails: the original tree stands,
    the file stays partial and names the variance annotation."""
    source = b"export interface Bad<in T, U V> {\n  x: T;\n}\n\nexport function ok(): number {\n  return 1;\n}\n"
    tree, text = parse_source("typescript", source, 5.0)
    assert text == source and tree.root_node.has_error
    facts = extract("typescript", source)
    assert facts.status == "partial"
    assert facts.reason.startswith("variance annotation (TS 4.7 in/out type parameter)")
    assert {s.qualified_name for s in facts.symbols} >= {"Bad", "ok"}


TSX = b"""\
export interface Props<out T> {
  value: T;
}

export function View<in out T,>(props: Props<T>) {
  const items = [];
  for (const key in props) items.push(key);
  return <div className="in out">{items.length}</div>;
}
"""


def test_tsx_variance_is_parsed():
    assert parse("tsx", TSX, 5.0).root_node.has_error
    facts = extract("tsx", TSX)
    assert facts.status == "indexed"
    assert {s.qualified_name for s in facts.symbols} >= {"Props", "View"}
    root = parse("tsx", TSX, 5.0).root_node
    blanking = blank_variance("tsx", root, TSX)
    assert blanking is not None
    assert [TSX[s:e] for s, e in blanking.tokens] == [b"out", b"in", b"out"]
    assert b'className="in out"' in blanking.text and b"const key in props" in blanking.text
    for s in facts.symbols:
        assert s.fragment_hash == blake3_hex(TSX[s.start_byte:s.end_byte])


def test_overload_signatures_under_variance_annotations():
    """Overload stubs are found on the repaired tree too (the same spans as extract)."""
    src = (b"export interface Box<out T> { get(): T }\n"
           b"export function make<in T>(x: T): Box<T>;\n"
           b"export function make<in T>(x: T, y: T): Box<T>;\n"
           b"export function make(x: any, y?: any): any {\n  return { get: () => x };\n}\n")
    facts = extract("typescript", src)
    assert facts.status == "indexed"
    makes = [s for s in facts.symbols if s.name == "make"]
    assert len(makes) == 3
    assert overload_stubs("typescript", src, [(s.start_byte, s.end_byte) for s in makes]) == [True, True, False]


NAMES = st.sampled_from(["T", "A", "Key", "Output", "out_", "in2", "R"])
MODS = st.sampled_from(["", "in ", "out ", "in out ", "const ", "const in ", "const out "])
DEFAULTS = st.sampled_from(["", " = never", " extends string", " extends Box<X> = Box<X>", " = (x: X) => X"])


@given(st.lists(st.tuples(MODS, NAMES, DEFAULTS), min_size=1, max_size=4, unique_by=lambda p: p[1]),
       st.sampled_from(["interface", "class", "type", "function"]))
def test_random_modifier_lists_parse_as_their_spaced_twin(params, kind):
    """Any list of modified parameters gives the symbols (spans, lines, names) of the same
    text with the modifiers spaced out by hand, and hashes of the original bytes."""
    head = ", ".join(f"{m}{n}{d}" for m, n, d in params)
    body = {"interface": "Box<{}> {{\n  get(): X;\n}}\n", "class": "Box<{}> {{\n  get(): X {{ return 1 as X; }}\n}}\n",
            "type": "Box<{}> = {{ get(): X }};\n", "function": "box<{}>(x: X): X {{\n  return x;\n}}\n"}[kind]
    src = f"interface X {{}}\nexport {kind} {body.format(head)}".encode()
    spaced = src
    for m, n, d in params:
        written = f"{m}{n}{d}".encode()
        keep = m.replace("in ", "   ").replace("out ", "    ").encode() if m != "const " else m.encode()
        spaced = spaced.replace(written, keep + f"{n}{d}".encode(), 1)
    assert len(spaced) == len(src)
    facts = extract("typescript", src)
    twin = extract("typescript", spaced)
    assert twin.status == "indexed"
    assert facts.status == "indexed"
    assert _facts(facts.symbols) == _facts(twin.symbols)
    for s in facts.symbols:
        assert s.fragment_hash == blake3_hex(src[s.start_byte:s.end_byte])
