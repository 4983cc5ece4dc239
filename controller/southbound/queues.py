"""Egress queue depth and rate, which BMv2 exposes over Thrift only (no P4Runtime call).

Every port has ``mrc.p4``'s three priority queues (:class:`QueuePriority`, served by strict
priority): the normal one gets the link's depth and rate; the lossless RoCE class gets its own
depth (deep: no congestion drops; pause frames are not modelled) and the link's rate, so RoCE
meets the same bottleneck as MRC; the high-priority one gets the fabric's setting for it.

The southbound sets them with ``simple_switch_CLI`` behind the same ``program()`` call as the
P4 entities. Thrift offers no way to read them back, so the backend remembers what it set on
each switch during the current session and sends only differences; the southbound makes it
forget a switch whenever its channel comes up again (a restarted BMv2 has default queues, and a
restarted controller cannot know what an earlier one set), so every session starts by setting
every queue once.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from controller.intent import PortIntent
from hostenv.toolchain import SIMPLE_SWITCH_CLI, find_tool

#: simple_switch_CLI imports Debian's thrift module: it runs with the system interpreter.
SYSTEM_PYTHON = "/usr/bin/python3"
CLI_TIMEOUT_S = 30.0


class QueuePriority(IntEnum):
    """``mrc.p4``'s priority queues (``PRIO_*`` in p4src/include/defines.p4); BMv2 serves the
    highest first."""

    #: MRC data and any other IP: the queue trimming watches.
    NORMAL = 0
    #: Standard RoCE data, the lossless class: no congestion drops; pause frames not modelled.
    LOSSLESS = 1
    #: MRC control, trimmed headers, RoCE ACK/NAK and CNP.
    HIGH = 2


#: ``simple_switch_grpc --priority-queues``: one queue per :class:`QueuePriority`.
PRIORITY_QUEUES = len(QueuePriority)


@dataclass(frozen=True)
class QueueConfig:
    """The priority queues of one egress port: depth in packets, rate in packets/s (0 means
    unlimited). The lossless RoCE queue takes the normal queue's rate, the link's."""

    depth: int
    rate_pps: int
    high_priority_depth: int
    high_priority_rate_pps: int
    lossless_depth: int

    @classmethod
    def of(cls, port: PortIntent) -> QueueConfig:
        """The queue part of a port's intent."""
        return cls(
            port.queue_depth,
            port.queue_rate_pps,
            port.high_priority_queue_depth,
            port.high_priority_queue_rate_pps,
            port.lossless_queue_depth,
        )

    def queues(self) -> dict[QueuePriority, tuple[int, int]]:
        """(depth, rate) of each priority queue."""
        return {
            QueuePriority.NORMAL: (self.depth, self.rate_pps),
            QueuePriority.LOSSLESS: (self.lossless_depth, self.rate_pps),
            QueuePriority.HIGH: (self.high_priority_depth, self.high_priority_rate_pps),
        }


def queue_commands(port: int, config: QueueConfig) -> list[str]:
    """simple_switch_CLI commands that give ``port`` this queue configuration."""
    return [
        command
        for priority, (depth, rate_pps) in config.queues().items()
        for command in (
            f"set_queue_depth {depth} {port} {int(priority)}",
            f"set_queue_rate {rate_pps} {port} {int(priority)}",
        )
    ]


@dataclass(frozen=True)
class QueueOutcome:
    """Commands sent, and the error if the CLI failed (then nothing counts as applied)."""

    commands: int = 0
    error: str | None = None


class QueueBackend(Protocol):
    """Sets per-port queues on a switch; target-specific, behind the southbound."""

    async def apply(self, switch: str, ports: Sequence[PortIntent]) -> QueueOutcome:
        """Give every port in ``ports`` its queue configuration."""
        ...

    def forget(self, switch: str) -> None:
        """Drop what was set on ``switch`` (it restarted, or a session begins)."""
        ...


@dataclass(frozen=True)
class ThriftEndpoint:
    """Where a BMv2 Thrift server listens."""

    host: str
    port: int


CliRunner = Callable[[ThriftEndpoint, list[str]], str]


def run_simple_switch_cli(endpoint: ThriftEndpoint, commands: list[str]) -> str:
    """Run commands through simple_switch_CLI; raise with its output when it fails."""
    cli = find_tool(SIMPLE_SWITCH_CLI)
    if cli is None:
        raise FileNotFoundError("simple_switch_CLI not found (see `make doctor`)")
    argv = [
        SYSTEM_PYTHON,
        cli,
        "--thrift-ip",
        endpoint.host,
        "--thrift-port",
        str(endpoint.port),
    ]
    proc = subprocess.run(
        argv,
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    # The CLI reports a refused command on stdout and still exits 0.
    if proc.returncode != 0 or "Error" in proc.stdout:
        output = (proc.stdout + proc.stderr).strip()
        raise RuntimeError(f"simple_switch_CLI at {endpoint.host}:{endpoint.port}: {output}")
    return proc.stdout


class ThriftQueueBackend:
    """BMv2 queues over Thrift, sending only what differs from what this session set."""

    def __init__(
        self,
        endpoints: Mapping[str, ThriftEndpoint],
        runner: CliRunner = run_simple_switch_cli,
    ) -> None:
        self._endpoints = dict(endpoints)
        self._runner = runner
        self._applied: dict[str, dict[int, QueueConfig]] = {}

    async def apply(self, switch: str, ports: Sequence[PortIntent]) -> QueueOutcome:
        """Send the commands for ports whose configuration changed; one CLI run per call."""
        endpoint = self._endpoints.get(switch)
        if endpoint is None:
            return QueueOutcome(error=f"no Thrift endpoint known for switch {switch!r}")
        applied = self._applied.setdefault(switch, {})
        changed = {
            port.port: QueueConfig.of(port)
            for port in ports
            if applied.get(port.port) != QueueConfig.of(port)
        }
        if not changed:
            return QueueOutcome()
        commands = [
            command
            for port, config in sorted(changed.items())
            for command in queue_commands(port, config)
        ]
        try:
            await asyncio.to_thread(self._runner, endpoint, commands)
        except (OSError, RuntimeError, subprocess.SubprocessError) as error:
            return QueueOutcome(error=str(error))
        applied.update(changed)
        return QueueOutcome(commands=len(commands))

    def forget(self, switch: str) -> None:
        """Forget what was set on ``switch``; the next apply sets every port again."""
        self._applied.pop(switch, None)
