"""Batch validation on Dask (issue 24, acceptance 2; SPEC §22; docs/checkpoints.md): on a real
``LocalCluster`` over 20 generated repositories the results equal ``validate --at`` per
repository; a worker killed mid-job does not lose or change a result; a partition that always
fails is reported for its repository and the exit code says so; a failure is retried."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import cloudpickle
import pytest
from distributed import LocalCluster

from citegraph import schemas
from citegraph.bench.batch_repos import generate
from citegraph.graph.store import Home
from citegraph.indexer import gitrepo
from citegraph.memory import api
from citegraph.memory.batch.partition import validate_partition
from citegraph.memory.batch.run import run_batch
from citegraph.memory.exchange.checkpoints import export_checkpoint

REPOS = 20
MEMORIES = 8

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the injected task functions below


def cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CITEGRAPH_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "citegraph.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("batch")
    home = Home.open(base / "home")
    repos = generate(home, base / "repos", REPOS, MEMORIES, seed=7)
    ckpt = base / "ckpt"
    report = export_checkpoint(home, str(ckpt), all_repos=True)
    assert len(report.repositories) == REPOS and not report.refused
    return {"base": base, "home": home, "repos": repos, "ckpt": ckpt}


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c:
        yield c


def expected(world) -> dict[str, dict[str, dict]]:
    """repository id → memory id → ``validate --at`` (the checked commit) of its memories."""
    out: dict[str, dict[str, dict]] = {}
    for r in world["repos"]:
        rep = api.validate_memories(world["home"], repo_paths=[r.path], at=r.checked_commit).to_json()
        for m in rep["memories"]:
            if any(c["reason"] == "out-of-scope" for c in m["citations"]):
                continue  # another repository's memory
            out.setdefault(r.path, {})[m["id"]] = m
        assert len(out[r.path]) == MEMORIES
    return out


def by_repository(lines: list[dict], world) -> dict[str, dict[str, dict]]:
    ids = {gitrepo.repository_identity(gitrepo.open_repository(r.path)).repository_id: r.path
           for r in world["repos"]}
    got: dict[str, dict[str, dict]] = {}
    for m in lines:
        m = dict(m)
        path = ids[m.pop("repository_id")]
        m.pop("snapshot_id", None)
        m.pop("commit", None)
        got.setdefault(path, {})[m["id"]] = m
    return got


def test_local_cluster_equals_validate_at_per_repository(world, tmp_path):
    out = tmp_path / "out"
    args = ["batch", "validate", "--parquet", str(world["ckpt"]), "--scheduler", "local:2", "--out", str(out),
            "--json"]
    for r in world["repos"]:
        args += ["--repo", r.path]
    res = cli(world["home"].root, *args)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    errors = list(schemas.validator("batch-validate").iter_errors(summary))
    assert not errors, errors[0].message
    assert summary["scheduler"] == "local:2" and summary["validated"] == REPOS and not summary["failed"]
    assert summary["memories"] == REPOS * MEMORIES
    lines = [json.loads(x) for x in (out / "memories.jsonl").read_text().splitlines()]
    want = expected(world)
    assert by_repository(lines, world) == want
    mix = summary["summary"]
    assert all(mix[k] > 0 for k in ("exact", "relocated", "changed", "deleted")), mix
    import pyarrow.parquet as pq

    rows = pq.read_table(out / "citations.parquet").to_pydict()
    assert len(rows["citation_id"]) == summary["citations"]
    assert {p["project"] for p in summary["by_project"]} == {"payments", "search", "infra"}


def test_without_clones_answers_are_equal_or_unknown(world):
    """No clone at hand: evidence that needs file bytes is unknown, never fresher."""
    report = run_batch(str(world["ckpt"]), scheduler="inline")
    want = expected(world)
    got = by_repository(report.memory_lines(), world)
    differ = 0
    for path, mems in want.items():
        for mid, m in mems.items():
            for a, b in zip(m["citations"], got[path][mid]["citations"], strict=True):
                if a["outcome"] != b["outcome"]:
                    assert b["outcome"] == "unknown", (a, b)
                    differ += 1
    assert differ > 0  # the spans whose file changed could not be read


def stall_once(marker_dir: str, victim: str):
    """A partition function that, on its first attempt for ``victim``, records its pid and
    stalls (until the test kills its worker); every other call is the real one."""
    def fn(task):
        if task.repository_id == victim:
            pid_file = Path(marker_dir) / "stalled.pid"
            if not pid_file.exists():
                pid_file.write_text(str(os.getpid()))
                time.sleep(600)
        return validate_partition(task)
    return fn


def repo_args(world) -> list[str]:
    return [r.path for r in world["repos"]]


def test_a_worker_killed_mid_job_loses_nothing(world, cluster, tmp_path):
    victim = world["home"].repo_ids()[3]
    done: list = []
    job = threading.Thread(target=lambda: done.append(run_batch(
        str(world["ckpt"]), scheduler=cluster.scheduler_address, repos=repo_args(world),
        partition_fn=stall_once(str(tmp_path), victim))))
    job.start()
    pid_file = tmp_path / "stalled.pid"
    deadline = time.monotonic() + 300
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), "the stalled task never started"
    time.sleep(0.2)
    os.kill(int(pid_file.read_text()), signal.SIGKILL)  # the worker process running the task
    job.join(timeout=600)
    assert done, "the job did not complete"
    report = done[0]
    assert not report.failed
    assert by_repository(report.memory_lines(), world) == expected(world)


def fail_always(victim: str):
    def fn(task):
        if task.repository_id == victim:
            raise RuntimeError("this partition always fails")
        return validate_partition(task)
    return fn


def fail_first(marker_dir: str, victim: str):
    def fn(task):
        marker = Path(marker_dir) / "failed-once"
        if task.repository_id == victim and not marker.exists():
            marker.write_text("x")
            raise RuntimeError("a passing failure")
        return validate_partition(task)
    return fn


def test_a_partition_that_always_fails_is_reported(world, cluster, tmp_path):
    victim = world["home"].repo_ids()[5]
    report = run_batch(str(world["ckpt"]), scheduler=cluster.scheduler_address, repos=repo_args(world),
                       partition_fn=fail_always(victim), out=str(tmp_path / "out"))
    assert [(o.repository_id, o.error) for o in report.failed] == \
        [(victim, "RuntimeError: this partition always fails")]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["failed"] == [{"repository_id": victim, "error": "RuntimeError: this partition always fails"}]
    assert summary["validated"] == REPOS - 1
    row = next(r for r in summary["by_repository"] if r["repository_id"] == victim)
    assert row["state"] == "failed" and row["memories"] == 0
    # a failure that passes is retried by Dask and leaves no trace
    again = run_batch(str(world["ckpt"]), scheduler=cluster.scheduler_address, repos=repo_args(world),
                      partition_fn=fail_first(str(tmp_path), victim))
    assert (tmp_path / "failed-once").exists() and not again.failed


def test_cli_exit_code_says_a_repository_failed(world, tmp_path):
    """A damaged partition (one byte) fails every attempt: exit 1, the others validated."""
    import shutil

    ck = tmp_path / "ck"
    shutil.copytree(world["ckpt"], ck)
    victim = sorted(ck.glob("repository_id=*"))[2]
    p = victim / "symbols.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 1
    p.write_bytes(bytes(data))
    res = cli(world["home"].root, "batch", "validate", "--parquet", str(ck), "--scheduler", "inline", "--out",
              str(tmp_path / "out"), "--json")
    assert res.returncode == 1, res.stderr
    summary = json.loads(res.stdout)
    rid = victim.name.split("=", 1)[1]
    assert [f["repository_id"] for f in summary["failed"]] == [rid]
    assert "does not match its blake3 digest" in summary["failed"][0]["error"]
    assert summary["validated"] == REPOS - 1


def test_the_engine_stays_at_the_edge():
    """Only memory/batch/dask_engine.py imports Dask; the rest of the product — the batch
    driver and partition function included — runs without importing it."""
    root = Path(__file__).resolve().parents[1]
    importers = []
    for p in root.rglob("*.py"):
        rel = p.relative_to(root)
        if rel.parts[0] in (".venv", "tests", "bench", "build") or "site-packages" in rel.parts:
            continue
        text = p.read_text(encoding="utf-8")
        if re.search(r"^\s*(?:import|from)\s+(?:dask|distributed)\b", text, re.M):
            importers.append(str(rel))
    assert importers == ["memory/batch/dask_engine.py"]
    code = ("import sys, citegraph.cli.main, citegraph.memory.api, citegraph.cli.batch_cmds, "
            "citegraph.memory.batch.run, citegraph.memory.batch.partition, citegraph.memory.exchange.checkpoints; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def _worker_settings() -> tuple:
    import dask

    return (dask.config.get("distributed.worker.profile.enabled"), dask.config.get("distributed.admin.tick.interval"))


def test_a_local_cluster_started_here_runs_its_workers_without_dasks_profiler():
    """Dask samples each task's stack every 10 ms for a dashboard the cluster we start does
    not serve, and wakes every 20 ms to watch its event loop; the workers of ``local[:N]``
    run without the one and with a 1 s tick (and this process's config is left as it was)."""
    import dask

    from citegraph.memory.batch import dask_engine

    before = dask.config.get("distributed.worker.profile.enabled")
    with dask_engine.client_for("local:1", 1) as client:
        assert client.submit(_worker_settings, pure=False).result() == (False, "1s")
        assert list(client.run(lambda dask_worker: len(dask_worker.profile_history)).values()) == [0]
    assert dask.config.get("distributed.worker.profile.enabled") == before
