"""The memory store used by many threads of one process (the service, the MCP server):
one shared connection, read-only calls side by side, read-write calls one at a time. A
fresh store's first uses race on nothing; every write lands; nothing is reported damaged."""

from __future__ import annotations

import threading

from citegraph.memory.lifecycle.store import MemoryStore


def test_threads_share_the_store(home):
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def worker(k: int) -> None:
        try:
            start.wait()
            for i in range(10):
                if (k + i) % 3 == 0:
                    with MemoryStore.open(home, read_only=True) as ms:
                        ms.load(limit=5)
                else:
                    with MemoryStore.open(home) as ms:
                        ms.remember(f"claim {k}-{i}", project="p", topic=f"t{k}-{i}")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    expected = sum(1 for k in range(8) for i in range(10) if (k + i) % 3 != 0)
    with MemoryStore.open(home, read_only=True) as ms:
        assert ms.con.execute("SELECT count(*) FROM memories").fetchall()[0][0] == expected


def test_a_reader_nested_in_a_writer_of_the_same_thread(home):
    with MemoryStore.open(home) as ms:
        ms.remember("outer", project="p", topic="outer")
        with MemoryStore.open(home, read_only=True) as inner:
            assert [m.topic for m in inner.load()] == ["outer"]
