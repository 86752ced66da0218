"""The one module that knows Dask (``pip install citegraph[batch]``): partitions of a batch
run as ``dask.distributed`` tasks, one per repository, on a ``LocalCluster`` this process
starts (``local[:N]``: N worker processes of one thread) or on the user's scheduler (an
address). Nothing else in citegraph imports Dask.

A task that raises is retried by Dask (``retries``); a task whose worker dies is
rescheduled by the scheduler on another worker (up to ``distributed.scheduler.
allowed-failures`` deaths). A task that still fails is reported for its repository — never
a silent gap. On a terminal, Dask's progress bar shows on stderr."""

from __future__ import annotations

import contextlib
import logging
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from citegraph.indexer.errors import CitegraphError
from citegraph.memory.batch.partition import PartitionTask

# The clusters ``local[:N]`` starts: no statistical profiler (a stack sample of the running
# task every 10 ms, for a dashboard these clusters do not serve), and the periodic loops of
# each scheduler, nanny and worker process slowed from every 20 ms (event-loop tick), 100 ms
# (memory monitor) and 500 ms (system monitor) — on a machine whose cores the workers fill,
# each wake takes the GIL from a running task (bench/RESULTS.md, "Stop 32").
LOCAL_CLUSTER_CONFIG = {"distributed.worker.profile.enabled": False,
                        "distributed.admin.tick.interval": "1s",
                        "distributed.worker.memory.monitor-interval": "1s",
                        "distributed.admin.system-monitor.interval": "5s"}


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise CitegraphError("batch validation on Dask needs the batch extra (dask[distributed])",
                             'pip install "citegraph[batch]", or pass --scheduler inline', code=3) from None
    return distributed


@contextlib.contextmanager
def local_cluster(workers: int) -> Iterator[Any]:
    """A ``LocalCluster`` of ``workers`` single-threaded worker processes (its
    ``scheduler_address`` is what ``--scheduler`` attaches to), run with
    ``LOCAL_CLUSTER_CONFIG``. A user's own cluster keeps its own settings."""
    import dask

    distributed = _distributed()
    with dask.config.set(LOCAL_CLUSTER_CONFIG):  # the nannies hand it to their workers
        cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                           dashboard_address=None, silence_logs=logging.ERROR)
    try:
        yield cluster
    finally:
        cluster.close()


@contextlib.contextmanager
def client_for(scheduler: str, workers: int | None) -> Iterator[Any]:
    """A Dask client: of a ``LocalCluster`` of ``workers`` processes started here (when
    ``workers`` is given), else attached to the scheduler at ``scheduler``."""
    distributed = _distributed()
    if workers is not None:
        with local_cluster(workers) as cluster, distributed.Client(cluster) as client:
            yield client
        return
    try:
        client = distributed.Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise CitegraphError(f"no Dask scheduler answers at {scheduler} ({exc})",
                             "start one (dask scheduler) or pass --scheduler local[:N]", code=3) from None
    with client:
        yield client


def run(tasks: list[PartitionTask], fn: Callable[[PartitionTask], dict[str, Any]], scheduler: str,
        workers: int | None, retries: int, progress: bool = False) -> list[tuple[str, dict[str, Any] | None, str | None]]:
    """(repository id, result or None, error or None) for every task, in task order."""
    distributed = _distributed()
    run_id = uuid.uuid4().hex[:12]  # keys of this run only: a scheduler may still hold another run's
    with client_for(scheduler, workers) as client:
        futures = [client.submit(fn, t, retries=retries, pure=False,
                                 key=f"validate-partition-{t.repository_id}-{run_id}") for t in tasks]
        if progress and futures:
            with contextlib.redirect_stdout(sys.stderr):
                distributed.progress(futures, multi=False)
        # Results are fetched as tasks finish, while the workers go on (one result at a time
        # after the last task, 1,000 round trips, left the workers idle meanwhile).
        got: dict[str, tuple[dict[str, Any] | None, str | None]] = {}
        for f, res in distributed.as_completed(futures, with_results=True, raise_errors=False):
            if f.status == "finished":
                got[f.key] = (res, None)
            elif f.status == "error":
                exc = res[1] if isinstance(res, tuple) and len(res) == 3 else f.exception()
                got[f.key] = (None, f"{type(exc).__name__}: {exc}")
            else:
                got[f.key] = (None, f"the task ended {f.status}")
        return [(t.repository_id, *got.get(f.key, (None, f"the task ended {f.status}")))
                for t, f in zip(tasks, futures, strict=True)]
