"""What peers may make this host hold: receive memory, per-peer shares, setups and disk.

A peer's hello asks the receiver to set aside a region (a sink's message, a file's size).
Granting every hello let forty peers ask for 1 GiB each and the kernel kill the agent, so a
region is *admitted* against limits before anything is allocated, and its grant is returned
when the session ends:

- ``max_memory``: bytes of memory held for incoming regions, all peers together (sinks; a
  file is written to disk as it arrives and holds no memory of its own);
- ``max_peer_memory``: the same, for one peer address;
- ``max_setups``: side-channel connections between accept and an answered hello, so a flood
  of idle or slow openers cannot hold the listener's slots; one peer address may hold a
  quarter of them;
- ``max_region``: the largest single region;
- free disk in the out-dir, less what admitted files will still write, for files.

A refusal is an ``OverLimitError`` naming the limit, which the peer receives as
``over_limit`` and its command turns into exit code 8.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.io.errors import OverLimitError

#: Share of the memory available at start that receive regions may hold by default.
DEFAULT_MEMORY_SHARE = 0.25
#: Fallback when /proc/meminfo cannot be read: 4 GiB.
_FALLBACK_AVAILABLE = 4 << 30
#: Largest region a peer may ask for by default: 1 GiB (``--max-region``).
DEFAULT_MAX_REGION = 1 << 30
#: Side-channel connections that may be between accept and an answered hello at once.
DEFAULT_MAX_SETUPS = 64
#: Bytes of free disk an admitted file must leave untouched in the out-dir.
DISK_RESERVE = 64 << 20


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int:
    """``MemAvailable`` in bytes (a fixed 4 GiB where the kernel does not say)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return _FALLBACK_AVAILABLE


def default_max_memory() -> int:
    """The default ``--max-receive-memory``: a quarter of the memory available now."""
    return int(available_memory() * DEFAULT_MEMORY_SHARE)


def free_disk(directory: Path) -> int:
    """Bytes an unprivileged writer may still use in ``directory``'s file system."""
    stats = os.statvfs(directory)
    return stats.f_bavail * stats.f_frsize


@dataclass(frozen=True, slots=True)
class ReceiveLimits:
    """The receiver's limits (see the module docstring)."""

    max_memory: int
    max_peer_memory: int
    max_setups: int = DEFAULT_MAX_SETUPS
    max_region: int = DEFAULT_MAX_REGION

    def __post_init__(self) -> None:
        for name in ("max_memory", "max_peer_memory", "max_setups", "max_region"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")

    @classmethod
    def defaults(cls, max_region: int = DEFAULT_MAX_REGION) -> ReceiveLimits:
        """A quarter of available memory in total, half of that per peer."""
        total = default_max_memory()
        return cls(max_memory=total, max_peer_memory=max(1, total // 2), max_region=max_region)


class Grant:
    """Bytes admitted for one region; ``release`` gives them back (once)."""

    __slots__ = ("_budget", "disk", "length", "peer", "released")

    def __init__(self, budget: ReceiveBudget, peer: str, length: int, disk: bool) -> None:
        self._budget = budget
        self.peer = peer
        self.length = length
        self.disk = disk
        self.released = False

    def release(self) -> None:
        """Return the bytes to the budget (no effect the second time)."""
        if not self.released:
            self.released = True
            self._budget._give_back(self)


class ReceiveBudget:
    """Admission against ``ReceiveLimits``, with the counts ``status`` shows."""

    def __init__(self, limits: ReceiveLimits, disk_free: Callable[[Path], int] = free_disk) -> None:
        self.limits = limits
        self._disk_free = disk_free
        self.memory_held = 0
        self.disk_reserved = 0
        self.setups = 0
        self._by_peer: dict[str, int] = {}
        self._setups_by_peer: dict[str, int] = {}
        #: Refusals by limit name, for ``status``.
        self.refused: dict[str, int] = {}

    # --- setups ---------------------------------------------------------------------------

    def begin_setup(self, peer: str) -> None:
        """Count a new side-channel connection from ``peer`` (its IP address);
        ``OverLimitError`` when the slots are full, or when this peer already holds its share
        (a quarter of the slots), so one host opening idle connections cannot lock out the
        others."""
        limits = self.limits
        if self.setups >= limits.max_setups:
            self._refuse(
                "max_setups",
                f"{self.setups} side-channel setups are in progress; this agent allows "
                f"{limits.max_setups} at once (--max-setups)",
            )
        held = self._setups_by_peer.get(peer, 0)
        if held >= self.max_peer_setups:
            self._refuse(
                "max_peer_setups",
                f"{peer} has {held} side-channel setups in progress; one peer may hold "
                f"{self.max_peer_setups} (a quarter of --max-setups)",
            )
        self.setups += 1
        self._setups_by_peer[peer] = held + 1

    @property
    def max_peer_setups(self) -> int:
        """Setups one peer address may hold at once: a quarter of the slots, at least one."""
        return max(1, self.limits.max_setups // 4)

    def end_setup(self, peer: str) -> None:
        """A setup of ``peer`` ended (hello answered, refused, or the connection closed)."""
        self.setups = max(0, self.setups - 1)
        left = self._setups_by_peer.get(peer, 0) - 1
        if left > 0:
            self._setups_by_peer[peer] = left
        else:
            self._setups_by_peer.pop(peer, None)

    # --- regions --------------------------------------------------------------------------

    def admit_memory(self, peer: str, length: int) -> Grant:
        """Admit a region held in memory for ``peer`` (its IP address), or refuse."""
        self._check_region(length)
        limits = self.limits
        if self.memory_held + length > limits.max_memory:
            self._refuse(
                "max_receive_memory",
                f"{length} bytes asked, {self.memory_held} of {limits.max_memory} already held "
                f"for incoming transfers (--max-receive-memory)",
            )
        held_by_peer = self._by_peer.get(peer, 0)
        if held_by_peer + length > limits.max_peer_memory:
            self._refuse(
                "max_peer_memory",
                f"{length} bytes asked, {held_by_peer} of {limits.max_peer_memory} already held "
                f"for {peer} (--max-peer-memory)",
            )
        self.memory_held += length
        self._by_peer[peer] = held_by_peer + length
        return Grant(self, peer, length, disk=False)

    def admit_file(self, peer: str, length: int, directory: Path) -> Grant:
        """Admit a file of ``length`` bytes written to ``directory``, or refuse."""
        self._check_region(length)
        try:
            free = self._disk_free(directory)
        except OSError as exc:
            self._refuse("disk", f"cannot read the free space of {directory}: {exc.strerror}")
        room = free - self.disk_reserved - DISK_RESERVE
        if length > room:
            self._refuse(
                "disk",
                f"{length} bytes asked, {max(room, 0)} free in the out-dir after transfers in "
                f"progress and a {DISK_RESERVE >> 20} MiB reserve",
            )
        self.disk_reserved += length
        return Grant(self, peer, length, disk=True)

    def _check_region(self, length: int) -> None:
        if length > self.limits.max_region:
            self._refuse(
                "max_region",
                f"{length} bytes asked; this agent accepts at most {self.limits.max_region} "
                f"per transfer (--max-region)",
            )

    def _give_back(self, grant: Grant) -> None:
        if grant.disk:
            self.disk_reserved -= grant.length
            return
        self.memory_held -= grant.length
        remaining = self._by_peer.get(grant.peer, 0) - grant.length
        if remaining > 0:
            self._by_peer[grant.peer] = remaining
        else:
            self._by_peer.pop(grant.peer, None)

    def _refuse(self, limit: str, message: str) -> None:
        self.refused[limit] = self.refused.get(limit, 0) + 1
        raise OverLimitError(message)

    def snapshot(self) -> dict[str, Any]:
        """Limits and use, as ``mrc-agent status`` shows them."""
        limits = self.limits
        return {
            "max_receive_memory": limits.max_memory,
            "max_peer_memory": limits.max_peer_memory,
            "max_setups": limits.max_setups,
            "max_peer_setups": self.max_peer_setups,
            "max_region": limits.max_region,
            "memory_held": self.memory_held,
            "disk_reserved": self.disk_reserved,
            "setups_in_progress": self.setups,
            "peers_holding_memory": len(self._by_peer),
            "refused": dict(self.refused),
        }
