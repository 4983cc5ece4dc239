"""Ping between the hosts of a running network, many pairs at once, and read the results."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from itertools import permutations
from typing import Any


@dataclass(frozen=True)
class PingResult:
    """How many of ``sent`` echo requests from ``source`` to ``target`` came back."""

    source: str
    target: str
    address: str
    sent: int
    received: int

    @property
    def lossless(self) -> bool:
        return self.received == self.sent

    def __str__(self) -> str:
        return f"{self.source}->{self.target} ({self.address}): {self.received}/{self.sent}"


def start_ping(
    network: Any, source: str, address: str, count: int, interval: float, size: int = 56
) -> subprocess.Popen[str]:
    """A running ``ping`` in ``source``'s namespace (intervals under 0.2 s need root);
    ``size`` is the ICMP payload (ping's default 56)."""
    return subprocess.Popen(
        [
            *("ip", "netns", "exec", network.host(source).netns),
            *("ping", "-n", "-q", "-c", str(count), "-i", str(interval), "-W", "2"),
            *("-s", str(size), address),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish_ping(
    proc: subprocess.Popen[str], source: str, target: str, address: str, count: int
) -> PingResult:
    output, _ = proc.communicate(timeout=60)
    match = re.search(r"(\d+) received", output)
    if match is None:
        raise AssertionError(f"ping {source}->{address} printed no summary: {output}")
    return PingResult(source, target, address, count, int(match.group(1)))


def ping(
    network: Any,
    source: str,
    target: str,
    family: int = 4,
    count: int = 3,
    interval: float = 0.2,
    size: int = 56,
) -> PingResult:
    """Ping ``target``'s first NIC from ``source`` over IPv4 or IPv6 (``size``: ICMP payload)."""
    address = _address(network, target, family)
    proc = start_ping(network, source, address, count, interval, size)
    return finish_ping(proc, source, target, address, count)


def ping_address(
    network: Any, source: str, address: str, count: int = 3, interval: float = 0.2
) -> PingResult:
    """Ping any address (one no host holds, say) from ``source``."""
    proc = start_ping(network, source, address, count, interval)
    return finish_ping(proc, source, address, address, count)


def ping_all(network: Any, count: int = 3) -> list[PingResult]:
    """Every host to every other host's first NIC, over IPv4 and IPv6, all at once."""
    running = []
    for source, target in permutations([host.name for host in network.topology.hosts], 2):
        for family in (4, 6):
            address = _address(network, target, family)
            proc = start_ping(network, source, address, count, 0.2)
            running.append((proc, source, target, address))
    return [finish_ping(proc, s, t, a, count) for proc, s, t, a in running]


def _address(network: Any, host: str, family: int) -> str:
    nic = network.topology.host(host).nics[0]
    return str(nic.ipv4.ip if family == 4 else nic.ipv6.ip)
