"""Racing through the resident service (SPEC §17, the fence): real edits and commits, real
watcher events. A change between a read's two syncs makes every observation of the
repository unknown/racing; without one, the service answers exactly what a one-shot
validation of the same state answers. A simulated overflow and a dead watcher give
racing, then the service recovers. False fresh: never."""

from __future__ import annotations

import os
import threading
import time

import pytest
from gitutil import GitRepo
from hypothesis import given, settings
from hypothesis import strategies as st

from citegraph.graph.current import ScanSource
from citegraph.graph.store import Home
from citegraph.indexer.tree_watch import AVAILABLE, Batch
from citegraph.memory import api
from citegraph.server.service import Service

pytestmark = pytest.mark.skipif(not AVAILABLE, reason="inotify (Linux) only")

FILES = {
    "pay/retry.py": "class Retry:\n    def delay(self, n):\n        return 2 ** n\n\n\ndef key(r):\n    return r.k\n",
    "pay/audit.py": "def audit(e):\n    return e\n",
    "README.md": "retry notes\n",
}
REFS = ["pay/retry.py::Retry.delay", "pay/retry.py::key", "pay/retry.py#L6-L7", "pay/audit.py", "README.md"]


class Racing:
    """A state source whose racing check first applies ``during`` (a real change of the
    worktree between the read and the check), then asks the service."""

    def __init__(self, inner, during) -> None:
        self.inner, self.during, self.lock = inner, during, threading.Lock()

    def read(self, repo_path, home, at=None):
        return self.inner.read(repo_path, home, at)

    def moved(self, cur):
        with self.lock:
            if self.during is not None:
                self.during()
                self.during = None
        return self.inner.moved(cur)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("racing")
    repo = GitRepo(root / "repo")
    for p, c in FILES.items():
        repo.write(p, c)
    repo.commit("c1")
    home = Home.open(root / "home")
    svc = Service(home, debounce_ms=5, pool_context="fork")
    svc.start()
    svc.register(repo.root)
    src = svc.source(wait_s=10)
    mems = [api.remember(home, f"claim about {r}", repo=repo.root, refs=[r], topic=f"t{i}", source=src)["id"]
            for i, r in enumerate(REFS)]
    yield repo, home, svc, mems
    svc.close()


def edit_op(repo: GitRepo, kind: str, n: int):
    path = ["pay/retry.py", "pay/audit.py", "README.md", "pay/new.py"][n % 4]
    if kind == "append":
        return lambda: repo.write(path, (repo.root / path).read_text() + f"# {n}\n"
                                  if (repo.root / path).exists() else f"x = {n}\n")
    if kind == "same-bytes":  # an event, but no change of the state: never racing
        return lambda: repo.write(path, (repo.root / path).read_bytes()) if (repo.root / path).exists() else None
    if kind == "restore":
        return lambda: repo.git("checkout", "--", ".")
    if kind == "commit":
        return lambda: repo.commit(f"c {n}")
    raise AssertionError(kind)


def validate(home, repo, mems, source):
    return api.validate_memories(home, memory_ids=mems, repo_paths=[str(repo.root)], source=source).to_json()


def observations(data) -> list[tuple]:
    return [(m["id"], c["ref"], c["outcome"], c["reason"]) for m in data["memories"] for c in m["citations"]]


OPS = st.sampled_from(["append", "same-bytes", "restore", "commit"])


@settings(deadline=None, max_examples=15)
@given(st.lists(st.tuples(st.one_of(st.none(), OPS), st.one_of(st.none(), OPS), st.integers(0, 7)),
                min_size=1, max_size=6))
def test_racing_or_exactly_the_one_shot_answer(world, steps):
    repo, home, svc, mems = world
    for before, during, n in steps:
        if before is not None:
            edit_op(repo, before, n)()
        state0 = repo.git("status", "--porcelain"), repo.head(), _contents(repo)
        changed = []

        def apply(during=during, n=n, changed=changed, state0=state0):
            if during is not None:
                edit_op(repo, during, n)()
            changed.append((repo.git("status", "--porcelain"), repo.head(), _contents(repo)) != state0)

        res = validate(home, repo, mems, Racing(svc.source(wait_s=10), apply))
        obs = observations(res)
        if changed[0]:
            assert {(o[2], o[3]) for o in obs} == {("unknown", "racing")}, (before, during, obs)
            continue
        one = validate(home, repo, mems, ScanSource())  # the same state, one-shot
        assert obs == observations(one), (before, during)
        assert all(o[3] != "racing" for o in obs)  # an event that changed nothing is no race


def _contents(repo: GitRepo) -> tuple:
    out = []
    for p in sorted(repo.root.rglob("*")):
        if ".git" in p.parts or not p.is_file():
            continue
        out.append((str(p.relative_to(repo.root)), p.read_bytes()))
    return tuple(out)


def test_an_overflow_during_a_read_is_racing_then_recovers(world):
    repo, home, svc, mems = world
    live = svc.register(repo.root).live

    def overflow():
        live._on_batch(Batch(overflow=True))  # the kernel dropped events

    res = validate(home, repo, mems, Racing(svc.source(wait_s=10), overflow))
    assert {(c["outcome"], c["reason"]) for m in res["memories"] for c in m["citations"]} == {("unknown", "racing")}
    after = validate(home, repo, mems, svc.source(wait_s=10))
    assert observations(after) == observations(validate(home, repo, mems, ScanSource()))


def test_a_dead_watcher_is_racing_then_the_service_restarts_it(world):
    repo, home, svc, mems = world
    live = svc.register(repo.root).live
    w = live.watcher
    w.stop.set()  # the watcher thread ends, as if it had died
    w.thread.join(timeout=5)
    res = validate(home, repo, mems, svc.source(wait_s=10))
    assert {(c["outcome"], c["reason"]) for m in res["memories"] for c in m["citations"]} == {("unknown", "racing")}
    deadline = time.monotonic() + 10
    while not live.watching():  # the supervisor restarts it
        assert time.monotonic() < deadline
        time.sleep(0.05)
    after = validate(home, repo, mems, svc.source(wait_s=10))
    assert observations(after) == observations(validate(home, repo, mems, ScanSource()))
    assert all(o[3] != "racing" for o in observations(after))


class Recording:
    """The service's source, remembering the state each read claimed."""

    def __init__(self, inner) -> None:
        self.inner, self.claims = inner, []

    def read(self, repo_path, home, at=None):
        cur = self.inner.read(repo_path, home, at)
        self.claims.append(cur)
        return cur

    def moved(self, cur):
        return self.inner.moved(cur)


def test_concurrent_edits_never_serve_a_stale_state(world):
    """An editor thread changes the worktree at random moments while reads run. Every read
    that is not racing claims a state that really existed during the read, and answers what
    a validation of exactly that state answers."""
    import random

    from citegraph.indexer import gitrepo

    repo, home, svc, mems = world
    lock = threading.Lock()
    # (the change began, it was recorded, fingerprint, head): a state is alive from the
    # moment its change began until the next change was recorded
    history: list[tuple[float, float, str | None, str]] = []

    def snapshot_state(began: float) -> None:
        s = gitrepo.worktree_state(gitrepo.open_repository(repo.root))
        history.append((began, time.monotonic(), s.dirty_fingerprint, s.head))

    with lock:
        snapshot_state(time.monotonic())
    stop = threading.Event()

    def editor() -> None:
        rnd = random.Random(3)
        k = 0
        while not stop.is_set():
            # Bursts of edits with quiet gaps: in a burst the editor outruns the builder
            # (reads are racing: moved, or the state read still being indexed); in a gap
            # the builder catches up and reads answer for a built state.
            time.sleep(rnd.uniform(0.0, 0.03) if k % 12 else 0.8)
            with lock:  # the change and its record are one step
                began = time.monotonic()
                k += 1
                path = ["pay/retry.py", "pay/audit.py", "README.md"][k % 3]
                # One atomic change per step (write aside, rename): every state the
                # worktree passes through is one the history records.
                data = FILES[path] if k % 7 == 0 else (repo.root / path).read_text() + f"# concurrent {k}\n"
                tmp = repo.root.parent / f".{k}.tmp"  # outside the worktree, same filesystem
                tmp.write_text(data)
                os.replace(tmp, repo.root / path)
                snapshot_state(began)

    t = threading.Thread(target=editor)
    t.start()
    results = []
    try:
        for _ in range(15):
            rec = Recording(svc.source(wait_s=0.5))  # the editor outruns the builder: do not wait long
            a = time.monotonic()
            res = validate(home, repo, mems, rec)
            b = time.monotonic()
            results.append((a, b, rec.claims[0], res))
    finally:
        stop.set()
        t.join(timeout=30)
        repo.git("checkout", "--", ".")
    answered = 0
    for a, b, cur, res in results:
        obs = observations(res)
        if {(o[2], o[3]) for o in obs} == {("unknown", "racing")}:
            continue
        assert all(o[3] != "racing" for o in obs)
        answered += 1
        claimed = (cur.state.dirty_fingerprint if cur.state else None, cur.head)
        alive = [(fp, head) for i, (began, _, fp, head) in enumerate(history)
                 if began <= b and (i + 1 == len(history) or history[i + 1][1] >= a)]
        spans = [(round(bg, 3), round(history[i + 1][1], 3) if i + 1 < len(history) else None)
                 for i, (bg, _, fp, head) in enumerate(history) if (fp, head) == claimed]
        assert claimed in alive, f"a read answered for a state that did not exist while it ran: {a:.3f}-{b:.3f} {spans}"

        class Fixed:  # exactly the claimed state, nothing moves
            def read(self, repo_path, home, at=None, cur=cur):
                return cur

            def moved(self, c):
                return False

        assert obs == observations(validate(home, repo, mems, Fixed()))
    assert answered >= 1  # the property was tested, not only the racing branch
