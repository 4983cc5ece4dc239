"""Registered memory regions: what a remote peer may write into, and the checks on each write.

MRC only does RDMA writes, so this is the receiver's whole exposure: every data packet names an
R_Key and a virtual address, and is placed only if the key names a registered region and the
bytes fit inside it, and only through a connection of the region's protection domain (``pd``:
the host API gives each application's regions and QPs its own, so a peer of one application
cannot write into another's memory with a key it guessed; everything else shares domain 0).
Anything else is refused (and counted by the caller) without touching
memory, so a wrong key or a stray packet can never overwrite a neighbour's buffer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

from agent.core.drops import DropReason

_MAX_VA: Final = (1 << 64) - 1
_MAX_RKEY: Final = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class MemoryRegion:
    """A registered region: writes to ``[va, va + length)`` carrying ``rkey`` land in ``buffer``.

    ``buffer`` is owned by whoever registered it; the core writes into it as packets arrive,
    so a message is readable there once its ``MessageReceived`` event is out. It is a
    ``bytearray`` or a writable byte ``memoryview`` (of a mapped file, say).
    """

    rkey: int
    va: int
    buffer: bytearray | memoryview
    pd: int = 0

    @property
    def length(self) -> int:
        """Size of the region in bytes."""
        return len(self.buffer)


class MemoryTable:
    """The regions of one endpoint, by R_Key."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._regions: dict[int, MemoryRegion] = {}

    def register(self, buffer: bytearray | memoryview, va: int = 0, pd: int = 0) -> MemoryRegion:
        """Expose ``buffer`` for remote writes at virtual addresses ``va`` onwards, to the
        connections of protection domain ``pd``.

        The R_Key is random (and never 0), so a peer cannot write by guessing small numbers.
        """
        if isinstance(buffer, memoryview):
            if buffer.readonly or buffer.format != "B" or not buffer.c_contiguous:
                raise TypeError("register a writable, contiguous byte memoryview")
        elif not isinstance(buffer, bytearray):
            raise TypeError("register a bytearray or memoryview: the core writes in place")
        if not 0 <= va <= _MAX_VA - len(buffer):
            raise ValueError(f"region [{va:#x}, +{len(buffer)}) does not fit a 64-bit address")
        while True:
            rkey = self._rng.randint(1, _MAX_RKEY)
            if rkey not in self._regions:
                break
        region = MemoryRegion(rkey=rkey, va=va, buffer=buffer, pd=pd)
        self._regions[rkey] = region
        return region

    def deregister(self, rkey: int) -> None:
        """Withdraw a region; later writes with its key are refused."""
        if self._regions.pop(rkey, None) is None:
            raise KeyError(f"no region with R_Key {rkey:#x}")

    def region(self, rkey: int) -> MemoryRegion | None:
        """The region ``rkey`` names, if any."""
        return self._regions.get(rkey)

    def check(self, rkey: int, va: int, length: int, pd: int = 0) -> DropReason | None:
        """Why a write of ``length`` bytes at ``va`` with ``rkey`` must be refused, or None."""
        region = self._regions.get(rkey)
        if region is None or region.pd != pd:
            return DropReason.BAD_RKEY
        if va < region.va or va + length > region.va + len(region.buffer):
            return DropReason.OUT_OF_BOUNDS
        return None

    def write(self, rkey: int, va: int, data: bytes, pd: int = 0) -> DropReason | None:
        """Place ``data`` at ``va``; returns the refusal reason instead when it is not allowed."""
        # ``check`` inlined: this runs for every data packet received.
        region = self._regions.get(rkey)
        if region is None or region.pd != pd:
            return DropReason.BAD_RKEY
        start = va - region.va
        end = start + len(data)
        if start < 0 or end > len(region.buffer):
            return DropReason.OUT_OF_BOUNDS
        region.buffer[start:end] = data
        return None

    def read(self, rkey: int, va: int, length: int) -> bytes:
        """A copy of ``length`` bytes at ``va`` in region ``rkey`` (for the application)."""
        region = self._regions.get(rkey)
        refusal = self.check(rkey, va, length, region.pd if region is not None else 0)
        if refusal is not None:
            raise ValueError(
                f"cannot read {length} bytes at {va:#x} with R_Key {rkey:#x}: {refusal.value}"
            )
        region = self._regions[rkey]
        start = va - region.va
        return bytes(region.buffer[start : start + length])
