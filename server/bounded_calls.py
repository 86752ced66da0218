"""Blocking work run off the event loop within a bound: one call at a time per key, a
deadline per call, and a cap on the threads that calls hold.

A Python thread cannot be killed. A call that overruns its deadline is therefore
abandoned, not stopped: the caller gets ``CallTimeout`` at the deadline while the thread
keeps its key's lane and one of the global slots until it returns. Later calls for that
key wait for the lane (within their own deadline) instead of starting another thread on
the same stuck repository, so at most one thread is ever stuck per key, and at most
``max_threads`` threads exist at all; calls for other keys are never blocked by it.
Threads are daemons: a stuck one never keeps the process alive.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from contextlib import suppress
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

T = TypeVar("T")


async def run_in_thread(fn: Callable[[], T], *, name: str = "citegraph-worker",
                        on_done: Callable[[], None] | None = None) -> T:
    """Run ``fn`` in a new daemon thread and await its result.

    Cancelling the caller abandons the thread (it runs on); ``on_done`` runs on the event
    loop when the thread returns, whether or not anyone still waits for it.
    """
    token = anyio.lowlevel.current_token()
    done = anyio.Event()
    box: dict[str, Any] = {}

    def finish() -> None:
        try:
            if on_done is not None:
                on_done()
        finally:
            done.set()

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the awaiting task
            box["error"] = exc
        finally:
            # The loop may be gone (the process is ending): nothing is left to release.
            with suppress(Exception):
                anyio.from_thread.run_sync(finish, token=token)

    threading.Thread(target=work, name=name, daemon=True).start()
    await done.wait()
    if "error" in box:
        raise box["error"]
    return box["value"]


class CallTimeout(Exception):
    """A call did not finish within its deadline.

    ``stage`` says where the time went: ``"lane"`` (an earlier call for ``key`` was still
    running), ``"slot"`` (all ``max_threads`` threads were busy) or ``"running"`` (the
    call itself; its thread runs on and holds ``key``'s lane until it returns).
    """

    def __init__(self, stage: str, key: str | None, seconds: float, max_threads: int) -> None:
        self.stage = stage
        self.key = key
        self.seconds = seconds
        self.max_threads = max_threads
        super().__init__(f"{stage} timeout after {seconds:g} s ({key})")


class _Lane:
    """One key's serialisation: a semaphore and how many calls hold or wait for it."""

    __slots__ = ("sem", "users")

    def __init__(self) -> None:
        self.sem = anyio.Semaphore(1)
        self.users = 0


class Lanes:
    """Per-key serialisation with a deadline and a global thread cap (see the module doc)."""

    def __init__(self, max_threads: int = 8) -> None:
        if max_threads < 1:
            raise ValueError("max_threads must be at least 1")
        self.max_threads = max_threads
        self._slots = anyio.Semaphore(max_threads)
        self._lanes: dict[str, _Lane] = {}

    def busy_threads(self) -> int:
        """Threads currently held by calls (running, or abandoned after their deadline)."""
        return self.max_threads - self._slots.value

    def __len__(self) -> int:
        """Keys with a call holding or waiting for their lane (idle keys are forgotten)."""
        return len(self._lanes)

    def busy_keys(self) -> list[str]:
        return sorted(k for k, lane in self._lanes.items() if lane.sem.value == 0)

    async def run(self, keys: Iterable[str], fn: Callable[[], T], timeout: float) -> T:
        """Run ``fn`` in a thread once every lane of ``keys`` and a slot are free.

        Lanes are taken in sorted order, so calls naming several keys never deadlock.
        Raises ``CallTimeout`` when ``timeout`` seconds pass first.
        """
        ordered = sorted(set(keys))
        entered: list[tuple[str, _Lane]] = []  # lanes this call holds or waits for
        acquired: list[_Lane] = []
        slot = [False]
        started = False

        def release() -> None:
            for lane in acquired:
                lane.sem.release()
            acquired.clear()
            for key, lane in entered:
                lane.users -= 1
                if lane.users == 0 and self._lanes.get(key) is lane:
                    del self._lanes[key]  # nobody holds or waits: forget the key (bounded memory)
            entered.clear()
            if slot[0]:
                slot[0] = False
                self._slots.release()

        stage, waiting_for = "lane", None
        try:
            with anyio.move_on_after(timeout):
                for key in ordered:
                    waiting_for = key
                    lane = self._lanes.get(key) or self._lanes.setdefault(key, _Lane())
                    lane.users += 1
                    entered.append((key, lane))
                    await lane.sem.acquire()
                    acquired.append(lane)
                stage, waiting_for = "slot", None
                await self._slots.acquire()
                slot[0] = True
                stage, waiting_for = "running", ",".join(ordered) or None
                started = True
                return await run_in_thread(fn, name=f"citegraph-call {waiting_for}", on_done=release)
            # Only the deadline gets here (a TimeoutError raised by fn itself propagates).
            raise CallTimeout(stage, waiting_for, timeout, self.max_threads)
        finally:
            if not started:
                release()
