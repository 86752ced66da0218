"""The labeled corpus (SPEC §13): its cases are well formed and cover the categories, a
small subset passes every gate, and changing any single expected label makes it fail
(acceptance 2) — proven end to end on a sample and for every label of the corpus by the
comparison itself."""

from __future__ import annotations

import dataclasses

import pytest

from citegraph.corpora.case import CATEGORIES, OUTCOMES, Case, CaseError, Label, load_cases
from citegraph.corpora.report import gates
from citegraph.corpora.runner import CitationRecord, _matches, rescore, run_cases

SUBSET = (
    "move_javascript",                  # move
    "body_change_go",                   # body change
    "coverage_partial_delete_python",   # incomplete coverage
    "dirty_overlay_python",             # dirty overlay (incl. a dirty deletion after commit)
    "collision_fork_go",                # cross-repository collision
    "extractor_changed_python",         # extractor-version change
)

ALL = load_cases()
BY_NAME = {c.name: c for c in ALL}


def failing(gate_list) -> list[str]:
    return [g.name for g in gate_list if not g.passed]


def flip_outcome(text: str) -> str:
    """A different expected outcome (reason and location dropped)."""
    lab = Label.parse(text)
    return OUTCOMES[(OUTCOMES.index(lab.outcome) + 1) % len(OUTCOMES)]


def flip_freshness(text: str) -> str:
    head = text.split("/")[0]
    return {"fresh": "stale", "stale": "fresh", "unknown": "fresh"}[head]


# --- the cases themselves ---------------------------------------------------------------


def test_corpus_covers_every_category_language_and_kind():
    assert {c.category for c in ALL} == set(CATEGORIES)
    langs = {c.language for c in ALL}
    assert {"python", "javascript", "typescript", "go", "rust", "java"} <= langs
    cites = {(c.name, mem, ref) for c in ALL for _s, mem, ref, _t in c.labels() if ref is not None}
    assert len(cites) >= 250
    refs = [ref for _c, _m, ref in cites]
    assert any("#L" in r for r in refs)                       # span
    assert any("::" in r and not r.startswith("cg") for r in refs)  # symbol by name
    assert any(r.startswith("cgs:") for r in refs)            # cgs_ handle
    assert any(r.startswith("cgr:") for r in refs)            # cgr_ handle
    assert any("#" not in r and "::" not in r for r in refs)  # file
    outcomes = {Label.parse(t).outcome for c in ALL for _s, _m, ref, t in c.labels() if ref}
    assert outcomes == set(OUTCOMES)
    per_memory: dict[tuple, int] = {}
    for c in ALL:
        for step, mem, ref, _t in c.labels():
            if ref:
                per_memory[(c.name, step, mem)] = per_memory.get((c.name, step, mem), 0) + 1
    assert max(per_memory.values()) >= 4


def test_malformed_cases_are_refused(tmp_path):
    from citegraph.corpora.case import check_case, load_case

    bad = tmp_path / "bad.toml"
    bad.write_text('category = "move"\nlanguage = "python"\n[[steps]]\nop = "validate"\n'
                   '[steps.expect.m]\nfreshness = "fresh"\n[steps.expect.m.citations]\n"a.py" = "moved"\n')
    with pytest.raises(CaseError, match="bad label"):
        load_case(bad)
    with pytest.raises(CaseError, match="unknown category"):
        check_case(Case("x", None, {"category": "nope", "language": "python", "steps": []}))
    with pytest.raises(CaseError, match="unknown keys"):
        check_case(Case("x", None, {"category": "move", "language": "python",
                                    "steps": [{"op": "mv", "src": "a", "dst": "b", "typo": 1}]}))


def test_every_label_in_the_corpus_is_decisive():
    """For every label: an observation equal to it matches, and the same observation judged
    against the label with its outcome flipped does not (so no label is vacuous)."""
    n = 0
    for c in ALL:
        for step, mem, ref, text in c.labels():
            if ref is None:
                continue
            lab = Label.parse(text)
            observed = None
            if lab.path:
                observed = {"path": lab.path, "start_line": lab.start_line, "end_line": lab.end_line}
            rec = CitationRecord(c.name, c.category, c.language, step, mem, ref, "file", text, lab.outcome,
                                 lab.reason, observed, True, True, True, change=lab.change)
            assert _matches(lab, rec), (c.name, ref, text)
            assert not _matches(Label.parse(flip_outcome(text)), rec), (c.name, ref, text)
            if lab.outcome == "changed":  # the change detail is decisive too (SPEC §6.3a)
                other = "changed" if lab.change else "changed cosmetic"
                assert not _matches(Label.parse(other), rec), (c.name, ref, text)
            if lab.reason:
                other = "racing" if lab.reason != "racing" else "not-current"
                assert not _matches(Label(lab.outcome, other), rec)
            n += 1
    assert n >= 250


# --- running a subset ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def subset_run():
    cases = [BY_NAME[n] for n in SUBSET]
    return cases, run_cases(cases, jobs=2)


def test_subset_passes_every_gate(subset_run):
    _cases, results = subset_run
    assert not [r.error for r in results if r.error]
    assert failing(gates(results)) == []
    assert sum(len(r.citations) for r in results) >= 50


def _sample_labels():
    """~12 labels across the subset's categories: for each case its first citation label and
    a freshness label, plus a reason-only and a location-only change."""
    out = []
    for name in SUBSET:
        labels = BY_NAME[name].labels()
        cite = next(lab for lab in labels if lab[2] is not None)
        fresh = next(lab for lab in reversed(labels) if lab[2] is None)
        out.append(pytest.param(name, cite, flip_outcome(cite[3]), id=f"{name}-outcome"))
        out.append(pytest.param(name, fresh, flip_freshness(fresh[3]), id=f"{name}-freshness"))
    reason = next(lab for lab in BY_NAME["collision_fork_go"].labels()
                  if lab[2] and "/out-of-scope" in lab[3])
    out.append(pytest.param("collision_fork_go", reason, "unknown/not-current", id="reason-only"))
    loc = next(lab for lab in BY_NAME["move_javascript"].labels() if lab[2] and "@" in lab[3])
    out.append(pytest.param("move_javascript", loc, "relocated @ lib/elsewhere.js", id="location-only"))
    return out


@pytest.mark.parametrize("name, label, flipped", _sample_labels())
def test_changing_any_single_label_fails_the_run(subset_run, name, label, flipped):
    cases, results = subset_run
    step, mem, ref, text = label
    assert flipped != text
    edited = [c.copy() for c in cases]
    target = next(c for c in edited if c.name == name)
    target.set_label(step, mem, ref, flipped)
    rescored = [rescore(c, r) for c, r in zip(edited, results, strict=True)]
    failed = failing(gates(rescored))
    assert "labels not matched (citation, freshness, capture, refresh)" in failed
    # and the untouched labels still agree: the failure is exactly the flipped one
    gate = next(g for g in gates(rescored) if g.name.startswith("labels not matched"))
    assert gate.value == 1


def test_flipped_label_fails_end_to_end():
    """The same through a real run of the runner (no rescoring shortcut)."""
    case = BY_NAME["move_javascript"].copy()
    step, mem, ref, text = next(lab for lab in case.labels() if lab[2] is not None)
    case.set_label(step, mem, ref, flip_outcome(text))
    results = run_cases([case], jobs=1)
    failed = failing(gates(results))
    assert "labels not matched (citation, freshness, capture, refresh)" in failed
    assert "relocation recall" in failed or "relocation precision" in failed or "false fresh" in failed


def test_a_wrong_refresh_expectation_fails_the_run():
    """A refresh step's expected counts are labels too."""
    case = BY_NAME["refresh_successor_javascript"].copy()
    step = next(s for s in case.data["steps"] if s["op"] == "refresh")
    step["expect"]["refreshed"] = 1  # it refuses the successor: 0 refreshed
    failed = failing(gates(run_cases([case], jobs=1)))
    assert "labels not matched (citation, freshness, capture, refresh)" in failed


def test_safety_gates_do_not_rely_on_labels_alone(subset_run):
    """An authoritative outcome where the runner's own bookkeeping says the repository was
    not exact-current (or out of scope) fails a safety gate even if a label agreed."""
    _cases, results = subset_run
    r = results[0]
    rec = dataclasses.replace(r.citations[0], outcome="exact", reason=None, current=False)
    rec.correct = True
    bad = dataclasses.replace(r, citations=[rec])
    assert "authoritative outcome from a non-current snapshot" in failing(gates([bad]))
    rec2 = dataclasses.replace(r.citations[0], outcome="exact", reason=None, in_scope=False)
    rec2.correct = True
    assert "cross-repository leakage" in failing(gates([dataclasses.replace(r, citations=[rec2])]))


def test_a_wrong_index_or_validate_error_expectation_fails_the_run():
    """An ``expect_error`` of an index or a validate step is a label too (hostile-config)."""
    for op in ("index", "validate"):
        case = BY_NAME["hostile_config_values_python"].copy()
        step = next(s for s in case.data["steps"] if s["op"] == op and "expect_error" in s)
        step["expect_error"] = "words no error line holds"
        failed = failing(gates(run_cases([case], jobs=1)))
        assert "labels not matched (citation, freshness, capture, refresh)" in failed, op
    case = BY_NAME["hostile_config_values_python"].copy()  # the hostile file made valid: the index succeeds
    write = next(s for s in case.data["steps"] if s["op"] == "write" and s["path"] == ".citegraph.toml")
    write["content"] = "[index]\nmax_file_bytes = 4096\n"
    failed = failing(gates(run_cases([case], jobs=1)))
    assert "labels not matched (citation, freshness, capture, refresh)" in failed


def test_false_cosmetic_gate_fails_on_a_cosmetic_not_labeled_so():
    """SPEC §6.3a: "comments/formatting only" said of a citation labeled a real change fails
    the false-cosmetic gate (and the labels gate); the case itself passes every gate."""
    case = BY_NAME["cosmetic_go"]
    (result,) = run_cases([case], jobs=1)
    assert failing(gates([result])) == []
    cosmetic = [lab for lab in case.labels() if lab[2] and lab[3].startswith("changed cosmetic")]
    assert len(cosmetic) == 3
    step, mem, ref, _text = cosmetic[0]
    edited = case.copy()
    edited.set_label(step, mem, ref, "changed")
    failed = failing(gates([rescore(edited, result)]))
    assert "false cosmetic" in failed and "labels not matched (citation, freshness, capture, refresh)" in failed
