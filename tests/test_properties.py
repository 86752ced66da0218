"""Property tests (SPEC §13): the outcome of a citation never depends on the order of
citations or memories, on how validation is batched (all at once, one memory at a time,
split groups, concurrently, cached or not), on the order of unrelated commits, or on
whether the snapshot was built incrementally or clean; aggregation never turns changed,
deleted or unknown into fresh; a non-current snapshot never gives an authoritative outcome.

Repositories are real (git CLI) and small; each example builds its repositories once.
Profiles come from conftest.py (ci: 25 examples, derandomized; HYPOTHESIS_PROFILE=slow: 400);
the integration properties run a third (or a fifth) of the profile's examples (each builds
repositories).
"""

from __future__ import annotations

import random
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citegraph.corpora.gitops import Git
from citegraph.corpora.runner import RaceSource, temp_base
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import Home
from citegraph.indexer.extract import extract
from citegraph.indexer.languages import language_for_path
from citegraph.validator import decisions as d
from citegraph.validator.capture import capture
from citegraph.validator.model import (
    OUTCOMES,
    FileEvidence,
    Observation,
    Receipt,
    SpanEvidence,
    SymbolEvidence,
    SymbolRow,
)
from citegraph.validator.pipeline import MemoryInput, resolve_scope, validate

INTEGRATION_EXAMPLES = max(4, settings.default.max_examples // 3)
integration = settings(max_examples=INTEGRATION_EXAMPLES)
# three repositories per example: fewer examples
integration_3 = settings(max_examples=max(3, settings.default.max_examples // 5))

AUTHORITATIVE = {"exact", "relocated", "changed", "deleted"}

# --- pure properties ------------------------------------------------------------------------

outcome_lists = st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=12)


@given(outcome_lists, st.randoms(use_true_random=False))
def test_aggregation_never_freshens_changed_deleted_or_unknown(outcomes, rnd):
    fresh = d.freshness(outcomes)
    status = d.precise_status(outcomes)
    bad = {"changed", "deleted", "unknown"} & set(outcomes)
    if bad:
        assert fresh != "fresh"
        assert status in bad
    if {"changed", "deleted"} & set(outcomes):
        assert fresh == "stale"
    elif "unknown" in outcomes:
        assert fresh == "unknown"
    else:
        assert fresh == "fresh"
    assert status in outcomes
    assert d.SEVERITY[status] == max(d.SEVERITY[o] for o in outcomes)
    shuffled = list(outcomes)
    rnd.shuffle(shuffled)
    assert (d.freshness(shuffled), d.precise_status(shuffled)) == (fresh, status)


@given(outcome_lists, st.sampled_from(OUTCOMES))
def test_aggregation_is_monotone(outcomes, extra):
    """Adding a citation never makes a memory look better."""
    rank = {"fresh": 0, "unknown": 1, "stale": 2}
    assert rank[d.freshness([*outcomes, extra])] >= rank[d.freshness(outcomes)]
    assert d.SEVERITY[d.precise_status([*outcomes, extra])] >= d.SEVERITY[d.precise_status(outcomes)]


@given(st.lists(st.tuples(st.sampled_from(OUTCOMES), st.sampled_from(list(d.Reason))), min_size=1, max_size=8))
def test_memory_reason_aggregation(pairs):
    """A memory is unknown exactly when it names why: the reasons of its unknown
    citations, each once, in a stable order; fresh and stale memories name none."""
    obs = [Observation(f"c{i}", o, r if o == "unknown" else None) for i, (o, r) in enumerate(pairs)]
    reason = d.memory_reason(obs)
    if d.freshness([o.outcome for o in obs]) == "unknown":
        assert reason == ",".join(sorted({o.reason for o in obs if o.outcome == "unknown"}))
    else:
        assert reason is None
    assert d.memory_reason(list(reversed(obs))) == reason


def test_aggregation_of_nothing():
    assert d.precise_status([]) is None
    assert d.freshness([]) == "unknown"


def _receipt(kind: str) -> Receipt:
    base = dict(id=f"cgc_{kind}", ref=kind, kind=kind, repository_id="r" * 32, repository_kind="local",
                snapshot_id="s", commit="c" * 40, dirty=False, extractor_version="x", path="a.py",
                blob_id="b" * 40)
    if kind == "span":
        base.update(start_line=3, end_line=4, span_hash="h", first_line_hash="f")
    if kind == "symbol":
        base.update(handle="cgs_" + "1" * 32, language="python", symbol_kind="function", name="f",
                    qualified_name="f", ordinal=0, fragment_hash="F", body_hash="B")
    return Receipt(**base)


route_facts = st.tuples(st.booleans(), st.booleans(), st.integers(0, 3), st.integers(0, 3), st.integers(0, 3),
                        st.booleans())


def _facts(well_formed, within, members, read, states, current):
    read = min(read, members)  # facts a scope can produce: 1 ≤ states ≤ read when read
    return dict(well_formed=well_formed, within_bounds=within, members=members, read=read,
                states=max(1, min(states, read)) if read else 0, current=current)


@given(st.sampled_from(["file", "span", "symbol"]), route_facts)
def test_before_anything_is_never_authoritative_pure(kind, facts):
    """The rows before the tables only ever answer unknown, and let a citation through only
    when it is well formed, within the bounds, in one readable, exact-current state."""
    f = _facts(*facts)
    obs = d.before_anything(_receipt(kind), **f)
    passed = (f["well_formed"] and f["within_bounds"] and f["members"] >= 1 and f["read"] == f["members"]
              and f["states"] == 1 and f["current"])
    assert (obs is None) == passed
    if obs is not None:
        assert obs.outcome == "unknown" and obs.reason in set(d.Reason) and obs.observed is None


@given(st.sampled_from(["file", "span", "symbol"]), route_facts)
def test_non_current_snapshot_is_never_authoritative_pure(kind, facts):
    obs = d.before_anything(_receipt(kind), **dict(_facts(*facts), current=False))
    assert obs is not None and obs.outcome == "unknown"


@given(st.lists(st.tuples(st.sampled_from(OUTCOMES), st.sampled_from([None, *d.Reason])), max_size=8),
       st.booleans())
def test_racing_re_check_is_never_authoritative_pure(pairs, moved):
    obs = [Observation(f"c{i}", o, r) for i, (o, r) in enumerate(pairs)]
    after = d.after_run(obs, moved=moved)
    assert [o.citation_id for o in after] == [o.citation_id for o in obs]
    if moved:
        assert {(o.outcome, o.reason, o.observed) for o in after} <= {("unknown", "racing", None)}
    else:
        assert after == obs


paths = st.sampled_from(["a.py", "lib/a.py", "lib/b.py", "x/y.py"])
blobs = st.sampled_from(["b" * 40, "c" * 40])


@given(st.one_of(st.none(), blobs), st.lists(paths, max_size=4, unique=True), st.booleans(),
       st.randoms(use_true_random=False))
def test_file_decision_invariants(at, where, complete, rnd):
    r = _receipt("file")
    obs = d.decide_file(r, FileEvidence(at, tuple(where), complete))
    elsewhere = [p for p in where if p != r.path]
    if obs.outcome == "exact":
        assert at == r.blob_id
    if at is not None:
        assert obs.outcome == ("exact" if at == r.blob_id else "changed")  # a copy never rescues it
    if obs.outcome == "relocated":
        assert at is None and elsewhere == [obs.observed.path] and complete
    if obs.outcome == "deleted":
        assert at is None and not elsewhere and complete
    if at is None and len(elsewhere) > 1:
        assert (obs.outcome, obs.reason) == ("unknown", "ambiguous-relocation")
    rnd.shuffle(where)
    assert d.decide_file(r, FileEvidence(at, tuple(where), complete)) == obs


def _row(handle: str, path: str = "b.py") -> SymbolRow:
    return SymbolRow(handle, path, "python", "function", "f", 1, 2, "F", "B")


handles = st.sampled_from(["cgs_" + c * 32 for c in "1234"])  # "1"*32 is the cited handle
rows = st.lists(handles.map(_row), max_size=4)


@given(st.booleans(), st.booleans(), rows, rows, rows, st.booleans(), st.randoms(use_true_random=False))
def test_symbol_decision_invariants(present, same_fragment, frag, qname, body, coverage, rnd):
    r = _receipt("symbol")
    at = SymbolRow(r.handle, r.path, "python", "function", "f", 1, 2, "F" if same_fragment else "G", "B") \
        if present else None
    ev = SymbolEvidence(at, tuple(frag), tuple(qname), tuple(body), coverage)
    obs = d.decide_symbol(r, ev)
    other_frag = {x.handle for x in frag} - {r.handle}
    other_succ = {x.handle for x in qname + body} - {r.handle}
    if present:
        assert obs.outcome == ("exact" if same_fragment else "changed")
    else:
        assert obs.outcome != "exact"
        if obs.outcome in ("relocated", "deleted") or (obs.outcome == "changed"):
            assert coverage  # uniqueness and absence claims need coverage (§6.4)
        if obs.outcome == "relocated":
            assert other_frag == {obs.observed.handle}
        if obs.outcome == "deleted":
            assert not other_frag and not other_succ
        if len(other_frag) > 1:
            assert obs.reason == "ambiguous-relocation"
    shuffled = [list(x) for x in (frag, qname, body)]
    for x in shuffled:
        rnd.shuffle(x)
    assert d.decide_symbol(r, SymbolEvidence(at, *map(tuple, shuffled), coverage)) == obs


@given(st.booleans(), st.booleans(), st.lists(st.integers(1, 40), max_size=3, unique=True),
       st.lists(paths, max_size=3, unique=True), st.lists(st.tuples(paths, st.integers(1, 9)), max_size=3, unique=True),
       st.booleans(), st.booleans(), st.booleans())
def test_span_decision_invariants(exists, same, others, moved, added, known, diff_complete, inv_complete):
    r = _receipt("span")
    others = [o for o in others if o != r.start_line]
    ev = SpanEvidence(at_path_exists=exists, same_lines_match=same and exists, other_occurrences=tuple(others),
                      paths_with_cited_blob=tuple(moved), added_files_with_bytes=tuple(added),
                      capture_commit_known=known, diff_complete=diff_complete, line_count=2,
                      inventory_complete=inv_complete)
    obs = d.decide_span(r, ev)
    if obs.outcome == "exact":
        assert exists and same
    if exists and not same and not others:
        assert obs.outcome == "changed"
    if obs.outcome == "deleted":
        assert not exists and not moved and not added and known and diff_complete
    if obs.outcome == "relocated" and not exists:
        assert len(moved) == 1 or (not moved and len(added) == 1)


# --- integration: real repositories -----------------------------------------------------------

FILES = {
    "src/retry.py": ("import time\n\n\nclass RetryPolicy:\n    def next_delay(self, n):\n        return 2 ** n\n\n"
                     "    def reset(self):\n        self.n = 0\n\n\ndef key(request):\n    return request.id\n"),
    "src/audit.py": "def audit(event):\n    return {'event': event}\n\n\ndef trail(events):\n    return list(events)\n",
    "web/client.js": ("function fetchRetry(url) {\n  return fetch(url);\n}\n\nclass Client {\n  get(u) {\n"
                      "    return fetchRetry(u);\n  }\n}\n"),
}


def pool() -> list[str]:
    """Every file, a few spans and every symbol of the initial files."""
    out = []
    for path, text in FILES.items():
        out.append(path)
        n = text.count("\n")
        out += [f"{path}#L{a}-L{min(n, a + 1)}" for a in range(1, n, 3)]
        out += [f"{path}::{s.qualified_name}" for s in extract(language_for_path(path), text.encode()).symbols]
    return out


POOL = pool()

ops = st.one_of(
    st.tuples(st.just("edit"), st.sampled_from(sorted(FILES))),
    st.tuples(st.just("append"), st.sampled_from(sorted(FILES))),
    st.tuples(st.just("prepend"), st.sampled_from(sorted(FILES))),
    st.tuples(st.just("move"), st.sampled_from(sorted(FILES))),
    st.tuples(st.just("copy"), st.sampled_from(sorted(FILES))),
    st.tuples(st.just("delete"), st.sampled_from(sorted(FILES))),
)


class World:
    """One small repository and data home for one example."""

    def __init__(self, name: str = "repo") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="citegraph-prop-", dir=temp_base()))
        self.git = Git.init(self.dir / name)
        for p, t in FILES.items():
            self.git.write(p, t.encode())
        self.git.commit("initial")
        self.home = Home.open(self.dir / "home")
        self.moves = 0

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def index(self, home: Home | None = None) -> None:
        build_snapshot(self.git.root, home or self.home, jobs=1)

    def apply(self, op: tuple[str, str]) -> None:
        """Apply one edit to the file that started as ``orig`` (moves are tracked). The
        bytes an edit writes depend on the file and how often it was edited, never on the
        position of the edit in the sequence, so reordering unrelated edits reaches the same
        tree."""
        kind, orig = op
        path = self.where.get(orig)
        if path is None:
            return
        self.count[orig] = self.count.get(orig, 0) + 1
        seq = f"{sorted(FILES).index(orig)}_{self.count[orig]}"
        g = self.git
        if kind == "edit":
            data = g.read(path)
            data = data.replace(b"return", b"return  ", 1)
            g.write(path, data)
        elif kind == "append":
            ext = path.rsplit(".", 1)[1]
            add = f"\n\ndef added_{seq}():\n    return '{seq}'\n" if ext == "py" else \
                f"\nfunction added{seq}() {{\n  return '{seq}';\n}}\n"
            g.write(path, g.read(path) + add.encode())
        elif kind == "prepend":
            g.write(path, f"# note {seq}\n".encode().replace(b"#", b"#" if path.endswith(".py") else b"//") + g.read(path))
        elif kind == "move":
            new = f"moved{seq}/{path.rsplit('/', 1)[1]}"
            (g.root / new).parent.mkdir(parents=True, exist_ok=True)
            g.git("mv", path, new)
            self.where[orig] = new
        elif kind == "copy":
            g.write(f"copies{seq}/{path.rsplit('/', 1)[1]}", g.read(path))
        elif kind == "delete":
            g.delete(path)
            self.where[orig] = None

    def run(self, edits: list[tuple[str, str]], commit_each: bool = True) -> None:
        self.where: dict[str, str | None] = {p: p for p in FILES}
        self.count: dict[str, int] = {}
        for i, op in enumerate(edits):
            self.apply(op)
            if commit_each:
                self.git.commit(f"op {i}")
        self.git.commit("final")


def observe(home: Home, root: Path, items: list[MemoryInput], cache=None) -> dict[str, tuple]:
    rep = validate(home, items, resolve_scope(home, [str(root)]), cache=cache)
    out = {}
    for v in rep.verdicts:
        for o in v.observations:
            key = o.citation_id
            val = (o.outcome, o.reason, o.observed.to_dict() if o.observed else None)
            assert out.setdefault(key, val) == val  # one citation, one observation within a batch
    return out


class DictCache:
    def __init__(self) -> None:
        self.data: dict = {}

    def get_many(self, snapshot_id, citation_ids):
        return {c: self.data[(snapshot_id, c)] for c in citation_ids if (snapshot_id, c) in self.data}

    def put_many(self, snapshot_id, observations):
        for o in observations:
            self.data[(snapshot_id, o.citation_id)] = o


memories = st.lists(st.lists(st.sampled_from(POOL), min_size=1, max_size=5, unique=True), min_size=1, max_size=4)


@integration
@given(memories, st.lists(ops, min_size=1, max_size=5), st.randoms(use_true_random=False))
def test_outcomes_do_not_depend_on_order_batching_cache_or_build(mems, edits, rnd):
    w = World()
    try:
        w.index()
        items = [MemoryInput(f"m{i}", capture(w.home, w.git.root, refs)) for i, refs in enumerate(mems)]
        w.run(edits)
        w.index()

        whole = observe(w.home, w.git.root, items)
        assert set(whole) == {r.id for it in items for r in it.receipts}

        # memory order and citation order
        permuted = [MemoryInput(it.memory_id, rnd.sample(it.receipts, len(it.receipts))) for it in items]
        rnd.shuffle(permuted)
        assert observe(w.home, w.git.root, permuted) == whole

        # one memory at a time, and split groups validated concurrently
        one_by_one: dict = {}
        for it in items:
            one_by_one.update(observe(w.home, w.git.root, [it]))
        assert one_by_one == whole
        cut = rnd.randint(0, len(items))
        groups = [items[:cut], items[cut:]]
        with ThreadPoolExecutor(2) as ex:
            parts = list(ex.map(lambda g: observe(w.home, w.git.root, g), groups))
        assert {k: v for p in parts for k, v in p.items()} == whole

        # a persistent cache gives the same answers as recomputation
        cache = DictCache()
        assert observe(w.home, w.git.root, items, cache) == whole
        assert observe(w.home, w.git.root, items, cache) == whole

        # the same state built clean in a fresh home validates the same
        clean = Home.open(w.dir / "clean-home")
        w.index(clean)
        assert observe(clean, w.git.root, items) == whole

        # and after one more change without indexing nothing is authoritative
        w.git.write("untracked.txt", b"wip\n")
        stale = observe(w.home, w.git.root, items)
        assert {v[:2] for v in stale.values()} == {("unknown", "not-current")}
    finally:
        w.close()


@integration_3
@given(memories, st.lists(ops, min_size=2, max_size=4), st.randoms(use_true_random=False))
def test_outcomes_do_not_depend_on_the_order_of_unrelated_commits(mems, edits, rnd):
    """Unrelated changes (each to a different file) committed in two orders, or squashed
    into one commit, lead to the same outcome for every citation."""
    seen: set[str] = set()
    unrelated = []
    for op in edits:
        if op[1] not in seen and op[0] != "copy":
            seen.add(op[1])
            unrelated.append(op)
    orders = [unrelated, list(reversed(unrelated))]
    results = []
    for order, commit_each in ((orders[0], True), (orders[1], True), (orders[0], False)):
        w = World()
        try:
            w.index()
            items = [MemoryInput(f"m{i}", capture(w.home, w.git.root, refs)) for i, refs in enumerate(mems)]
            w.run(order, commit_each=commit_each)
            w.index()
            got = observe(w.home, w.git.root, items)
            by_ref = {(it.memory_id, r.ref): got[r.id] for it in items for r in it.receipts}
            results.append(by_ref)
        finally:
            w.close()
    assert results[0] == results[1] == results[2]


def test_racing_state_is_never_authoritative(tmp_path):
    """A change between reading the snapshot and the re-check makes every observation of
    that repository unknown/racing, whatever the change."""
    w = World()
    try:
        w.index()
        items = [MemoryInput("m", capture(w.home, w.git.root, POOL[:8]))]
        for change in (lambda: w.git.write("x.txt", b"x"), lambda: w.git.commit("c")):
            rep = validate(w.home, items, resolve_scope(w.home, [str(w.git.root)], source=RaceSource(change)))
            assert {(o.outcome, o.reason) for v in rep.verdicts for o in v.observations} == {("unknown", "racing")}
            w.index()
    finally:
        w.close()


@pytest.mark.parametrize("seed", range(3))
def test_out_of_scope_citations_are_unknown(seed):
    a, b = World("a"), World("b")
    try:
        a.index()
        b.index()
        refs = random.Random(seed).sample(POOL, 5)
        items = [MemoryInput("m", capture(a.home, a.git.root, refs))]
        rep = validate(b.home, items, resolve_scope(b.home, [str(b.git.root)]))
        assert {(o.outcome, o.reason) for o in rep.verdicts[0].observations} == {("unknown", "out-of-scope")}
    finally:
        a.close()
        b.close()
