"""Mutation run over the validator's decision tables (SPEC §13): ``python -m
citegraph.corpora.mutation [--json] [--corpus all|subset|none] [--independent] [--only TEXT]``.

A small AST flipper makes one mutant at a time of ``validator/decisions.py``: comparisons
(``==``/``!=``, ``<``/``<=``/``>``/``>=``, ``in``/``not in``, ``is``/``is not``), ``and``/``or``,
dropped ``not``, negated ``if`` tests, numeric constants (0→1, 1→0 and 1→2, n→n±1),
returned outcome and reason strings (``"exact"``↔``"changed"``, …), reasons named by the
``Reason`` enum (``Reason.NOT_CURRENT``→``Reason.RACING``, …), ``True``/``False``,
``max``/``min`` and ``any``/``all``. The enum's own values are the JSON contract, pinned by
a unit test, and are not mutated. The real file is never written: each mutant is compiled
from memory (its source is kept in a temporary copy for tracebacks) and swapped into the
loaded ``citegraph.validator.decisions`` module in-process, then restored.

Each mutant faces, in order, until one fails (``--independent``: all of them): (1) the fast
decision unit tests (``tests/test_decisions_unit.py``), (2) the pure property tests of
``tests/test_properties.py``, (2b) the dependency-advisory tests
(``tests/test_dependency_advisories.py``), (3) the labeled corpus, replayed: one real run of the corpus
(git, builder, capture, validation) records every decision call, and each mutant re-decides
every labeled observation from those recorded inputs under the runner's labels and gates.
A mutant that passes all three survives and is listed with its line. See docs/mutation.md.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import dataclasses
import io
import json
import sys
import tempfile
import time
import types
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

OUTCOME_SWAP = {"exact": "changed", "relocated": "exact", "changed": "exact", "deleted": "unknown",
                "unknown": "exact", "stale": "fresh", "fresh": "stale"}
REASON_SWAP = {"not-current": "racing", "out-of-scope": "not-current", "extractor-mismatch": "not-current",
               "racing": "not-current", "limit": "not-current", "repository-ambiguous": "out-of-scope",
               "member-missing": "not-current", "invalid-citation": "limit",
               "snapshot-unreadable": "not-current",
               "ambiguous-relocation": "ambiguous-successor", "ambiguous-successor": "ambiguous-relocation",
               "incomplete-coverage": "ambiguous-relocation", "filter-driver": "incomplete-coverage",
               "no-basis": "source-commit-behind",
               "source-commit-gone": "source-commit-not-ancestor",
               "source-commit-not-ancestor": "source-commit-gone",
               "source-commit-behind": "no-basis", "dirty-worktree": "source-commit-behind"}
REASON_ENUM = "Reason"  # the enum of decisions.py whose members are swapped by value


def _reason_attr_swap() -> dict[str, str]:
    """{member name: member name} following REASON_SWAP by value (``NOT_CURRENT`` → ``RACING``)."""
    from citegraph.validator.decisions import Reason

    values = {r.value: r.name for r in Reason}
    return {values[a]: values[b] for a, b in REASON_SWAP.items() if a in values and b in values}


CMP_SWAP: dict[type, type] = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.LtE, ast.LtE: ast.Lt,
                              ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.In: ast.NotIn, ast.NotIn: ast.In,
                              ast.Is: ast.IsNot, ast.IsNot: ast.Is}
NAME_SWAP = {"max": "min", "min": "max", "any": "all", "all": "any"}
# What a freshness function returns, flipped towards the dangerous side.
FRESH_SWAP = {"fresh": "stale", "stale": "fresh", "unknown": "fresh"}
FRESHNESS_FUNCS = {"freshness", "legacy_freshness"}

CORPUS_SUBSET = (  # --corpus subset: a quick sample touching every decision table and row
    "move_python", "deletion_python", "duplicate_copies_python", "ambiguous_successor_javascript",
    "coverage_partial_delete_python", "coverage_skipped_python", "stale_snapshot_python",
    "collision_fork_go", "extractor_changed_python", "legacy_python", "dirty_overlay_python",
    "duplicate_in_file_go", "rename_python", "body_change_go", "path_reuse_shim_python",
    "racing_validate_python", "collision_worktree_typescript",
    "coverage_regions_python",  # the damage-region refinement of SPEC §6.4 (a grammar gap that remains)
)

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Mutant:
    index: int
    line: int
    col: int
    function: str
    description: str
    killed_by: str | None = None
    detail: str = ""

    @property
    def key(self) -> str:
        """A line-free identity (lines move as the module is edited): function + change."""
        return f"{self.function}: {self.description}"


class _Finder(ast.NodeVisitor):
    """Enumerate mutation points in source order: (node path, description)."""

    def __init__(self) -> None:
        self.points: list[tuple[ast.AST, str, int, str]] = []  # node, what, variant, function
        self.func = "<module>"
        self.returned: set[int] = set()  # ids of constants returned by a freshness function
        self.reason_swap = _reason_attr_swap()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        """Not descended: the one class is the ``Reason`` enum, whose values are the JSON
        contract (pinned by tests/test_decisions_unit.py), not a decision."""

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if (isinstance(node.value, ast.Name) and node.value.id == REASON_ENUM
                and node.attr in self.reason_swap):
            self.add(node, f"{REASON_ENUM}.{node.attr} -> {REASON_ENUM}.{self.reason_swap[node.attr]}")
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        if self.func in FRESHNESS_FUNCS and node.value is not None:
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Constant):
                    self.returned.add(id(sub))
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        prev, self.func = self.func, node.name
        self.generic_visit(node)
        self.func = prev

    def add(self, node: ast.AST, what: str, variant: int = 0) -> None:
        self.points.append((node, what, variant, self.func))

    def visit_Compare(self, node: ast.Compare) -> None:
        for i, op in enumerate(node.ops):
            if type(op) in CMP_SWAP:
                self.add(node, f"{_op(op)} -> {_op(CMP_SWAP[type(op)]())}", i)
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self.add(node, "and -> or" if isinstance(node.op, ast.And) else "or -> and")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self.add(node, "drop not")
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        self.add(node, "negate if")
        self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.add(node, "negate conditional expression")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, bool):
            self.add(node, f"{v} -> {not v}")
        elif isinstance(v, int):
            for i, new in enumerate(_int_variants(v)):
                self.add(node, f"{v} -> {new}", i)
        elif isinstance(v, str) and id(node) in self.returned and v in FRESH_SWAP:
            self.add(node, f"{v!r} -> {FRESH_SWAP[v]!r}", 1)
        elif isinstance(v, str) and v in OUTCOME_SWAP:
            self.add(node, f"{v!r} -> {OUTCOME_SWAP[v]!r}")
        elif isinstance(v, str) and v in REASON_SWAP:
            self.add(node, f"{v!r} -> {REASON_SWAP[v]!r}")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in NAME_SWAP and isinstance(node.ctx, ast.Load):
            self.add(node, f"{node.id} -> {NAME_SWAP[node.id]}")


def _int_variants(v: int) -> list[int]:
    if v == 0:
        return [1]
    if v == 1:
        return [0, 2]
    return [v - 1, v + 1]


def _op(op: ast.cmpop) -> str:
    return {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
            ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}[type(op)]




def enumerate_mutants(source: str) -> list[Mutant]:
    tree = ast.parse(source)
    f = _Finder()
    f.visit(_strip_docstrings(tree))
    return [Mutant(i, getattr(n, "lineno", 0), getattr(n, "col_offset", 0), func, what)
            for i, (n, what, _v, func) in enumerate(f.points)]


def _strip_docstrings(tree: ast.Module) -> ast.Module:
    """Annotations hold no behaviour: keep them out of the mutation points. (Docstrings need
    nothing: no docstring is one of the swapped strings.)"""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node.returns = None
            for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                a.annotation = None
        if isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
    return tree


def mutate(source: str, index: int) -> ast.Module:
    """The module's AST with mutation point ``index`` applied."""
    tree = _strip_docstrings(ast.parse(source))
    f = _Finder()
    f.visit(tree)
    node, what, variant, _func = f.points[index]
    if isinstance(node, ast.Compare):
        node.ops[variant] = CMP_SWAP[type(node.ops[variant])]()
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.UnaryOp):
        _replace(tree, node, node.operand)
    elif isinstance(node, ast.If | ast.IfExp):
        node.test = ast.UnaryOp(ast.Not(), node.test)
    elif isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool):
            node.value = not v
        elif isinstance(v, int):
            node.value = _int_variants(v)[variant]
        elif variant == 1 and v in FRESH_SWAP:
            node.value = FRESH_SWAP[v]
        elif v in OUTCOME_SWAP:
            node.value = OUTCOME_SWAP[v]
        else:
            node.value = REASON_SWAP[v]
    elif isinstance(node, ast.Name):
        node.id = NAME_SWAP[node.id]
    elif isinstance(node, ast.Attribute):
        node.attr = f.reason_swap[node.attr]
    return ast.fix_missing_locations(tree)


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return


@contextlib.contextmanager
def installed(tree: ast.Module, source_path: Path) -> Iterator[None]:
    """Swap the mutant's top-level names into the loaded decisions module; always restore."""
    from citegraph.validator import decisions

    tmp = tempfile.NamedTemporaryFile("w", suffix="_decisions_mutant.py", delete=False)
    with tmp:
        tmp.write(ast.unparse(tree))
    ns: dict = {"__name__": decisions.__name__, "__file__": tmp.name}
    exec(compile(tree, tmp.name, "exec"), ns)
    saved = dict(decisions.__dict__)
    try:
        for name, value in ns.items():
            if not name.startswith("__") and (isinstance(value, types.FunctionType | dict | tuple | str | int)):
                setattr(decisions, name, value)
        yield
    finally:
        for name in list(decisions.__dict__):
            if name not in saved:
                delattr(decisions, name)
        for name, value in saved.items():
            setattr(decisions, name, value)
        Path(tmp.name).unlink(missing_ok=True)


def run_pytest(args: list[str]) -> tuple[bool, str]:
    """Run pytest in-process, quietly; (passed, summary)."""
    import pytest

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = pytest.main(["-q", "-x", "-p", "no:cacheprovider", "--no-header", "-W", "ignore", *args])
    lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
    failed = [ln for ln in lines if ln.startswith("FAILED") or "Error" in ln]
    return code == 0, (failed[0] if failed else (lines[-1] if lines else ""))[:200]


# --- corpus replay ---------------------------------------------------------------------------
#
# Re-running git and the builder for every mutant would take hours. The decision functions
# are pure and their inputs (receipts, facts, evidence) never depend on their outputs
# (except the bound counts, see _redecide), so one real run of the corpus records every
# call, and each mutant is judged by re-deciding every labeled observation from those
# recorded inputs — the whole chain: well_formed, within_bounds → before_anything →
# snapshot_unreadable | extractor_gate → the table → after_run — re-aggregating, and
# applying the same labels and gates as the runner.

TABLES = ("decide_file", "decide_span", "decide_symbol")
BATCH = "decide_symbols_at_handle"  # the vectorised first rows of the symbol table (one call per batch)
RECORDED = ("well_formed", "within_bounds", "before_anything", "snapshot_unreadable", BATCH, "extractor_gate",
            *TABLES, "after_run", "legacy_freshness")


def _record_case(case):  # a top-level function: runs in a worker process
    from citegraph.corpora import runner
    from citegraph.memory.lifecycle.observation_cache import StoreCache
    from citegraph.validator import decisions

    calls: dict[int, list] = {}
    ctx: dict = {"key": None, "pending": None}
    saved = {n: getattr(decisions, n) for n in RECORDED}
    orig_op, orig_vm = runner.CaseRun.op_validate, runner.validate_memories

    def wrap(name, fn):
        def recorded(*a, **k):
            if ctx["key"] is not None:
                calls.setdefault(ctx["key"], []).append((name, a, k))
            return fn(*a, **k)
        return recorded

    def op_validate(self, i, step):
        ctx["pending"] = i
        try:
            return orig_op(self, i, step)
        finally:
            ctx["key"] = ctx["pending"] = None

    def vm(*a, **k):  # only the step's own validation, not the parity re-validation
        if ctx["pending"] is None:
            return orig_vm(*a, **k)
        ctx["key"], ctx["pending"] = ctx["pending"], None
        try:
            return orig_vm(*a, **k)
        finally:
            ctx["key"] = None

    for n, f in saved.items():
        setattr(decisions, n, wrap(n, f))
    runner.CaseRun.op_validate, runner.validate_memories = op_validate, vm
    # Every validation decides afresh (the observation cache would hide which snapshot an
    # observation was decided against; cached answers equal recomputed ones by design).
    orig_load = StoreCache.load
    StoreCache.load = lambda self, ms, wanted: None  # type: ignore[method-assign]
    try:
        result = runner.run_case(case)
    finally:
        for n, f in saved.items():
            setattr(decisions, n, f)
        runner.CaseRun.op_validate, runner.validate_memories = orig_op, orig_vm
        StoreCache.load = orig_load  # type: ignore[method-assign]
    return result, calls


def _by_citation(calls: list) -> dict[str, list]:
    """A step's calls per citation id: a receipt's own calls; ``within_bounds`` (no receipt)
    belongs to the receipt just checked by ``well_formed``; ``after_run`` to each
    observation it was given."""
    out: dict[str, list] = {}
    last = None
    for call in calls:
        name, a, _k = call
        if name == "within_bounds":
            if last is not None:
                out.setdefault(last, []).append(call)
        elif name == "after_run":
            for o in a[0] if a else ():
                out.setdefault(o.citation_id, []).append(call)
        elif name == BATCH:  # one call over columns: split into one single-row call per citation
            receipts, cols = a
            for i, r in enumerate(receipts):
                out.setdefault(r.id, []).append((name, ([r], type(cols)(*([c[i]] for c in cols))), {}))
        elif a and getattr(a[0], "id", None) is not None and hasattr(a[0], "kind"):
            last = a[0].id
            out.setdefault(last, []).append(call)
    return out


def _redecide(dec, calls: list):
    """One citation's observation had the decisions been ``dec``; None when the mutant lets
    through what the original stopped (nothing recorded to continue with: not replayable).
    The bound counts are the recorded ones, exact up to the first citation a mutant decides
    differently."""
    first = {}
    for name, a, k in calls:
        first.setdefault(name, (a, k))
    if "before_anything" not in first:
        return None
    a, k = first["before_anything"]
    k = dict(k)
    if "well_formed" in first:
        wa, wk = first["well_formed"]
        k["well_formed"] = dec.well_formed(*wa, **wk)
    if "within_bounds" in first:
        ba, bk = first["within_bounds"]
        k["within_bounds"] = bool(k["well_formed"]) and dec.within_bounds(*ba, **bk)
    o = dec.before_anything(*a, **k)
    if o is not None:
        return o
    if "snapshot_unreadable" in first:
        a, k = first["snapshot_unreadable"]
        return dec.snapshot_unreadable(*a, **k)
    if BATCH in first:  # the batch path decided it, or left it to the table (None)
        a, k = first[BATCH]
        o = getattr(dec, BATCH)(*a, **k)[0]
    if o is None and "extractor_gate" in first:
        a, k = first["extractor_gate"]
        o = dec.extractor_gate(*a, **k)
    if o is None:
        table = next((n for n in TABLES if n in first), None)
        if table is None:
            return None
        a, k = first[table]
        o = getattr(dec, table)(*a, **k)
    if "after_run" in first:
        _a, k = first["after_run"]
        (o,) = dec.after_run([o], **k)
    return o


@dataclass
class Recording:
    results: list
    calls: dict  # case name -> {step: [(function, args, kwargs)]}


def record_corpus(cases, jobs: int = 2) -> Recording:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    if jobs <= 1:
        pairs = [_record_case(c) for c in cases]
    else:
        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn")) as pool:
            pairs = list(pool.map(_record_case, cases))
    return Recording([p[0] for p in pairs], {r.case: calls for r, calls in pairs})


def replay(rec: Recording, dec) -> list:
    """The corpus results had the decisions been ``dec`` (a module or namespace)."""
    from citegraph.corpora.case import FreshLabel, Label
    from citegraph.corpora.runner import _matches
    from citegraph.validator.model import Observation

    out = []
    for res in rec.results:
        steps = {step: _by_citation(calls) for step, calls in rec.calls.get(res.case, {}).items()}
        new = dataclasses.replace(res, citations=[], memories=[])
        by_step: dict[tuple[int, str], list[Observation]] = {}
        for c in res.citations:
            outcome, reason, observed = c.outcome, c.reason, c.observed
            mine = steps.get(c.step, {}).get(c.citation_id) if c.citation_id else None
            if mine:
                try:
                    o = _redecide(dec, mine)
                except Exception as exc:  # a mutant that crashes on real evidence
                    o, outcome = None, f"crash:{type(exc).__name__}"
                if o is None:
                    outcome, reason, observed = (outcome if outcome.startswith("crash") else "unreplayable"), None, None
                else:
                    outcome, reason = o.outcome, o.reason
                    observed = o.observed.to_dict() if o.observed else None
            nc = dataclasses.replace(c, outcome=outcome, reason=reason, observed=observed)
            nc.correct = _matches(Label.parse(nc.expected), nc)
            new.citations.append(nc)
            by_step.setdefault((c.step, c.memory), []).append(Observation(c.citation_id, outcome, reason))
        for m in res.memories:
            fresh, reason = m.freshness, m.reason
            try:
                if not m.legacy and (m.step, m.memory) in by_step:
                    obs = by_step[(m.step, m.memory)]
                    if all(o.outcome in ("exact", "relocated", "changed", "deleted", "unknown") for o in obs):
                        fresh = dec.freshness([o.outcome for o in obs])
                        reason = dec.memory_reason(obs)
                elif m.legacy:
                    calls = [x for x in rec.calls.get(res.case, {}).get(m.step, []) if x[0] == "legacy_freshness"
                             and x[1] and x[1][0] == m.source_commit]
                    if calls:
                        fresh, reason = dec.legacy_freshness(*calls[0][1], **calls[0][2])
            except Exception as exc:
                fresh = f"crash:{type(exc).__name__}"
            nm = dataclasses.replace(m, freshness=fresh, reason=reason)
            want = FreshLabel.parse(nm.expected)
            nm.correct = fresh == want.freshness and (want.reason is None or want.reason == reason)
            new.memories.append(nm)
        out.append(new)
    return out


def corpus_stage(rec: Recording, dec) -> tuple[bool, str]:
    from citegraph.corpora.report import gates

    bad = [g for g in gates(replay(rec, dec)) if not g.passed]
    if not bad:
        return True, ""
    return False, f"{bad[0].name}: " + (bad[0].detail[0] if bad[0].detail else str(bad[0].value))


def _failures(gate_list) -> dict[str, int]:
    return {g.name: len(g.detail) or 1 for g in gate_list if not g.passed}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m citegraph.corpora.mutation", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--corpus", choices=("all", "subset", "none"), default="all",
                    help="cases recorded for the corpus stage (default all; subset = a quick sample)")
    ap.add_argument("--independent", action="store_true",
                    help="run every stage on every mutant (which stages kill it), not just until the first kill")
    ap.add_argument("--only", help="only mutants whose function or description contains this")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--jobs", type=int, default=2, help="processes recording the corpus (default 2)")
    ap.add_argument("--tests", default=str(ROOT / "tests"), help="the tests directory (default: the checkout's)")
    args = ap.parse_args(argv)

    from citegraph.validator import decisions

    source_path = Path(decisions.__file__)
    source = source_path.read_text(encoding="utf-8")
    mutants = enumerate_mutants(source)
    if args.only:
        mutants = [m for m in mutants if args.only in m.key]
    if args.list:
        for m in mutants:
            print(f"{m.index:4} L{m.line:<4} {m.key}")
        return 0

    tests = Path(args.tests)
    sys.path.insert(0, str(tests))
    stages: list[tuple[str, object]] = []
    if (tests / "test_decisions_unit.py").exists():
        stages.append(("unit", lambda: run_pytest([str(tests / "test_decisions_unit.py")])))
    if (tests / "test_properties.py").exists():
        stages.append(("properties", lambda: run_pytest([str(tests / "test_properties.py"), "-k",
                                                          "aggregation or decision or pure"])))
    if (tests / "test_dependency_advisories.py").exists():  # dependency-changed (SPEC §21)
        stages.append(("advisories", lambda: run_pytest([str(tests / "test_dependency_advisories.py")])))
    for name, stage in stages:
        ok, summary = stage()  # type: ignore[operator]
        if not ok:
            print(f"the unmutated {name} tests fail; fix them first: {summary}", file=sys.stderr)
            return 2
    rec = None
    if args.corpus != "none":
        from citegraph.corpora.case import Selection, load_cases
        from citegraph.corpora.report import gates

        cases = load_cases()
        if args.corpus == "subset":
            cases = Selection([], list(CORPUS_SUBSET))(cases)
        t = time.perf_counter()
        rec = record_corpus(cases, jobs=args.jobs)
        base = _failures(gates(replay(rec, decisions)))
        if not args.json:
            print(f"recorded {len(cases)} corpus cases in {time.perf_counter() - t:.0f} s"
                  + (f"; failing already (ignored unless worse): {base}" if base else ""), flush=True)

        def corpus() -> tuple[bool, str]:
            now = _failures(gates(replay(rec, decisions)))
            worse = {k: v for k, v in now.items() if v > base.get(k, 0)}
            return (not worse), ", ".join(f"{k} ({v})" for k, v in worse.items())

        stages.append(("corpus", corpus))

    t0 = time.perf_counter()
    kills: dict[int, list[str]] = {}
    for m in mutants:
        tree = mutate(source, m.index)
        kills[m.index] = []
        try:
            with installed(copy.deepcopy(tree), source_path):
                for name, stage in stages:
                    passed, detail = stage()  # type: ignore[operator]
                    if not passed:
                        kills[m.index].append(name)
                        if m.killed_by is None:
                            m.killed_by, m.detail = name, detail
                        if not args.independent:
                            break
        except Exception as exc:  # a mutant that cannot even load is killed by the import
            m.killed_by, m.detail = "load", f"{type(exc).__name__}: {exc}"
            kills[m.index].append("load")
        if not args.json:
            print(f"{m.index:4} L{m.line:<4} {m.key:<72} {','.join(kills[m.index]) or 'SURVIVED'}", flush=True)
    killed = sum(1 for m in mutants if m.killed_by)
    survivors = [m for m in mutants if not m.killed_by]
    names = ["load"] + [n for n, _ in stages]
    report = {"module": str(source_path), "total": len(mutants), "killed": killed,
              "survived": len(survivors), "seconds": round(time.perf_counter() - t0, 1),
              "first_kill_by_stage": {n: sum(1 for m in mutants if m.killed_by == n) for n in names},
              "survivors": [asdict(m) for m in survivors]}
    if args.independent:
        report["killed_by_stage_alone"] = {n: sum(1 for k in kills.values() if n in k) for n in names}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"\nkilled {killed}/{len(mutants)}; first kill by stage {report['first_kill_by_stage']}"
              + (f"; each stage alone {report['killed_by_stage_alone']}" if args.independent else "")
              + f"; {report['seconds']} s")
        for m in survivors:
            print(f"  survivor L{m.line}: {m.key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
