"""Recall (SPEC §8): BM25 in SQL over the terms table, citation boosts, legacy parity."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from citegraph.graph.store import Home
from citegraph.memory.brief import recall as rc
from citegraph.memory.lifecycle.legacy_import import LegacyRecord, import_records
from citegraph.memory.lifecycle.store import MemoryStore, bulk_insert, memory_id_for, tokenize
from citegraph.validator.model import Receipt

VOCAB = ("retry idempotency key checkout payment ledger cache flush shutdown queue worker backoff "
         "invoice refund token session timeout socket parser index snapshot memory brief").split()
REPO_A = "a" * 32
REPO_B = "b" * 32


def fake_receipt(n: int, path: str, *, kind: str = "symbol", qname: str | None = "Thing.run",
                 handle: str | None = None, repo: str = REPO_A) -> Receipt:
    name = qname.rsplit(".", 1)[-1] if qname else None
    return Receipt(id=f"cgc_{n:032x}", ref=f"{path}::{qname}" if kind == "symbol" else path, kind=kind,
                   repository_id=repo, repository_kind="remote", snapshot_id="cgsnap_x", commit="0" * 40,
                   dirty=False, extractor_version="test", path=path, blob_id="0" * 40, content_hash="h",
                   handle=(handle or f"cgs_{n:032x}") if kind == "symbol" else None,
                   language="python" if kind == "symbol" else None,
                   symbol_kind="method" if kind == "symbol" else None, name=name if kind == "symbol" else None,
                   qualified_name=qname if kind == "symbol" else None, ordinal=0 if kind == "symbol" else None,
                   fragment_hash="f" if kind == "symbol" else None, body_hash="b" if kind == "symbol" else None)


def pure_bm25(docs: dict[str, list[str]], task: str) -> dict[str, float]:
    """Reference BM25 (k1=1.2, b=0.75, Lucene idf) written independently of the SQL."""
    q = set(tokenize(task))
    n = len(docs)
    avgdl = sum(len(d) for d in docs.values()) / n
    df = Counter(t for d in docs.values() for t in set(d) if t in q)
    out = {}
    for mid, toks in docs.items():
        tf = Counter(toks)
        s = 0.0
        for t in q:
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] * 2.2 / (tf[t] + 1.2 * (0.25 + 0.75 * len(toks) / avgdl))
        if s > 0:
            out[mid] = s
    return out


def ranking(scores: dict[str, float], updated: dict[str, float], limit: int = 24) -> list[str]:
    return sorted(scores, key=lambda m: (-round(scores[m], 9), -updated[m], m))[:limit]


def fill(home: Home, n: int, seed: int, cite: bool) -> tuple[dict[str, list[str]], dict[str, float]]:
    rnd = random.Random(seed)
    crnd = random.Random(seed + 1)
    docs: dict[str, list[str]] = {}
    updated: dict[str, float] = {}
    items = []
    for i in range(n):
        text = " ".join(rnd.choice(VOCAB) for _ in range(rnd.randint(3, 30)))
        project = rnd.choice(["payments", "infra"])
        topic = f"t{i}"
        receipts = [fake_receipt(i * 10 + k, f"src/m{i}_{k}.py") for k in range(crnd.randint(0, 3))] if cite else []
        items.append({"text": text, "project": project, "topic": topic, "receipts": receipts,
                      "created_at": 1000.0 + i})
    with MemoryStore.open(home) as ms:
        # a few through remember (the path every write takes), the rest in bulk
        for it in items[:20]:
            mem, _ = ms.remember(it["text"], project=it["project"], topic=it["topic"], receipts=it["receipts"],
                                 now=it["created_at"])
        bulk_insert(ms, items[20:])
    for it in items:
        mid = memory_id_for(it["project"], it["topic"])
        docs[mid] = tokenize(f"{it['text']} {it['topic']} {it['project']}")
        updated[mid] = it["created_at"]
    return docs, updated


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The same 300 memories twice: without citations, and with (non-matching) citations."""
    plain = Home.open(tmp_path_factory.mktemp("plain"))
    cited = Home.open(tmp_path_factory.mktemp("cited"))
    docs, updated = fill(plain, 300, 7, cite=False)
    docs2, _ = fill(cited, 300, 7, cite=True)
    assert docs == docs2
    with MemoryStore.open(plain, read_only=True) as a, MemoryStore.open(cited, read_only=True) as b:
        yield a, b, docs, updated


@given(st.lists(st.sampled_from(VOCAB + ["unrelated", "words"]), min_size=1, max_size=6))
def test_sql_bm25_equals_reference_and_citations_change_nothing(corpus, words):
    plain, cited, docs, updated = corpus
    task = " ".join(words)
    ref = pure_bm25(docs, task)
    want = ranking(ref, updated)
    for ms in (plain, cited):
        got = rc.recall(ms, task)
        assert [c.memory_id for c in got] == want
        for c in got:
            assert c.boost == 0.0
            assert c.score == pytest.approx(ref[c.memory_id], rel=1e-9)


def test_project_filter_uses_the_project_as_corpus(corpus):
    ms, _, docs, updated = corpus
    got = rc.recall(ms, "retry backoff", project="infra")
    projects = {m.id: m.project for m in ms.load()}
    sub = {m: d for m, d in docs.items() if projects[m] == "infra"}
    assert [c.memory_id for c in got] == ranking(pure_bm25(sub, "retry backoff"), updated)
    assert len(got) == rc.MAX_CANDIDATES


def test_boosts_only_add_for_matching_citations_and_legacy_keep_their_rank(home):
    legacy = [LegacyRecord(i + 1, f"retry policy note {i} " + "backoff " * i, "payments", f"old{i}", "durable",
                           None, None, 500.0 + i) for i in range(6)]
    import_records(home, legacy)
    with MemoryStore.open(home) as ms:
        before = rc.recall(ms, "retry backoff in src/payments/retry.py")
        cited, _ = ms.remember("an unrelated sentence", project="misc", topic="cited",
                               receipts=[fake_receipt(1, "src/payments/retry.py", qname="RetryPolicy.next_delay"),
                                         fake_receipt(2, "src/other.py", qname="Other.run")])
        after = rc.recall(ms, "retry backoff in src/payments/retry.py")
    # the cited memory has no BM25 score at all: it is recalled by its citation alone
    top = after[0]
    assert top.memory_id == cited.id and top.bm25 == 0.0 and top.boost == rc.W_TASK
    legacy_after = [c for c in after if c.memory_id != cited.id]
    assert {c.memory_id for c in legacy_after} == {c.memory_id for c in before}
    assert all(c.boost == 0.0 for c in legacy_after)
    with MemoryStore.open(home, read_only=True) as ms:
        pure = rc.recall(ms, "retry backoff in src/payments/retry.py", boosts=False)
    assert [(c.memory_id, c.score) for c in pure] == [(c.memory_id, c.score) for c in legacy_after]


def test_boost_weights_for_code_refs_paths_names_and_handles(home):
    r_sym = fake_receipt(1, "src/payments/retry.py", qname="RetryPolicy.next_delay",
                         handle="cgs_" + "1" * 32, repo=REPO_A)
    r_file = fake_receipt(2, "lib/cache.go", kind="file", repo=REPO_B)
    r_other = fake_receipt(3, "src/payments/retry.py", qname="RetryPolicy.reset", handle="cgs_" + "3" * 32,
                           repo=REPO_B)
    with MemoryStore.open(home) as ms:
        m1, _ = ms.remember("zzz", topic="m1", receipts=[r_sym, r_file])
        m2, _ = ms.remember("zzz", topic="m2", receipts=[r_other])

        def boosts(task: str, refs: tuple[str, ...] = ()) -> dict[str, float]:
            return {c.memory_id: c.boost for c in rc.recall(ms, task, code_refs=refs)}

        # a path named in the task (suffix match), both memories cite that file
        assert boosts("look at retry.py") == {m1.id: 1.5, m2.id: 1.5}
        # a qualified name in the task
        assert boosts("why does RetryPolicy.next_delay double") == {m1.id: 1.5}
        # a bare symbol name
        assert boosts("change reset") == {m2.id: 1.5}
        # --code-ref weighs 3.0 and a citation counts once (max of its matches)
        assert boosts("RetryPolicy.next_delay", ("src/payments/retry.py::RetryPolicy.next_delay",)) == {m1.id: 3.0}
        assert boosts("nothing", ("lib/cache.go", "cgs_" + "3" * 32)) == {m1.id: 3.0, m2.id: 3.0}
        # cgr_ routes by repository prefix: same symbol handle, other repository → no match
        assert boosts("nothing", (f"cgr_{REPO_A[:16]}_{'3' * 32}",)) == {}
        assert boosts("nothing", (f"cgr_{REPO_B[:16]}_{'3' * 32}",)) == {m2.id: 3.0}
        assert boosts(f"see cgr_{REPO_A[:16]}_{'1' * 32}") == {m1.id: 1.5}
        # a task naming both citations of m1 adds both
        assert boosts("retry.py and cache.go") == {m1.id: 3.0, m2.id: 1.5}
        pats = rc.task_patterns("x", ["../escape", "src/ok.py"])
        assert [r[0] for r in pats.invalid_refs] == ["../escape"]


def test_archived_superseded_and_other_revisions_are_not_recalled(home):
    with MemoryStore.open(home) as ms:
        a, _ = ms.remember("retry budget old claim", topic="a")
        b, _ = ms.remember("retry budget archived claim", topic="b")
        ms.set_status(b.id, "archived")
        c, _ = ms.remember("retry budget new claim", topic="c", supersedes=a.id)
        d, _ = ms.remember("retry budget first words", topic="d")
        ms.remember("completely different now", topic="d")
        got = [x.memory_id for x in rc.recall(ms, "retry budget claim words")]
    assert got == [c.id]


def test_at_most_24_candidates_and_empty_tasks(home):
    with MemoryStore.open(home) as ms:
        for i in range(40):
            ms.remember(f"shared word {i}", topic=f"t{i}")
        assert len(rc.recall(ms, "shared")) == 24
        assert rc.recall(ms, "   ") == []
        assert rc.recall(ms, "absent") == []
