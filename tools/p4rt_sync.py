"""A synchronous face on a finsy `Switch`, for PTF tests, benchmarks and scripts.

PTF tests are plain synchronous unittest methods; finsy is asyncio. This wrapper runs one event loop
in a daemon thread per switch connection and submits finsy calls to it, so a test can write
`self.sw.insert([...])` and get the result or the P4Runtime error back in its own thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar, cast

import finsy as fy

T = TypeVar("T")


class SyncSwitch:
    """One P4Runtime connection (primary, pipeline pushed) driven from synchronous code."""

    def __init__(
        self,
        address: str,
        p4info: Path,
        p4blob: Path,
        *,
        device_id: int = 1,
        election_id: int = 10,
        force_pipeline: bool = False,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="p4rt-loop"
        )
        self._thread.start()
        options = fy.SwitchOptions(
            p4info=p4info,
            p4blob=p4blob,
            device_id=device_id,
            initial_election_id=election_id,
            p4force=force_pipeline,
        )
        self.switch = fy.Switch("sw", address, options)
        self._packets: asyncio.Queue[fy.P4PacketIn] | None = None
        self._call(self.switch.__aenter__(), timeout=60)

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    @property
    def p4info(self) -> fy.P4Schema:
        return self.switch.p4info

    def write(self, updates: Iterable[Any]) -> None:
        self._call(self.switch.write(list(updates)))

    def insert(self, entities: Iterable[Any]) -> None:
        self._call(self.switch.insert(list(entities)))

    def modify(self, entities: Iterable[Any]) -> None:
        self._call(self.switch.modify(list(entities)))

    def delete(self, entities: Iterable[Any]) -> None:
        self._call(self.switch.delete(list(entities)))

    def read(self, entity: Any) -> list[Any]:
        async def collect() -> list[Any]:
            # finsy declares read()'s overloads as coroutines; at run time it is an async generator.
            entities = cast(AsyncIterator[Any], self.switch.read(entity))
            return [e async for e in entities]

        return self._call(collect())

    def counter(self, name: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of one counter cell."""
        entries = self.read(fy.P4CounterEntry(name, index=index))
        if not entries:
            return (0, 0)
        return (entries[0].packet_count, entries[0].byte_count)

    def packet_out(self, payload: bytes, egress_port: int) -> None:
        self.write([fy.P4PacketOut(payload, egress_port=egress_port, _pad=0)])

    def start_packet_in(self) -> None:
        """Start collecting packet-ins (call before the packets are expected)."""
        queue: asyncio.Queue[fy.P4PacketIn] = asyncio.Queue()

        async def pump() -> None:
            async for pkt in self.switch.read_packets():
                await queue.put(pkt)

        self._packets = queue
        self._call(self._start_task(pump()))

    async def _start_task(self, coro: Coroutine[Any, Any, None]) -> None:
        self._pump = asyncio.get_running_loop().create_task(coro)

    def next_packet_in(self, timeout: float) -> fy.P4PacketIn | None:
        if self._packets is None:
            raise RuntimeError("start_packet_in() first")
        queue = self._packets

        async def get() -> fy.P4PacketIn | None:
            try:
                return await asyncio.wait_for(queue.get(), timeout)
            except TimeoutError:
                return None

        return self._call(get(), timeout=timeout + 5)

    def close(self) -> None:
        try:
            if self._packets is not None:
                self._loop.call_soon_threadsafe(self._pump.cancel)
            self._call(self.switch.__aexit__(None, None, None))
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
