"""A generic call signature starting a line in an object type parses (issue 23, the
Effect-TS gap): TypeScript never reads a `<` after a line break as type arguments, so the
member before it ends there; the pre-parse writes the implied `;` over the last
indentation byte (indexer/preparse.py). Offsets, lines and hashes stay the original bytes';
the `;` is kept only where the re-parse reads it as a member separator."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from citegraph.indexer.extract import blake3_hex, extract, parse, parse_source
from citegraph.indexer.preparse import call_signature_spots, ends_a_type, separate, separated

DUAL = b"""\
export const takeWhile: {
  <A>(predicate: (a: A) => boolean): (self: Iterable<A>) => Array<A>
  <A>(self: Iterable<A>, predicate: (a: A) => boolean): Array<A>
} = dual(2, <A>(self: Iterable<A>, predicate: (a: A) => boolean): Array<A> => {
  return Array.from(self).filter(predicate);
});

export interface Constructor<In> {
  <E, R>(ab: (_: In) => E): Sink<E, In, Exclude<R, Scope>>
  <E, R, B = never>(
    ab: (_: In) => B,
    bc: (_: B) => E
  ): Sink<E, In, R>
  readonly name: string
}

export function after(x: number): number {
  return x + 1;
}
"""


def _facts(symbols):
    return [(s.kind, s.qualified_name, s.start_byte, s.end_byte, s.start_line, s.end_line, s.parent)
            for s in symbols]


def _spots_by_hand(data: bytes) -> list[int]:
    """The byte before each line-initial `<` that follows a line not ending a member list
    opener: found from the text alone for this fixture."""
    out, pos = [], 0
    for line in data.split(b"\n"):
        stripped = line.lstrip(b" ")
        if stripped.startswith(b"<") and len(line) > len(stripped):
            prev = data[:pos].rstrip()
            if not prev.endswith((b"{", b":", b",", b"(")):
                out.append(pos + len(line) - len(stripped) - 1)
        pos += len(line) + 1
    return out


def test_grammar_fails_without_the_repair():
    assert parse("typescript", DUAL, 5.0).root_node.has_error


def test_call_signatures_parse_with_true_offsets_and_original_hashes():
    facts = extract("typescript", DUAL)
    assert facts.status == "indexed" and facts.damage == []
    spots = _spots_by_hand(DUAL)
    assert len(spots) == 2
    twin = separate(DUAL, spots)  # the `;` written by hand: same length, same lines
    assert len(twin) == len(DUAL) and twin.count(b"\n") == DUAL.count(b"\n")
    assert _facts(facts.symbols) == _facts(extract("typescript", twin).symbols)
    names = {s.qualified_name: s for s in facts.symbols}
    assert {"takeWhile", "Constructor", "after"} <= set(names)
    assert (names["Constructor"].start_line, names["Constructor"].end_line) == (8, 15)
    assert (names["after"].start_line, names["after"].end_line) == (17, 19)
    for s in facts.symbols:
        assert s.fragment_hash == blake3_hex(DUAL[s.start_byte:s.end_byte])
        assert b";<" not in DUAL[s.start_byte:s.end_byte]


def test_exactly_the_implied_separators_are_written():
    tree, text = parse_source("typescript", DUAL, 5.0)
    assert not tree.root_node.has_error
    diff = [i for i in range(len(DUAL)) if text[i] != DUAL[i]]
    assert diff == _spots_by_hand(DUAL)
    assert all(text[i:i + 1] == b";" and DUAL[i:i + 1] == b" " for i in diff)


@pytest.mark.parametrize("source", [
    # an expression: a comparison continued on the next line
    b"const x = y\n  < z;\nfunction f() { return a\n    <b }\nlet broken = (;\n",
    # the member's type goes on: a generic function type on the next line
    b"type T = {\n  f:\n    <A>(a: A) => A\n  g: (\n}\n",
    # a union continued
    b"type U = {\n  f: A |\n    <B>(b: B) => B\n} & (\n",
    # a type ends the line, but in an expression (`as`), not in a member list
    b"const a = b as Foo\n  <Bar>c\nlet broken = (;\n",
    # a quoted member name: `"method"` then its type parameters, one generic method
    b'interface I {\n  "method"\n  <T>(x: T): T\n}\nlet broken = (;\n',
])
def test_no_separator_where_typescript_implies_none(source):
    root = parse("typescript", source, 5.0).root_node
    assert root.has_error
    assert call_signature_spots(root, source) == []


def test_tsx_jsx_lines_are_never_separated():
    source = (b"export interface P { f: (a: A) => B\n  <T>(x: T): T }\n"
              b"export function View() {\n  return (\n    <div>\n      <span>{1}</span>\n    </div>\n  );\n}\n")
    tree, text = parse_source("tsx", source, 5.0)
    assert not tree.root_node.has_error
    assert [i for i in range(len(source)) if text[i] != source[i]] == [source.index(b"<T>") - 1]
    assert extract("tsx", source).status == "indexed"


def test_a_member_name_before_its_type_parameters_is_never_split():
    """`method` ⏎ `<T>(x: T): T` is one generic method to TypeScript, not a property and a
    call signature: no `;` after a member's name, in a structured tree or in a context
    the grammar gave up on (then an identifier ends a type only after `:`, `|`, `=>` …)."""
    member = b"interface I {\n  method\n  <T>(x: T): T\n  other(): void\n}\n"
    src = b"export interface Box<out T> { get(): T }\n" + member + b"const broken = (;\n"
    facts = extract("typescript", src)
    assert {s.qualified_name: s.kind for s in facts.symbols}["I.method"] == "method"
    assert call_signature_spots(parse("typescript", src, 5.0).root_node, src) == []
    union = b"export const clamp: {\n  <A>(x: A): (self: A) => A | Min\n  <A>(self: A, x: A): A | Min\n} = 1 as any\n"
    root = parse("typescript", union, 5.0).root_node
    assert call_signature_spots(root, union) == [union.index(b"<A>(self") - 1]


CLAMP = b"""\
export const clamp: {
  <Min extends DateTime, Max extends DateTime>(
    options: { readonly minimum: Min; readonly maximum: Max }
  ): <A extends DateTime>(self: A) => A | Min | Max
  <A extends DateTime, Min extends DateTime, Max extends DateTime>(
    self: A,
    options: { readonly minimum: Min; readonly maximum: Max }
  ): A | Min | Max
} = Internal.clamp
"""


def test_a_context_the_grammar_gave_up_on_is_left_to_the_reparse():
    """Effect-TS DateTime.ts: the grammar makes the whole file one ERROR, the type names
    are bare identifiers; `Max` after `|` ends a type, so the `;` is tried and confirmed."""
    root = parse("typescript", CLAMP, 5.0).root_node
    assert root.type == "ERROR"
    assert call_signature_spots(root, CLAMP) == [CLAMP.index(b"<A extends DateTime, Min") - 1]
    facts = extract("typescript", CLAMP)
    assert facts.status == "indexed"
    assert [(s.kind, s.qualified_name, s.start_line, s.end_line) for s in facts.symbols] == [
        ("constant", "clamp", 1, 9)]


def _stand_in(kind: str, parent=None):
    return SimpleNamespace(type=kind, parent=parent)


def test_in_a_context_of_errors_only_the_tokens_decide():
    """Where only ERROR nodes lie above (the grammar gave up), a leaf ends a type when it is
    one that can (`>`, a type name, a literal …), an identifier only after a token a type
    name follows; a keyword-like member name or an identifier starting a member does not."""
    error = _stand_in("ERROR", _stand_in("ERROR"))
    assert ends_a_type(_stand_in(">", error), _stand_in("type_identifier", error))
    assert ends_a_type(_stand_in("identifier", error), _stand_in("|", error))
    assert not ends_a_type(_stand_in("identifier", error), _stand_in("}", error))
    assert not ends_a_type(_stand_in("identifier", error), None)
    assert not ends_a_type(_stand_in("get", error), _stand_in("}", error))


def test_an_unconfirmed_candidate_does_not_spoil_a_confirmed_one():
    """A `<` after an object type that ends a type alias (TSX: JSX on the next line) is a
    candidate the re-parse refuses; the call signature further on is still repaired (the
    confirmed spots are tried again alone)."""
    src = (b"type P = { a: B }\n  <div/>\n\nexport const lift: {\n  (f: (a: number) => number): (self: number) => number\n"
           b"  <A>(self: A): A\n} = (x: any) => x\n")
    jsx, sig = src.index(b"<div") - 1, src.index(b"<A>(self") - 1
    assert call_signature_spots(parse("tsx", src, 5.0).root_node, src) == [jsx, sig]
    tree, text = parse_source("tsx", src, 5.0)
    assert [i for i in range(len(src)) if text[i] != src[i]] == [sig]
    assert b"<div/>" in text[:jsx + 8]


SINK = b"""\
export declare namespace Sink {
  export interface Constructor<In> {
    <E, R, B = never>(ab: (_: Stream<In>) => Effect<B, E, R>): Sink<B, In, never, E, Exclude<R, Scope>>
    <E, R, B = never, C = never>(
      ab: (_: Stream<In>) => B,
      bc: (_: B) => Effect<C, E, R>
    ): Sink<C, In, never, E, Exclude<R, Scope>>
    <E, R, B = never, C = never, D = never>(
      ab: (_: Stream<In>) => B,
      bc: (_: B) => C,
      cd: (_: C) => Effect<D, E, R>
    ): Sink<D, In, never, E, Exclude<R, Scope>>
  }
}

export const after = 1
"""


def test_a_repair_that_uncovers_the_next_is_followed_by_another_round():
    """Effect-TS Sink.ts: the grammar closes the interface early at the first failure, so
    the second signature's `<` is not even in a member list until the first is repaired."""
    first = SINK.index(b"<E, R, B = never, C = never>(") - 1
    assert call_signature_spots(parse("typescript", SINK, 5.0).root_node, SINK) == [first]
    tree, text = parse_source("typescript", SINK, 5.0)
    assert not tree.root_node.has_error
    assert [i for i in range(len(SINK)) if text[i] != SINK[i]] == [first, SINK.index(b"<E, R, B = never, C = never, D") - 1]
    assert extract("typescript", SINK).status == "indexed"


def test_column_0_has_no_byte_to_write_and_stays_partial():
    source = b"type T = {\n  (a: A): (b: B) => C\n<T>(x: T): T\n}\n\nexport function ok(): number {\n  return 1;\n}\n"
    root = parse("typescript", source, 5.0).root_node
    assert call_signature_spots(root, source) == []
    facts = extract("typescript", source)
    assert facts.status == "partial"
    assert facts.reason.startswith("generic call signature starting a line")


def test_a_separator_the_reparse_does_not_confirm_is_dropped():
    """`separated` keeps a spot only where the re-parse has a member-list `;` with no error
    of that list touching it."""
    source = b"type T = {\n  (a: A): B\n  <T>(x: T): T\n}\n"
    spot = source.index(b"<T>") - 1
    good = parse("typescript", separate(source, [spot]), 5.0).root_node
    assert separated(good, [spot]) == [spot]
    assert separated(good, [spot - 3]) == []  # not a `;` there
    # an error of the list touching the `;` refuses it; one further on does not
    touching = b"type T = {\n  (a: A): B\n  <<T>(x: T): T\n}\n"
    bad = parse("typescript", separate(touching, [spot]), 5.0).root_node
    assert bad.has_error and separated(bad, [spot]) == []
    further = b"type T = {\n  (a: A): B\n  <T>(x: T): T T\n}\n"
    later = parse("typescript", separate(further, [spot]), 5.0).root_node
    assert later.has_error and separated(later, [spot]) == [spot]
    assert separated(good, [source.index(b"{")]) == []  # a member list's own token, not a `;`
    # in an expression statement a `;` (the re-parse has no error) is no member separator
    expr = b"a\n ;<B>c\n"
    tree = parse("typescript", expr, 5.0).root_node
    assert not tree.has_error and separated(tree, [expr.index(b";")]) == []


def test_an_error_elsewhere_no_longer_changes_a_later_declaration():
    """Found on Effect-TS: with a variance error earlier in the file, the grammar read a
    later `const f = <A>(…) => …` as a type assertion (a `constant`) outside every damage
    region; repaired, it is the `function` an error-free file gives."""
    arrow = b"export const refresh = <A, E>(self: R<A, E>): E => run(self)\n"
    src = b"export interface Box<out T> { get(): T }\n\n" + arrow
    raw = str(parse("typescript", src, 5.0).root_node)
    assert "type_assertion" in raw  # the grammar's own misreading
    kinds = {s.qualified_name: s.kind for s in extract("typescript", src).symbols}
    assert kinds["refresh"] == "function" == {s.qualified_name: s.kind for s in extract("typescript", arrow).symbols}["refresh"]
