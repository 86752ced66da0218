"""Generated hostile refs (SPEC §12.1): any unicode (surrogates included), NUL, control
characters, whitespace, huge numbers, traversal, malformed handles. Capture answers with a
clear error (exit code 2, one line) or a correct result, never another exception, and a
refused write leaves the memory store unchanged."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from validation_helpers import RETRY, cite, index

from citegraph.indexer.errors import CitegraphError
from citegraph.memory.lifecycle.store import MemoryStore
from citegraph.validator.refs import parse_ref

# Every code point, with lone surrogates, NUL and whitespace drawn often (hypothesis's
# text() leaves surrogates out of a mixed alphabet, so strings are joined from characters).
ANY_CHAR = st.one_of(st.characters(codec=None), st.characters(categories=["Cs"]),
                     st.sampled_from("\0\n\t \u00e9#:L."))


def any_text(min_size: int = 0, max_size: int = 40) -> st.SearchStrategy[str]:
    return st.lists(ANY_CHAR, min_size=min_size, max_size=max_size).map("".join)


GOOD = ["src/retry.py", "src/retry.py#L4-L6", "src/retry.py::RetryPolicy.next_delay", "src/retry.py::helper"]


@st.composite
def hostile_ref(draw: st.DrawFn) -> str:
    path = draw(st.sampled_from(["src/retry.py", "src/../src/retry.py", "/etc/passwd", "../../../../etc/passwd",
                                 "src/re\0try.py", "src\\retry.py", "src/retry.py\udc80", "", " src/retry.py",
                                 "src/retry.py\n", "C:/x.py", "src//retry.py", "./src/retry.py", "src/caf\\xe9.py"]))
    big = draw(st.one_of(st.integers(-5, 20), st.integers(10**6, 10**40)))
    small = draw(st.integers(-5, 20))
    digits = draw(st.sampled_from(["0123456789", "٠١٢٣٤٥٦٧٨٩", "０１２３４５６７８９"]))
    as_digits = "".join(digits[int(c)] if c.isdigit() else c for c in str(abs(small)))
    return draw(st.one_of(
        any_text(max_size=40),
        st.just(path),
        st.just(f"{path}#L{small}-L{big}"),
        st.just(f"{path}#L{as_digits}"),
        st.just(f"{path}::{draw(any_text(max_size=12))}"),
        st.just("cgs_" + draw(any_text(max_size=34))),
        st.just("cgr_" + draw(any_text(max_size=50))),
        st.sampled_from(GOOD),
    ))


@given(any_text(max_size=200))
def test_parse_ref_never_fails_otherwise(text):
    try:
        p = parse_ref(text)
    except CitegraphError as err:
        assert err.code == 2 and "\n" not in err.line()
        return
    assert p.ref == text  # nothing stripped, nothing rewritten
    assert p.kind in ("file", "span", "symbol")
    if p.kind == "span":
        assert 1 <= p.start_line <= p.end_line <= 10_000_000
        assert p.path is not None and "#L" in text


def _store_rows(home) -> tuple:
    with MemoryStore.open(home) as ms:
        return tuple(ms.con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0]
                     for t in ("memories", "revisions", "citations", "terms"))


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from gitutil import GitRepo

    from citegraph.graph.store import Home

    root = tmp_path_factory.mktemp("hostile-refs")
    repo = GitRepo(root / "repo")
    repo.write("src/retry.py", RETRY)
    repo.commit("c1")
    home = Home.open(root / "home")
    index(repo, home)
    return repo, home


def _attempt(world, refs, **kw):
    repo, home = world
    before = _store_rows(home)
    try:
        out = cite(home, repo, *refs, **kw)
    except CitegraphError as err:
        assert err.code == 2, err.line()
        assert "\n" not in err.line()
        assert _store_rows(home) == before  # nothing stored
        return None
    # A success is a correct result: every stored citation names a real place, as given.
    assert 1 <= len(out["citations"]) <= 8
    for c in out["citations"]:
        assert c["ref"] in refs
        assert c["path"] == "src/retry.py"
    return out


@given(refs=st.lists(hostile_ref(), min_size=1, max_size=10))
def test_capture_of_hostile_refs(world, refs):
    _attempt(world, refs, text="a claim")


@given(refs=st.lists(st.sampled_from(GOOD), min_size=1, max_size=4, unique=True),
       text=any_text(min_size=1, max_size=30),
       author=st.one_of(st.none(), any_text(max_size=10)))
def test_capture_with_hostile_text(world, refs, text, author):
    out = _attempt(world, refs, text=text, author=author)
    if out is not None:
        text.encode("utf-8")  # only valid text is ever stored
