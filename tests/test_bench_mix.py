"""The realistic batch mix of bench/mix.py: its edits and that every outcome happens."""

from __future__ import annotations

import subprocess

from citegraph.bench.mix import EDIT_SHARE, PROJECT, batch_rates, build_mix, edited_body, plan_edits
from citegraph.bench.monorepo import generate_repo
from citegraph.graph.store import Home
from citegraph.memory.lifecycle.store import MemoryStore
from citegraph.validator.model import Receipt
from citegraph.validator.pipeline import resolve_scope


def test_edited_body_inserts_a_blank_line_after_each_given_line():
    data = b"a\nb\nc"
    assert edited_body(data, [1, 3]) == b"a\n\nb\nc\n\n"
    assert edited_body(data, [2, 2, 9]) == b"a\nb\n\nc"


def _receipt(path: str) -> Receipt:
    return Receipt(id=f"r{path}", ref=path, kind="file", repository_id="x", repository_kind="git",
                   snapshot_id="s", commit="c", dirty=False, extractor_version="e", path=path, blob_id="b")


def test_plan_edits_is_stable_and_leaves_most_files_alone():
    lists = [[_receipt(f"f{i}.py")] for i in range(200)]
    plan = plan_edits(lists, 3)
    assert plan == plan_edits(lists, 3)
    assert {k: sum(1 for v in plan.values() if v == k) for k in EDIT_SHARE} == \
        {k: int(200 * s) for k, s in EDIT_SHARE.items()}
    assert len(plan) < 200 * 0.25


def test_the_mix_has_every_decided_outcome_and_reads_the_store(tmp_path):
    gen = generate_repo(tmp_path / "mono", files=300, seed=5)
    home = Home.open(tmp_path / "home")
    mix = build_mix(home, str(gen.path), tmp_path, 200)
    assert mix.citations == sum(mix.kinds.values()) and set(mix.kinds) == {"symbol", "span", "file"}
    assert all(it.memory_id.startswith("cgm_") for it in mix.items)  # ids the store gave
    with MemoryStore.open(home, read_only=True) as ms:  # and the store is left as it was
        assert ms.con.execute("SELECT count(*) FROM memories WHERE project = ?", [PROJECT]).fetchone()[0] == 0
    res = batch_rates(home, mix.items[:5], lambda: resolve_scope(home, [str(mix.clone)]), mix,
                      lambda: resolve_scope(home, [str(mix.clone)]), 1)
    outcomes = res["mix"]["outcomes"]
    assert all(outcomes[o] > 0 for o in ("exact", "relocated", "changed", "deleted")), outcomes
    assert outcomes["exact"] > sum(outcomes.values()) / 2
    assert subprocess.run(["git", "status", "--porcelain"], cwd=gen.path, capture_output=True,
                          text=True).stdout == ""  # the source repository was not touched
