"""Batch validation's vectorised path (SPEC §6.6): the rows whose handle exists are decided
by ``decisions.decide_symbols_at_handle`` over columns from one SQL pass; it must give
exactly what the scalar table ``decide_symbol`` gives for those rows, and leave every other
row to it. Checked on random inputs (hypothesis), on pinned rows, and end to end against a
real snapshot (the pipeline with the batch path vs the per-citation path)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from validation_helpers import index

from citegraph.validator import decisions as d
from citegraph.validator import pipeline
from citegraph.validator.capture import capture
from citegraph.validator.model import (
    AtHandleColumns,
    Observation,
    Observed,
    Receipt,
    SymbolEvidence,
    SymbolRow,
)

HANDLES = [f"cgs_{i:032x}" for i in range(4)]
FRAGMENTS = ["f0", "f1", "f2"]


def symbol_receipt(i: int, handle: str, fragment: str | None) -> Receipt:
    return Receipt(id=f"cgc_{i:032x}", ref=f"a.py::f{i}", kind="symbol", repository_id="r" * 32,
                   repository_kind="local", snapshot_id="cgsnap_x", commit="a" * 40, dirty=False,
                   extractor_version="cgx-1", path="a.py", blob_id="b" * 40, handle=handle,
                   language="python", symbol_kind="function", name=f"f{i}", qualified_name=f"f{i}", ordinal=0,
                   start_line=1, end_line=2, fragment_hash=fragment, body_hash="body")


row = st.one_of(st.none(), st.tuples(st.sampled_from(FRAGMENTS), st.sampled_from(["a.py", "b/c.py"]),
                                     st.integers(1, 500), st.integers(0, 40)))
case = st.tuples(st.sampled_from(HANDLES), st.one_of(st.none(), st.sampled_from(FRAGMENTS)), row)


@given(st.lists(case, max_size=40))
def test_vectorised_equals_the_scalar_table_on_random_rows(cases):
    receipts, cols = [], AtHandleColumns([], [], [], [])
    for i, (handle, cited_fragment, at) in enumerate(cases):
        receipts.append(symbol_receipt(i, handle, cited_fragment))
        frag, path, start, extra = at if at is not None else (None, None, None, 0)
        cols.fragment_hash.append(frag)
        cols.path.append(path)
        cols.start_line.append(start)
        cols.end_line.append(None if start is None else start + extra)
    got = d.decide_symbols_at_handle(receipts, cols)
    assert len(got) == len(receipts)
    for r, o, frag, path, start, end in zip(receipts, got, *cols, strict=True):
        if frag is None:
            assert o is None  # left for the table with the relocation/successor/coverage evidence
            continue
        at = SymbolRow(r.handle, path, "python", "function", r.qualified_name, start, end, frag, "body")
        assert o == d.decide_symbol(r, SymbolEvidence(at_handle=at))


def test_pinned_rows():
    rs = [symbol_receipt(0, HANDLES[0], "f0"), symbol_receipt(1, HANDLES[1], "f0"),
          symbol_receipt(2, HANDLES[2], "f0"), symbol_receipt(3, HANDLES[3], None)]
    cols = AtHandleColumns(["f0", "f1", None, "f2"], ["a.py", "x.py", None, "a.py"], [3, 7, None, 1], [5, 9, None, 2])
    assert d.decide_symbols_at_handle(rs, cols) == [
        Observation(rs[0].id, "exact", None, Observed("a.py", 3, 5, HANDLES[0])),
        Observation(rs[1].id, "changed", None, Observed("x.py", 7, 9, HANDLES[1])),
        None,
        Observation(rs[3].id, "changed", None, Observed("a.py", 1, 2, HANDLES[3])),
    ]
    assert d.decide_symbols_at_handle([], AtHandleColumns([], [], [], [])) == []


SRC = "def keep(x):\n    return x\n\n\ndef edit(y):\n    return y\n\n\ndef gone(z):\n    return z\n"


def test_batch_path_equals_the_per_citation_path_on_a_real_snapshot(repo, home, monkeypatch):
    """exact, changed, moved lines, deleted, relocated: the same observations with the batch
    path as with every row through ``decide`` (the batch path switched off)."""
    repo.write("m.py", SRC)
    repo.write("n.py", "def moved(a):\n    return a\n")
    repo.write("notes.txt", "hello\n")
    repo.commit("c1")
    index(repo, home)
    receipts = capture(home, repo.root, ["m.py::keep", "m.py::edit", "m.py::gone", "n.py::moved", "notes.txt",
                                         "m.py#L1-L2"])
    repo.write("m.py", "import os\n\n\n" + SRC.replace("return y", "return -y").replace(
        "def gone(z):\n    return z\n", ""))
    repo.mv("n.py", "o.py")
    repo.commit("c2")
    index(repo, home)
    items = [pipeline.MemoryInput("m1", receipts[:3]), pipeline.MemoryInput("m2", receipts[3:])]

    batched = pipeline.validate(home, items, pipeline.resolve_scope(home, [str(repo.root)]))
    calls = []
    real = d.decide_symbols_at_handle
    monkeypatch.setattr(d, "decide_symbols_at_handle", lambda rs, at: calls.append(len(rs)) or real(rs, at))
    again = pipeline.validate(home, items, pipeline.resolve_scope(home, [str(repo.root)]))
    assert calls == [4]  # one vectorised call for the four symbol citations
    monkeypatch.setattr(d, "decide_symbols_at_handle", lambda rs, at: [None] * len(rs))
    scalar = pipeline.validate(home, items, pipeline.resolve_scope(home, [str(repo.root)]))
    assert batched.to_json() == again.to_json() == scalar.to_json()
    outcomes = {c["ref"]: (c["outcome"], c["observed"]["start_line"] if c["observed"] else None)
                for m in batched.to_json()["memories"] for c in m["citations"]}
    assert outcomes == {"m.py::keep": ("exact", 4), "m.py::edit": ("changed", 8), "m.py::gone": ("deleted", None),
                        "n.py::moved": ("relocated", 1), "notes.txt": ("exact", None), "m.py#L1-L2": ("relocated", 4)}


def test_the_cyclic_collector_pause_is_restored_even_when_nested_or_failing():
    import gc

    assert gc.isenabled()
    with pipeline._gc_paused(10**6):
        assert not gc.isenabled()
        try:
            with pipeline._gc_paused(10**6):
                raise RuntimeError("inside")
        except RuntimeError:
            pass
        assert not gc.isenabled()  # the outer validation still runs
    assert gc.isenabled()
    with pipeline._gc_paused(10):  # small inputs leave the collector alone
        assert gc.isenabled()
