"""Brief packing (SPEC §18): it never stops at the first memory that does not fit.

For any candidate set the brief holds the largest number of memories that fit the budget
under the documented estimator (checked against a brute force over every subset), never
exceeds the budget, and never drops a status: a shown memory keeps its freshness, precise
status and reason, and its citations are listed or counted by outcome. The click
``HEAD~300`` case — a top memory with 8 long citations that alone overflows the budget,
which used to leave the brief empty — is rebuilt on a real repository.
"""

from __future__ import annotations

import itertools
import json
import math
import re

from hypothesis import given
from hypothesis import strategies as st

from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.memory import api
from citegraph.memory.brief import compose as br
from citegraph.memory.brief import pack as bp
from citegraph.memory.brief.recall import Candidate
from citegraph.memory.lifecycle.store import Memory
from citegraph.validator import pipeline
from citegraph.validator.model import MemoryVerdict, Observation, Observed, Receipt

OUTCOMES = ("exact", "relocated", "changed", "deleted", "unknown")


def receipt(n: int, path: str) -> Receipt:
    return Receipt(id=f"cgc_{n:032x}", ref=path, kind="file", repository_id="f" * 32, repository_kind="remote",
                   snapshot_id="cgsnap_x", commit="0" * 40, dirty=False, extractor_version="t", path=path,
                   blob_id="0" * 40, content_hash="h")


@st.composite
def candidates(draw, max_items: int = 9):
    n = draw(st.integers(0, max_items))
    out = []
    for rank in range(1, n + 1):
        text = draw(st.text(min_size=1, max_size=draw(st.sampled_from([20, 200, 2000]))).filter(str.strip))
        k = draw(st.integers(0, 8))
        ref_len = draw(st.sampled_from([5, 60, 250]))
        receipts = [receipt(rank * 10 + j, f"src/{'p' * ref_len}{j}.py") for j in range(k)]
        obs = [Observation(r.id, o, "not-current" if o == "unknown" else None,
                           Observed("moved/" + r.path, 3, 9) if o == "relocated" else None)
               for r, o in zip(receipts, [draw(st.sampled_from(OUTCOMES)) for _ in receipts], strict=True)]
        mid = f"cgm_{rank:016x}"
        if k:
            v = pipeline.memory_verdict(mid, obs)
        else:
            v = MemoryVerdict(mid, draw(st.sampled_from(["fresh", "unknown", "stale"])), None, reason="no-basis")
        project = draw(st.sampled_from(["p", "payments", "x" * 128]))
        topic = draw(st.sampled_from([f"t{rank}", f"topic-{'y' * 100}-{rank}"]))
        mem = Memory(mid, project, topic, draw(st.sampled_from(["durable", "handoff"])), "active", text, 1, 0.0,
                     0.0, citations=receipts)
        out.append(br._item(rank, mem, Candidate(mid, 10.0 / rank, 10.0 / rank, 0.0), v))
    return out


def most_that_fit(items: list[bp.Item], budget: int, issues: list[dict]) -> int:
    """Brute force: the size of the largest subset that fits in compact forms."""
    lay = bp.Layout(items, budget=budget, global_issues=issues, limits={"max_citations": 96})
    for n in range(len(items), 0, -1):
        for subset in itertools.combinations(items, n):
            if lay.fits({i.rank: i.compact for i in subset}):
                return n
    return 0


def check_statuses(res: bp.BriefResult, items: list[bp.Item]) -> None:
    by_id = {i.memory.id: i for i in items}
    for m in res.data["memories"] + res.data["stale"]:
        it = by_id[m["id"]]
        assert (m["freshness"], m["status"], m["reason"]) == (it.verdict.freshness, it.verdict.status,
                                                              it.verdict.reason)
        cut = m.get("cut", {"citations": 0, "outcomes": {}, "issues": 0})
        counted = [o for o, n in cut["outcomes"].items() for _ in range(n)]
        assert sorted([c["outcome"] for c in m["citations"]] + counted) == \
            sorted(o.outcome for o in it.verdict.observations)
    # the text rendering says the same
    for m in res.data["memories"] + res.data["stale"]:
        assert re.search(rf"^\[\d+\] {m['id']} \S+ \S+ — {m['freshness']}/{m['status'] or '-'}", res.text, re.M)


@given(candidates(), st.integers(br.MIN_BUDGET, br.MAX_BUDGET), st.booleans())
def test_the_brief_holds_the_most_memories_that_fit_and_keeps_every_status(items, budget, limit_issue):
    issues = [{"kind": "limit", "memory_id": None, "message": "x" * 150}] if limit_issue else []
    res = br.render(items, budget=budget, global_issues=issues, limits={"max_citations": 96})
    # never over the budget, and the estimate is the documented one
    total = bp.estimate_tokens(res.text + "\n") + bp.estimate_tokens(res.json_text + "\n")
    assert total == res.data["estimated_tokens"] <= budget
    assert json.loads(res.json_text) == res.data
    shown = res.data["memories"] + res.data["stale"]
    assert len(shown) == most_that_fit(items, budget, issues)
    assert len(shown) + res.data["omitted"]["memories"] == len(items)
    check_statuses(res, items)
    lay = bp.Layout(items, budget=budget, global_issues=issues, limits={"max_citations": 96})
    if lay.fits({i.rank: i.full for i in items}):  # everything fits in full: nothing is cut
        assert len(shown) == len(items) and not any("cut" in m or m["truncated"] for m in shown)


def test_a_memory_too_large_for_the_budget_is_shown_cut_and_packing_goes_on():
    """The top memory alone overflows the budget in full; the next ones still fit."""
    items = []
    for rank in range(1, 6):
        k = 8 if rank == 1 else 1
        receipts = [receipt(rank * 10 + j, f"src/click/{'shell_completion_' * 12}{j}.py") for j in range(k)]
        obs = [Observation(r.id, "relocated", None, Observed("moved/" + r.path, 3, 9)) for r in receipts]
        mem = Memory(f"cgm_{rank:016x}", "click", f"t{rank}", "durable", "active", "word " * 200, 1, 0.0, 0.0,
                     citations=receipts)
        items.append(br._item(rank, mem, Candidate(mem.id, 1, 1, 0), pipeline.memory_verdict(mem.id, obs)))
    lay = bp.Layout(items, budget=1250, global_issues=[], limits={})
    assert not lay.fits({1: items[0].full})  # the case that used to empty the brief
    res = br.render(items, budget=1250, global_issues=[], limits={})
    shown = {m["rank"]: m for m in res.data["memories"]}
    assert sorted(shown) == [1, 2, 3, 4, 5]
    assert shown[1]["cut"]["citations"] >= 1 and sum(shown[1]["cut"]["outcomes"].values()) == \
        shown[1]["cut"]["citations"]
    assert "not listed" in res.text


def test_empty_only_when_no_memory_fits_even_compact():
    """With the most global issues a brief carries (a limit, three invalid --code-ref and
    their count, each at the message cap) and the longest names, a compact memory does
    not fit in 800 tokens — the brief is empty, within its budget — but does in 1,000."""
    mem = Memory("cgm_" + "1" * 16, "p" * 128, "t" * 128, "durable", "active", "word " * 800, 1, 0.0, 0.0)
    it = br._item(1, mem, Candidate(mem.id, 1, 1, 0), MemoryVerdict(mem.id, "unknown", None,
                                                                     reason="not-current,racing,out-of-scope"))
    issues = [{"kind": "limit", "memory_id": None, "message": "y" * 160}] + \
        [{"kind": "invalid-code-citation", "memory_id": None, "message": "z" * 160}] * 4  # repr'd refs: ASCII
    for budget, shown in ((800, 0), (1000, 1)):
        res = br.render([it], budget=budget, global_issues=issues, limits={})
        assert res.data["estimated_tokens"] <= budget
        assert len(res.data["memories"]) == shown == most_that_fit([it], budget, issues)
        assert res.data["omitted"]["memories"] == 1 - shown


CLICK_FUNCS = [f"resolve_{'shell_completion_' * 3}source_{i}" for i in range(8)]


def click_like_repo(repo):
    body = "".join(f"def {name}(ctx, args, incomplete):\n    return [ctx, args, incomplete, {i}]\n\n\n"
                   for i, name in enumerate(CLICK_FUNCS))
    repo.write("src/click/shell_completion.py", body)
    repo.write("src/click/core.py", "class Context:\n    def invoke(self, callback):\n        return callback()\n")
    repo.commit("click-like")


def test_click_head_300_shaped_brief_returns_a_memory_at_1250_tokens(repo, home):
    """Rebuilt on a real repository: 25 memories about shell completion, the best one
    citing 8 long-named functions that then move (so each citation carries its observed
    location); at 1,250 tokens the brief used to show none."""
    click_like_repo(repo)
    build_snapshot(repo.root, home)
    refs = [f"src/click/shell_completion.py::{f}" for f in CLICK_FUNCS]
    api.remember(home, "Shell completion resolves incomplete args through every source; " * 6, repo=repo.root,
                 refs=refs, topic="completion-sources")
    for i in range(24):
        api.remember(home, f"Shell completion note {i}: completion of {CLICK_FUNCS[i % 8]} " * 3, repo=repo.root,
                     refs=refs[i % 8: i % 8 + 3] + ["src/click/core.py::Context.invoke"], topic=f"note{i}")
    repo.mv("src/click/shell_completion.py", "src/click/completion/shell_completion_sources.py")
    repo.commit("move")
    build_snapshot(repo.root, home)
    res = api.brief(home, "shell completion resolves incomplete args through every source", repo=repo.root,
                    budget_tokens=1250)
    d = res.to_json()
    shown = d["memories"] + d["stale"]
    assert d["estimated_tokens"] <= 1250
    assert shown, d["omitted"]
    assert shown[0]["topic"] == "completion-sources" and shown[0]["rank"] == 1
    assert shown[0].get("cut", {}).get("citations", 0) >= 1  # too large in full: shown with a cut list
    assert math.isclose(len(shown) + d["omitted"]["memories"], d["selected"]["memories"])


@given(candidates(max_items=6), st.integers(br.MIN_BUDGET, br.MAX_BUDGET), st.data())
def test_the_size_packing_computes_is_the_size_of_the_rendering(items, budget, data):
    """Packing sums memoised fragment sizes instead of serialising; for any shown forms the
    sum equals the bytes of the rendering it stands for."""
    issues = [{"kind": "limit", "memory_id": None, "message": "m" * data.draw(st.integers(1, 160))}] \
        if data.draw(st.booleans()) else []
    lay = bp.Layout(items, budget=budget, global_issues=issues, limits={"max_citations": 96})
    shown = {}
    for it in items:
        if data.draw(st.booleans()):
            shown[it.rank] = bp.Form(data.draw(st.sampled_from([None, *bp.EXCERPT_CAPS])),
                                     data.draw(st.integers(0, len(it.citations))), data.draw(st.booleans()))
    js, tx = lay.build(shown, None)
    assert lay.sizes(shown) == (len("".join(js).encode()) + 1, len("\n".join(tx).encode()) + 1)
    res = lay.result(shown)
    assert res.data["estimated_tokens"] == bp.estimate_tokens(res.text + "\n") + bp.estimate_tokens(res.json_text + "\n")
