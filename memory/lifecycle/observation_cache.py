"""The memory store as the validation pipeline's observation cache (SPEC §6.5: observations
are deterministic for (snapshot id, citation id)).

Held in memory while validation runs, so the store need not stay open (a brief closes it
before validating): preloaded with one query for the (snapshot, citation) pairs a plan
wants, new observations flushed back afterwards. Thread-safe for the pipeline's repository
threads.
"""

from __future__ import annotations

import threading

import pyarrow as pa

from citegraph.memory.lifecycle import read_memo
from citegraph.memory.lifecycle.store import MemoryStore
from citegraph.validator.model import Observation, Observed


class StoreCache:
    def __init__(self) -> None:
        self.known: dict[tuple[str, str], Observation] = {}
        self.new: dict[str, list[Observation]] = {}
        self._lock = threading.Lock()

    def get_many(self, snapshot_id: str, citation_ids: list[str]) -> dict[str, Observation]:
        return {c: self.known[(snapshot_id, c)] for c in citation_ids if (snapshot_id, c) in self.known}

    def put_many(self, snapshot_id: str, observations: list[Observation]) -> None:
        with self._lock:
            self.new.setdefault(snapshot_id, []).extend(observations)

    def prefill(self, wanted: dict[str, list[str]]) -> dict[str, list[str]]:
        """Take what this process already holds (memory/lifecycle/read_memo.py: the service);
        the pairs left for ``load`` to read from the store."""
        pairs = [(sid, cid) for sid, cids in wanted.items() for cid in cids]
        self.known.update(read_memo.observations(pairs))
        left: dict[str, list[str]] = {}
        for sid, cid in pairs:
            if (sid, cid) not in self.known:
                left.setdefault(sid, []).append(cid)
        return left

    def remember(self) -> None:
        """Keep what this validation read and computed for the process's next requests."""
        if read_memo.enabled():
            read_memo.keep_observations({**self.known, **{(sid, o.citation_id): o for sid, obs in self.new.items()
                                                          for o in obs}})

    def load(self, ms: MemoryStore, wanted: dict[str, list[str]]) -> None:
        """One query for every (snapshot, citation) pair (``Plan.wanted()``)."""
        pairs = [(sid, cid) for sid, cids in wanted.items() for cid in cids]
        if not pairs:
            return
        ms.con.register("_want", pa.table({"s": [p[0] for p in pairs], "c": [p[1] for p in pairs]}))
        try:
            rows = ms.con.execute(
                "SELECT o.snapshot_id, o.citation_id, o.outcome, o.reason, o.path, o.start_line, o.end_line, "
                "o.handle FROM observations o JOIN _want w ON o.snapshot_id = w.s AND o.citation_id = w.c"
            ).fetchall()
        finally:
            ms.con.unregister("_want")
        for sid, cid, outcome, reason, path, start, end, handle in rows:
            observed = Observed(path, start, end, handle) if path else None
            self.known[(sid, cid)] = Observation(cid, outcome, reason, observed)

    def flush(self, ms: MemoryStore) -> int:
        """Write the new observations to the store; how many."""
        n = 0
        for sid, obs in self.new.items():
            ms.put_many(sid, obs)
            n += len(obs)
        self.new.clear()
        return n
