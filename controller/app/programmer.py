"""One worker per switch that keeps it programmed with the controller's latest intent.

Requests coalesce: however many link events arrive while a write is under way, the worker then
programs once, with the intent current at that moment. Writes to one switch never overlap, and a
slow switch never delays the others. A failed program is retried with a read-back (the cached
view of the switch may be wrong) after a growing delay; a switch that is not ours to program
(channel down, backup role) is left until the southbound reports it back.

Each intent carries a generation number; waiters (failover timing) learn when a switch holds
a given generation or a newer one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from controller.intent.model import SwitchIntent
from controller.southbound.interface import ProgramResult

ProgramCall = Callable[[SwitchIntent, bool], Awaitable[ProgramResult]]
IntentSource = Callable[[], tuple[int, SwitchIntent]]
ResultSink = Callable[[ProgramResult, int], None]


@dataclass(frozen=True)
class RetryPolicy:
    """Delay before retrying a failed program: doubles from ``initial_s`` up to ``max_s``."""

    initial_s: float = 0.2
    max_s: float = 5.0

    def next_delay(self, current: float | None) -> float:
        """The delay after ``current`` (None: the first retry)."""
        return self.initial_s if current is None else min(current * 2, self.max_s)


class SwitchProgrammer:
    """Programs one switch on request (see the module docs)."""

    def __init__(
        self,
        switch: str,
        intent_source: IntentSource,
        program: ProgramCall,
        on_result: ResultSink,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.switch = switch
        self._intent_source = intent_source
        self._program = program
        self._on_result = on_result
        self._retry = retry or RetryPolicy()
        self._wake = asyncio.Event()
        self._read_back = False
        self._retry_delay: float | None = None
        self._retry_handle: asyncio.TimerHandle | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        #: The newest intent generation the switch is known to hold (-1: none yet).
        self.applied_generation = -1

    def request(self, *, read_back: bool = False) -> None:
        """Program the switch with the latest intent soon; ``read_back`` forces a read first."""
        self._read_back = self._read_back or read_back
        self._wake.set()

    def reset(self) -> None:
        """The switch's state is unknown again (reconnected, restarted): it holds no generation
        until programmed, and pending retries are dropped."""
        self.applied_generation = -1
        self._retry_delay = None
        if self._retry_handle is not None:
            self._retry_handle.cancel()
            self._retry_handle = None

    async def wait_applied(self, generation: int) -> None:
        """Return once the switch holds ``generation`` or a newer one."""
        if self.applied_generation >= generation:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((generation, future))
        await future

    async def run(self) -> None:
        """Serve requests until cancelled."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            read_back, self._read_back = self._read_back, False
            generation, intent = self._intent_source()
            try:
                result = await self._program(intent, read_back)
            except Exception as error:  # a southbound bug must not end this switch's worker
                result = ProgramResult(
                    self.switch, read_back=read_back, error=f"internal: {error!r}"
                )
            self._on_result(result, generation)
            if result.ok:
                self._retry_delay = None
                self._applied(generation)
            elif result.ours:
                self._schedule_retry()

    def _applied(self, generation: int) -> None:
        self.applied_generation = max(self.applied_generation, generation)
        still_waiting = []
        for wanted, future in self._waiters:
            if wanted <= self.applied_generation:
                if not future.done():
                    future.set_result(None)
            else:
                still_waiting.append((wanted, future))
        self._waiters = still_waiting

    def _schedule_retry(self) -> None:
        self._retry_delay = self._retry.next_delay(self._retry_delay)
        if self._retry_handle is not None:
            self._retry_handle.cancel()
        self._retry_handle = asyncio.get_running_loop().call_later(
            self._retry_delay, self._retry_now
        )

    def _retry_now(self) -> None:
        self._retry_handle = None
        self.request(read_back=True)
