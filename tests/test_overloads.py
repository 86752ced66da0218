"""Overloads and names (SPEC §18): a symbol ref may name one of several same-name
definitions by its ordinal (``path::Name[N]``); where the others are typing overload stubs
(Python ``@overload`` / ``@typing.overload``, TypeScript overload signatures) the
implementation is the default; every output shows a symbol citation by path and qualified
name, never only its hash."""

from __future__ import annotations

import json

import pytest

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.indexer.errors import CitegraphError
from citegraph.indexer.extract import extract
from citegraph.indexer.overloads import overload_stubs
from citegraph.memory import api
from citegraph.validator.refs import parse_ref

CORE_PY = '''\
import typing
from typing import overload


class Context:
    @overload
    def invoke(self, callback: "Command", **kwargs) -> None: ...

    @typing.overload
    def invoke(self, callback: "Callable", *args, **kwargs) -> int: ...

    def invoke(self, callback, *args, **kwargs):
        return callback(*args, **kwargs)

    @property
    def name(self):
        return self._name

    @name.setter
    def name(self, value):
        self._name = value
'''

ALIASED_PY = '''\
import typing as t


@t.overload
def f(x: int) -> int: ...


def f(x):
    return x
'''

# The shape of pallets/click's src/click/core.py at 6987b4cdffcd995b991b7267344e938510bf7d33
# (issue 22): ``import typing as t`` and ``@t.overload`` over ``Context.invoke``, positional-only
# parameters; written for this test, not copied.
CLICK_SHAPE_PY = '''\
from __future__ import annotations

import collections.abc as cabc
import typing as t

V = t.TypeVar("V")


class Command:
    pass


class Context:
    @t.overload
    def invoke(
        self, callback: t.Callable[..., V], /, *args: t.Any, **kwargs: t.Any
    ) -> V: ...

    @t.overload
    def invoke(self, callback: Command, /, *args: t.Any, **kwargs: t.Any) -> t.Any: ...

    def invoke(
        self, callback: Command | t.Callable[..., V], /, *args: t.Any, **kwargs: t.Any
    ) -> t.Any | V:
        return callback(*args, **kwargs)
'''

# Other aliases of typing.overload, and a look-alike that is not one.
MORE_ALIASES_PY = '''\
from typing import TYPE_CHECKING
from typing import overload as ov

if TYPE_CHECKING:
    import typing_extensions as te


@ov
def g(x: int) -> int: ...


def g(x):
    return x


@te.overload
def h(x: int) -> int: ...


def h(x):
    return x
'''

UNRELATED_PY = '''\
import functools as t


@t.overload
def f(x: int) -> int: ...


def f(x):
    return x
'''

OVERLOADS_TS = '''\
export function parse(input: string): number;
export function parse(input: number): number;
export function parse(input: any): number {
  return Number(input);
}

class Shape {
  area(scale: number): number;
  area(): number;
  area(scale?: number): number {
    return (scale ?? 1) * 2;
  }
}

interface Reader {
  read(n: number): string;
  read(): string;
}
'''


def stubs_of(language: str, source: str, qname: str) -> list[bool]:
    data = source.encode()
    syms = [s for s in extract(language, data).symbols if s.qualified_name == qname]
    return overload_stubs(language, data, [(s.start_byte, s.end_byte) for s in syms])


def test_stub_recognition_per_language():
    assert stubs_of("python", CORE_PY, "Context.invoke") == [True, True, False]
    assert stubs_of("python", CORE_PY, "Context.name") == [False, False]  # a property: no stubs
    assert stubs_of("python", ALIASED_PY, "f") == [True, False]  # @t.overload after import typing as t
    assert stubs_of("python", CLICK_SHAPE_PY, "Context.invoke") == [True, True, False]
    assert stubs_of("python", MORE_ALIASES_PY, "g") == [True, False]  # from typing import overload as ov
    assert stubs_of("python", MORE_ALIASES_PY, "h") == [True, False]  # typing_extensions as te
    assert stubs_of("python", UNRELATED_PY, "f") == [False, False]  # t is functools here
    assert stubs_of("typescript", OVERLOADS_TS, "parse") == [True, True, False]
    assert stubs_of("typescript", OVERLOADS_TS, "Shape.area") == [True, True, False]
    assert stubs_of("typescript", OVERLOADS_TS, "Reader.read") == [False, False]  # interface members
    assert stubs_of("tsx", OVERLOADS_TS, "parse") == [True, True, False]
    assert stubs_of("go", "package p\n\nfunc f() {}\n", "f") == [False]


def test_ordinal_ref_syntax():
    p = parse_ref("src/core.py::Context.invoke[3]")
    assert (p.path, p.qualified_name, p.ordinal) == ("src/core.py", "Context.invoke", 3)
    assert parse_ref("src/core.py::Context.invoke").ordinal is None
    for bad in ("a.py::f[0]", "a.py::[2]", "a.py::f.[1]"):
        with pytest.raises(CitegraphError):
            parse_ref(bad)
    # brackets that are no ordinal stay part of the name (a C++ operator[])
    assert parse_ref("a.cpp::Vec.operator[]").qualified_name == "Vec.operator[]"


@pytest.fixture
def click_like(repo, home):
    repo.write("src/click/core.py", CORE_PY)
    repo.write("src/parse.ts", OVERLOADS_TS)
    repo.write("src/aliased.py", ALIASED_PY)
    repo.write("src/click_t.py", CLICK_SHAPE_PY)
    repo.write("src/unrelated.py", UNRELATED_PY)
    repo.commit("init")
    build_snapshot(repo.root, home)
    return repo


def cite(home, repo, *refs: str, topic: str = "t") -> dict:
    return api.remember(home, "claim", repo=repo.root, refs=list(refs), topic=topic)


def test_the_implementation_is_the_default_where_the_others_are_stubs(click_like, home):
    m = cite(home, click_like, "src/click/core.py::Context.invoke", "src/parse.ts::parse", "src/parse.ts::Shape.area")
    assert [c["locator"] for c in m["citations"]] == [
        "src/click/core.py::Context.invoke[3]", "src/parse.ts::parse[3]", "src/parse.ts::Shape.area[3]"]
    # the same receipts as naming the implementation by its ordinal
    n = cite(home, click_like, "src/click/core.py::Context.invoke[3]", topic="u")
    assert n["citations"][0]["handle"] == m["citations"][0]["handle"]


def test_an_ordinal_names_a_stub_or_a_twin(click_like, home):
    m = cite(home, click_like, "src/click/core.py::Context.invoke[1]", "src/click/core.py::Context.name[2]",
             "src/parse.ts::Reader.read[2]")
    assert [c["locator"] for c in m["citations"]] == [
        "src/click/core.py::Context.invoke[1]", "src/click/core.py::Context.name[2]", "src/parse.ts::Reader.read[2]"]


@pytest.mark.parametrize("ref, count", [("src/click/core.py::Context.name", 2), ("src/parse.ts::Reader.read", 2),
                                        ("src/unrelated.py::f", 2)])
def test_no_default_without_stubs(click_like, home, ref, count):
    with pytest.raises(CitegraphError) as exc:
        cite(home, click_like, ref)
    err = exc.value
    assert f"{count} symbols match" in err.what and f"{ref}[N]" in err.todo
    assert f"{ref.split('::')[1]}[1]" in err.what and f"{ref.split('::')[1]}[2]" in err.what


def test_an_ordinal_out_of_range_lists_the_candidates(click_like, home):
    with pytest.raises(CitegraphError) as exc:
        cite(home, click_like, "src/click/core.py::Context.invoke[4]")
    assert "candidates" in exc.value.what and "Context.invoke[3]" in exc.value.what
    assert exc.value.code == 2


def test_outputs_name_symbols_by_path_and_qualified_name(click_like, home, run_cli):
    handle = cite(home, click_like, "src/click/core.py::Context.invoke")["citations"][0]["handle"]
    mid = cite(home, click_like, handle, topic="by-handle")["id"]  # cited by its hash alone
    root = str(click_like.root)
    loc = "src/click/core.py::Context.invoke[3]"
    texts = [run_cli("validate", "--repo", root, "--memory", mid).stdout,
             run_cli("show", mid).stdout,
             run_cli("brief", "--task", "claim", "--repo", root).stdout,
             run_cli("cited", loc, "--repo", root).stdout,
             run_cli("history", mid).stdout]
    for t in texts:
        assert loc in t, t
    v = json.loads(run_cli("validate", "--repo", root, "--memory", mid, "--format", "json").stdout)
    assert v["memories"][0]["citations"][0]["locator"] == loc
    assert v["memories"][0]["citations"][0]["ref"] == handle  # the ref as captured stays
    listed = json.loads(run_cli("list", "--json").stdout)["memories"]
    assert {c["locator"] for m in listed for c in m["citations"]} == {loc}
    brief = json.loads(run_cli("brief", "--task", "claim", "--repo", root, "--json").stdout)
    assert {c["locator"] for m in brief["memories"] for c in m["citations"]} == {loc}


def test_an_implementation_cited_by_default_validates_across_edits(click_like, home):
    """Ordinals are positions (SPEC §2): a stub added after the implementation leaves it
    exact; one added before it takes its ordinal, so the handle now names that stub —
    changed, as SPEC §6.3 says for a handle whose fragment differs."""
    m = cite(home, click_like, "src/click/core.py::Context.invoke")
    stub = "    @overload\n    def invoke(self, callback: str) -> str: ...\n\n"

    def verdict() -> dict:
        v = api.validate_memories(home, memory_ids=[m["id"]], repo_paths=[str(click_like.root)]).to_json()
        return v["memories"][0]["citations"][0]

    click_like.write("src/click/core.py", CORE_PY.replace("    @property", stub + "    @property"))
    click_like.commit("a stub after the implementation")
    build_snapshot(click_like.root, home)
    assert verdict()["outcome"] == "exact"
    click_like.write("src/click/core.py", CORE_PY.replace("    def invoke(self, callback, *args",
                                                          stub + "    def invoke(self, callback, *args"))
    click_like.commit("a stub before it")
    build_snapshot(click_like.root, home)
    c = verdict()
    assert c["outcome"] == "changed" and c["observed"]["handle"] == m["citations"][0]["handle"]


def test_click_shaped_overloads_default_to_the_implementation(click_like, home):
    """Issue 22 item 5: ``@t.overload`` after ``import typing as t`` is a stub, so
    ``Context.invoke`` names the implementation instead of being refused."""
    m = cite(home, click_like, "src/click_t.py::Context.invoke", "src/aliased.py::f")
    assert [c["locator"] for c in m["citations"]] == ["src/click_t.py::Context.invoke[3]", "src/aliased.py::f[2]"]


def test_find_and_symbols_show_the_citable_form_of_an_overloaded_name(click_like, home, run_cli):
    root = str(click_like.root)
    found = json.loads(run_cli("find", "Context.invoke", "--repo", root, "--json").stdout)["symbols"]
    assert [(s["locator"], s["ordinal"]) for s in found if s["path"] == "src/click_t.py"] == [
        ("src/click_t.py::Context.invoke[1]", 1), ("src/click_t.py::Context.invoke[2]", 2),
        ("src/click_t.py::Context.invoke[3]", 3)]
    text = run_cli("find", "Context.invoke", "--repo", root).stdout
    assert "src/click_t.py::Context.invoke[2]  method" in text
    syms = json.loads(run_cli("symbols", root + "/src/click_t.py", "--json").stdout)["symbols"]
    assert {s["locator"] for s in syms} >= {"src/click_t.py::Context.invoke[1]", "src/click_t.py::Context"}
    assert next(s for s in syms if s["qualified_name"] == "Context")["ordinal"] == 0  # unique: no [N]
    text = run_cli("symbols", root + "/src/click_t.py").stdout
    assert " Context.invoke[3]  cgs_" in text and " Context  cgs_" in text
    # every citable form shown cites that very definition
    for s in found:
        if s["path"] == "src/click_t.py":
            c = cite(home, click_like, s["locator"], topic=f"o{s['ordinal']}")["citations"][0]
            assert (c["locator"], c["handle"]) == (s["locator"], s["handle"])


def test_a_refused_ambiguous_ref_lists_the_citable_forms(click_like, home):
    with pytest.raises(CitegraphError) as exc:
        cite(home, click_like, "src/unrelated.py::f")
    assert "function src/unrelated.py::f[1] L4-5" in exc.value.what
    assert "(src/unrelated.py::f[N]: src/unrelated.py::f[1], src/unrelated.py::f[2])" in exc.value.todo
