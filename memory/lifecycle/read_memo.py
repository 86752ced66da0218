"""What a long-running process (the resident service) keeps between requests so that a
request that changes nothing opens no memory store (issue 21: "a request to the service
does not reopen the memory store or rewrite the observation cache when nothing changed").

- Observations: deterministic for (snapshot id, citation id) (SPEC §6.5; snapshots are
  immutable), so those the process has computed or read are kept (bounded) and a request
  asks the store only for the pairs it does not hold.
- Memory selections (the memories a ``validate`` names): kept with the store file's
  fingerprint taken *before* the read — the ``stat`` of the database and its write-ahead
  log (inode, size, mtime, ctime). Any committed write, by this process or another, grows
  or replaces one of them, so an unchanged fingerprint means the selection still holds; a
  changed one (or a failed stat) means the store is read again.

Off unless the process turns it on (``enable``, with ``MemoryStore.keep_open_between_calls``):
a one-shot command reads the store as before.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

from citegraph.graph.store import Home
from citegraph.memory.lifecycle.keys_sidecar import store_fingerprint
from citegraph.validator.model import Observation

MAX_OBSERVATIONS = 200_000
MAX_SELECTIONS = 64

_lock = threading.Lock()
_enabled = False
_observations: dict[tuple[str, str], Observation] = {}
_selections: dict[tuple[str, Hashable], tuple[tuple, Any]] = {}


def enable(on: bool) -> None:
    """Keep (or stop keeping, and forget) what requests read: the service's start and close."""
    global _enabled
    with _lock:
        _enabled = on
        if not on:
            _observations.clear()
            _selections.clear()


def enabled() -> bool:
    return _enabled


def fingerprint(home: Home) -> tuple | None:
    """The memory store file's identity now (None: it cannot be told, read the store)."""
    return store_fingerprint(home.memory_db)


def selection(home: Home, key: Hashable) -> tuple[tuple | None, Any]:
    """(fingerprint now, the selection kept under ``key`` if the store is unchanged since
    it was read, else None). Pass the fingerprint to ``keep`` after reading the store."""
    fp = fingerprint(home)
    if fp is None or not _enabled:
        return fp, None
    with _lock:
        kept = _selections.get((str(home.root), key))
    return fp, (kept[1] if kept is not None and kept[0] == fp else None)


def keep(home: Home, key: Hashable, fp: tuple | None, value: Any) -> None:
    """Keep ``value`` as read from the store whose fingerprint was ``fp`` before the read."""
    if fp is None or not _enabled:
        return
    with _lock:
        if len(_selections) >= MAX_SELECTIONS:
            _selections.clear()
        _selections[(str(home.root), key)] = (fp, value)


def observations(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], Observation]:
    """The kept observations among ``pairs`` ((snapshot id, citation id))."""
    if not _enabled:
        return {}
    with _lock:
        return {p: o for p in pairs if (o := _observations.get(p)) is not None}


def keep_observations(items: dict[tuple[str, str], Observation]) -> None:
    if not _enabled or not items:
        return
    with _lock:
        if len(_observations) + len(items) > MAX_OBSERVATIONS:
            _observations.clear()
        _observations.update(items)
