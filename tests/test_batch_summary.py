"""The batch summary's groupings (memory/batch/run.py ``BatchReport.summary``): by repository
and by project, each equal to a direct recount of the memory lines — including failed
partitions (no lines) and memories without a project."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from citegraph.memory.batch.run import FRESHNESS, BatchReport, Outcome
from citegraph.validator.model import OUTCOMES

citation = st.builds(lambda o: {"outcome": o}, st.sampled_from(OUTCOMES))
memory = st.builds(lambda f, p, cs: {"freshness": f, "project": p, "citations": cs},
                   st.sampled_from(FRESHNESS), st.sampled_from([None, "", "payments", "search"]),
                   st.lists(citation, max_size=3))


@st.composite
def reports(draw) -> BatchReport:
    n = draw(st.integers(0, 5))
    outcomes = []
    for i in range(n):
        rid = f"r{i}"
        if draw(st.booleans()):
            mems = [{**m, "id": f"m{i}.{j}", "repository_id": rid}
                    for j, m in enumerate(draw(st.lists(memory, max_size=4)))]
            outcomes.append(Outcome(rid, {"snapshot_id": f"s{i}", "commit": f"c{i}", "memories": mems}, None))
        else:
            outcomes.append(Outcome(rid, None, "RuntimeError: no"))
    return BatchReport("ckpt", "", "inline", outcomes)


def recount(lines: list[dict]) -> tuple[int, dict, dict]:
    outcomes = Counter(c["outcome"] for m in lines for c in m["citations"])
    fresh = Counter(m["freshness"] for m in lines)
    return len(lines), {o: outcomes[o] for o in OUTCOMES}, {f: fresh[f] for f in FRESHNESS}


def counts(entry: dict) -> tuple[int, dict, dict]:
    return entry["memories"], entry["summary"], entry["freshness_summary"]


@given(reports())
def test_summary_groups_equal_a_direct_recount(report: BatchReport) -> None:
    lines = report.memory_lines()
    s = report.summary()
    assert counts(s) == recount(lines)
    assert [r["repository_id"] for r in s["by_repository"]] == [o.repository_id for o in report.outcomes]
    for entry in s["by_repository"]:
        mine = [m for m in lines if m["repository_id"] == entry["repository_id"]]
        assert counts(entry) == recount(mine)
        assert entry["state"] == ("validated" if mine or entry["error"] is None else "failed")
    projects = sorted({m.get("project") or "" for m in lines})
    assert [p["project"] for p in s["by_project"]] == projects
    for entry in s["by_project"]:
        assert counts(entry) == recount([m for m in lines if (m.get("project") or "") == entry["project"]])
