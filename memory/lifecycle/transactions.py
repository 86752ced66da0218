"""All-or-nothing imports: many ``MemoryStore`` writes inside one DuckDB transaction."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from citegraph.memory.lifecycle.store import MemoryStore


class OuterTx:
    """A connection proxy that lets ``MemoryStore.remember`` run inside one outer
    transaction (its own BEGIN/COMMIT/ROLLBACK become no-ops)."""

    _TX = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|END)\b", re.I)

    def __init__(self, con: Any) -> None:
        self._con = con

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        if self._TX.match(sql):
            return self._con
        return self._con.execute(sql, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


@contextmanager
def one_transaction(ms: MemoryStore) -> Iterator[MemoryStore]:
    """A view of ``ms`` whose writes commit together at the end, or not at all."""
    with ms.transaction():
        yield MemoryStore(OuterTx(ms.con), ms.path)  # type: ignore[arg-type]
