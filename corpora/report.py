"""Corpus metrics, the SPEC §13 gates, and their rendering (table or JSON)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from citegraph.corpora.case import CATEGORIES, OUTCOMES
from citegraph.corpora.runner import CaseResult, CitationRecord

AUTHORITATIVE = ("exact", "relocated", "changed", "deleted")
FRESH_OUTCOMES = ("exact", "relocated")


@dataclass
class Gate:
    name: str
    value: float
    required: str  # "= 0", "= 1.0", ">= 0.98"
    passed: bool
    detail: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"gate": self.name, "value": self.value, "required": self.required, "passed": self.passed,
                "detail": self.detail}


def _ratio(num: int, den: int) -> float:
    return 1.0 if den == 0 else num / den


def _zero(name: str, items: list[str]) -> Gate:
    return Gate(name, len(items), "= 0", not items, items)


def _where(r: CitationRecord) -> str:
    return f"{r.case} step {r.step} {r.memory} {r.ref}: expected {r.expected}, got {r.outcome}" + (
        f"/{r.reason}" if r.reason else "") + (f" {r.change}" if r.change else "")


def macro_f1(pairs: list[tuple[str, str]]) -> tuple[float, dict[str, float]]:
    """Macro-F1 over the five outcomes (a class with neither support nor predictions counts 1)."""
    per = {}
    for c in OUTCOMES:
        tp = sum(1 for e, a in pairs if e == c and a == c)
        fp = sum(1 for e, a in pairs if e != c and a == c)
        fn = sum(1 for e, a in pairs if e == c and a != c)
        if tp + fp + fn == 0:
            per[c] = 1.0
            continue
        p = _ratio(tp, tp + fp)
        r = _ratio(tp, tp + fn)
        per[c] = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    return sum(per.values()) / len(per), per


def gates(results: list[CaseResult]) -> list[Gate]:
    cites = [c for r in results for c in r.citations]
    mems = [m for r in results for m in r.memories]
    checks = [k for r in results for k in r.checks]
    out: list[Gate] = []

    errors = [f"{r.case}: {r.error.splitlines()[0]}" for r in results if r.error]
    out.append(_zero("case errors (a case could not be run)", errors))

    false_fresh = [_where(c) for c in cites
                   if c.label.outcome in ("changed", "deleted", "unknown") and c.outcome in FRESH_OUTCOMES]
    false_fresh += [f"{m.case} step {m.step} {m.memory}: expected {m.expected}, reported fresh" for m in mems
                    if not m.expected.startswith("fresh") and m.freshness == "fresh"]
    out.append(_zero("false fresh", false_fresh))

    # SPEC §6.3a: "comments/formatting only" said of a change that is not labeled so
    false_cosmetic = [_where(c) + " (observed cosmetic)" for c in cites
                      if c.change == "cosmetic" and c.label.change != "cosmetic"]
    out.append(_zero("false cosmetic", false_cosmetic))

    del_cov = [_where(c) for c in cites if c.outcome == "deleted" and c.label.outcome != "deleted"
               and (c.label.reason == "incomplete-coverage" or c.category == "incomplete-coverage")]
    out.append(_zero("deleted under incomplete coverage", del_cov))

    non_current = [_where(c) + " (runner: repository not exact-current)" for c in cites
                   if c.outcome in AUTHORITATIVE and c.in_scope and not c.current]
    non_current += [_where(c) for c in cites if c.outcome in AUTHORITATIVE and c.current
                    and c.label.reason in ("not-current", "racing")]
    out.append(_zero("authoritative outcome from a non-current snapshot", non_current))

    leak = [_where(c) + " (runner: no repository of its identity in scope)" for c in cites
            if c.outcome in AUTHORITATIVE and not c.in_scope]
    leak += [_where(c) + f" (runner: observed {c.observed['path']} not in scope)" for c in cites
             if c.outcome in AUTHORITATIVE and c.in_scope and c.observed_exists is False
             and c.outcome != "deleted"]
    leak += [_where(c) for c in cites if c.outcome in AUTHORITATIVE
             and c.label.reason in ("out-of-scope", "repository-ambiguous")]
    out.append(_zero("cross-repository leakage", leak))

    snap = [f"{k.case}: {k.detail}" for k in checks if k.what == "snapshot" and not k.ok]
    out.append(_zero("incremental vs clean snapshot mismatches", snap))

    false_adv = [f"{k.case}: {k.detail}" for k in checks if k.what == "false-advisory"]
    out.append(_zero("false dependency-changed advisories", false_adv))

    for cls in ("changed", "deleted"):
        exp = [c for c in cites if c.label.outcome == cls]
        miss = [_where(c) for c in exp if c.outcome != cls]
        out.append(Gate(f"{cls} recall", round(_ratio(len(exp) - len(miss), len(exp)), 4), "= 1.0",
                        not miss, miss))

    predicted = [c for c in cites if c.outcome == "relocated"]
    wrong = [_where(c) + (f" @ {c.observed}" if c.observed else "") for c in predicted if not c.correct]
    out.append(Gate("relocation precision", round(_ratio(len(predicted) - len(wrong), len(predicted)), 4),
                    "= 1.0", not wrong, wrong))
    expected = [c for c in cites if c.label.outcome == "relocated"]
    missed = [_where(c) for c in expected if not c.correct]
    recall = _ratio(len(expected) - len(missed), len(expected))
    out.append(Gate("relocation recall", round(recall, 4), ">= 0.98", recall >= 0.98, missed))

    legacy = [m for m in mems if m.legacy]
    bad = [f"{m.case} step {m.step} {m.memory}: expected {m.expected}, got {m.freshness}/{m.reason}"
           + ("" if m.parity_ok else " (dropped, unlisted or judged differently in a batch)")
           for m in legacy if not (m.correct and m.parity_ok)]
    out.append(Gate("legacy recall parity", round(_ratio(len(legacy) - len(bad), len(legacy)), 4), "= 1.0",
                    not bad, bad))

    f1, _per = macro_f1([(c.label.outcome, c.outcome) for c in cites])
    out.append(Gate("macro-F1 over the five outcomes", round(f1, 4), ">= 0.99", f1 >= 0.99))

    wrong_labels = [_where(c) for c in cites if not c.correct]
    wrong_labels += [f"{m.case} step {m.step} {m.memory}: freshness expected {m.expected}, got "
                     f"{m.freshness}" + (f"/{m.reason}" if m.reason else "") for m in mems if not m.correct]
    wrong_labels += [f"{k.case}: {k.what}: {k.detail}" for k in checks
                     if k.what in ("capture", "unlabeled", "refresh", "advisory", "index", "validate")
                     and not k.ok]
    out.append(_zero("labels not matched (citation, freshness, capture, refresh)", wrong_labels))
    return out


def summary(results: list[CaseResult], seconds: float) -> dict[str, Any]:
    cites = [c for r in results for c in r.citations]
    mems = [m for r in results for m in r.memories]
    cats: dict[str, dict[str, Any]] = {}
    for cat in CATEGORIES:
        rs = [r for r in results if r.category == cat]
        if not rs:
            continue
        cs = [c for r in rs for c in r.citations]
        ms = [m for r in rs for m in r.memories]
        conf = Counter(f"{c.label.outcome}->{c.outcome}" for c in cs if not c.correct)
        cats[cat] = {
            "cases": len(rs), "citations": len(cs), "correct": sum(c.correct for c in cs),
            "memories": len(ms), "memories_correct": sum(m.correct for m in ms),
            "expected": dict(Counter(c.label.outcome for c in cs)),
            "confusion": dict(sorted(conf.items())),
            "languages": sorted({r.language for r in rs}),
            "errors": sum(1 for r in rs if r.error),
        }
    matrix = {e: {a: 0 for a in (*OUTCOMES, "missing")} for e in OUTCOMES}
    for c in cites:
        matrix[c.label.outcome][c.outcome if c.outcome in matrix[c.label.outcome] else "missing"] += 1
    distinct = {(c.case, c.memory, c.ref) for c in cites}
    return {
        "cases": len(results),
        "labeled_observations": len(cites),
        "distinct_citations": len(distinct),
        "memory_labels": len(mems),
        "legacy_memory_labels": sum(1 for m in mems if m.legacy),
        "by_kind": dict(sorted(Counter(c.kind for c in cites).items())),
        "by_language": dict(sorted(Counter(c.language for c in cites).items())),
        "categories": cats,
        "confusion_matrix": matrix,
        "multi_citation_memories": len({k[:2] for k, n in Counter((c.case, c.memory, c.step)
                                                                 for c in cites).items() if n > 1}),
        "seconds": round(seconds, 1),
    }


def render(results: list[CaseResult], gate_list: list[Gate], seconds: float, verbose: bool = False) -> str:
    s = summary(results, seconds)
    lines = []
    head = f"{'category':<22}{'cases':>6}{'cites':>7}{'correct':>8}{'mems':>6}{'ok':>5}  " \
           f"{'exp: exact/reloc/chg/del/unk':<30}confusion (expected->actual)"
    lines.append(head)
    lines.append("-" * len(head))
    for cat, d in s["categories"].items():
        e = d["expected"]
        dist = "/".join(str(e.get(o, 0)) for o in OUTCOMES)
        conf = ", ".join(f"{k}:{v}" for k, v in d["confusion"].items()) or "-"
        if d["errors"]:
            conf += f"  ({d['errors']} case error(s))"
        lines.append(f"{cat:<22}{d['cases']:>6}{d['citations']:>7}{d['correct']:>8}{d['memories']:>6}"
                     f"{d['memories_correct']:>5}  {dist:<30}{conf}")
    tot_c = sum(d["citations"] for d in s["categories"].values())
    tot_ok = sum(d["correct"] for d in s["categories"].values())
    tot_m = sum(d["memories"] for d in s["categories"].values())
    tot_mok = sum(d["memories_correct"] for d in s["categories"].values())
    lines.append("-" * len(head))
    lines.append(f"{'total':<22}{s['cases']:>6}{tot_c:>7}{tot_ok:>8}{tot_m:>6}{tot_mok:>5}")
    lines.append("")
    lines.append(f"distinct citations: {s['distinct_citations']}; labeled observations: "
                 f"{s['labeled_observations']}; memory labels: {s['memory_labels']} "
                 f"({s['legacy_memory_labels']} legacy); multi-citation memories: {s['multi_citation_memories']}")
    lines.append("by kind: " + ", ".join(f"{k} {v}" for k, v in s["by_kind"].items()))
    lines.append("by language: " + ", ".join(f"{k} {v}" for k, v in s["by_language"].items()))
    lines.append("")
    lines.append("confusion matrix (rows expected, columns actual):")
    cols = (*OUTCOMES, "missing")
    lines.append(f"{'':<11}" + "".join(f"{c:>10}" for c in cols))
    for e in OUTCOMES:
        lines.append(f"{e:<11}" + "".join(f"{s['confusion_matrix'][e][a]:>10}" for a in cols))
    lines.append("")
    lines.append(f"{'gate':<68}{'value':>8}  {'required':<9}result")
    for g in gate_list:
        val = f"{g.value:g}" if isinstance(g.value, float) else str(g.value)
        lines.append(f"{g.name:<68}{val:>8}  {g.required:<9}{'PASS' if g.passed else 'FAIL'}")
        shown = g.detail if verbose else g.detail[:8]
        for d in shown:
            lines.append(f"    {d}")
        if len(g.detail) > len(shown):
            lines.append(f"    … {len(g.detail) - len(shown)} more (--verbose)")
    ok = all(g.passed for g in gate_list)
    lines.append("")
    lines.append(f"{'ALL GATES PASS' if ok else 'GATES FAILED'} — {s['cases']} cases in {seconds:.1f} s")
    return "\n".join(lines)


def to_json(results: list[CaseResult], gate_list: list[Gate], seconds: float) -> dict[str, Any]:
    s = summary(results, seconds)
    s["gates"] = [g.to_json() for g in gate_list]
    s["passed"] = all(g.passed for g in gate_list)
    s["mismatches"] = [
        {"case": c.case, "step": c.step, "memory": c.memory, "ref": c.ref, "expected": c.expected,
         "outcome": c.outcome, "reason": c.reason, "observed": c.observed}
        for r in results for c in r.citations if not c.correct]
    return s
