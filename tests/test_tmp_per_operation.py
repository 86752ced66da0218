"""Issue 20, item 10: temporaries are named per operation, not per process. A failed
build's cleanup used to delete every ``tmp/*.<pid>.*`` file, including the one a
compaction thread of the same process (the service) was writing: the compaction then
failed ("[Errno 2]") and deltas stayed uncompacted under churn. Two threads writing the
same catalog file shared one temporary name too."""

from __future__ import annotations

import json
import os
import threading

import pytest

from citegraph.graph.build_hooks import BuildHooks
from citegraph.graph.compaction import compact
from citegraph.graph.snapshot_builder import build_snapshot
from citegraph.graph.store import atomic_write_json
from citegraph.indexer.errors import CitegraphError

WAIT_S = 60


def source(i: int, body: str = "return 1") -> str:
    return f"class K{i}:\n    def m(self):\n        {body}\n\n\ndef f{i}():\n    return {i}\n"


class Boom(Exception):
    pass


def test_a_failed_build_leaves_a_concurrent_compaction_alone(repo, home):
    for i in range(8):
        repo.write(f"pkg/m{i}.py", source(i))
    repo.commit("c1")
    build_snapshot(repo.root, home, jobs=1)
    repo.write("pkg/m1.py", source(1, "return 2"))
    repo.commit("c2")
    s2 = build_snapshot(repo.root, home, jobs=1)
    rs = home.repo(s2.repository_id)
    assert rs.entry(s2.snapshot_id)["layout"] == "delta"
    tmp_dir = rs.root / "tmp"

    written, go = threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def stall(stage: str) -> None:
        if stage == "compact-publish":  # its file is written in tmp/, not yet published
            seen["files"] = sorted(p.name for p in tmp_dir.iterdir() if f".{os.getpid()}." in p.name)
            written.set()
            assert go.wait(WAIT_S)

    def run() -> None:
        try:
            seen["done"] = compact(rs, s2.snapshot_id, repo_path=str(repo.root), hooks=BuildHooks(stall=stall))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            seen["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        assert written.wait(WAIT_S), seen
        assert len(seen["files"]) >= 1, seen  # the compaction's temporary
        # Meanwhile a build of the same process fails after writing its own temporary.
        repo.write("pkg/m2.py", source(2, "return 3"))
        repo.commit("c3")
        failed_tmp: list[str] = []

        def fail(stage: str) -> None:
            if stage == "publish":  # its file is written in tmp/, not yet published
                failed_tmp.extend(p.name for p in tmp_dir.iterdir()
                                  if f".{os.getpid()}." in p.name and p.name not in seen["files"])
                raise Boom()

        with pytest.raises(Boom):
            build_snapshot(repo.root, home, jobs=1, hooks=BuildHooks(stall=fail))
        assert failed_tmp, "the failed build wrote no temporary of its own"
        left = {p.name for p in tmp_dir.iterdir()}
        assert not (set(failed_tmp) & left)  # its own are gone ...
        assert set(seen["files"]) <= left  # ... the compaction's are not
    finally:
        go.set()
        t.join(WAIT_S)
    assert "error" not in seen, seen.get("error")
    assert seen["done"] is not None and seen["done"]["layout"] == "full"
    assert rs.entry(s2.snapshot_id)["layout"] == "full"
    # nothing of either is left behind, and the next build works
    assert [p.name for p in tmp_dir.iterdir() if f".{os.getpid()}." in p.name] == []
    s3 = build_snapshot(repo.root, home, jobs=1)
    assert rs.entry(s3.snapshot_id)["state"] == "ready"


def test_threads_writing_one_catalog_file(tmp_path):
    """Each write has its own temporary: no thread moves or truncates another's."""
    path = tmp_path / "entry.json"
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(150):
                atomic_write_json(path, {"writer": n, "i": i, "pad": "x" * 2000})
        except (OSError, CitegraphError) as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert errors == []
    assert json.loads(path.read_text())["i"] == 149
    assert [p.name for p in tmp_path.iterdir()] == ["entry.json"]
