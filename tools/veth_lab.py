"""The veth benches' lab: two network namespaces joined by one veth pair, and whether this
machine can build it (root, the tools the benches run)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from hostenv.netns import NetnsLab, run
from hostenv.toolchain import is_root

_SUBNET = "10.251.0"


@dataclass(frozen=True)
class VethPair:
    """Two namespaces joined by one veth: the sender's end and the receiver's end."""

    tx_ns: str
    rx_ns: str
    tx_if: str
    rx_if: str
    tx_ip: str
    rx_ip: str


def make_veth_pair(lab: NetnsLab, mtu: int = 1500) -> VethPair:
    """Namespaces ``tx`` and ``rx``, a veth between them (offloads off), addresses up."""
    tx_ns, rx_ns = lab.add_netns("tx"), lab.add_netns("rx")
    tx_if, rx_if = f"{lab.prefix}t", f"{lab.prefix}r"
    lab.add_veth(tx_if, rx_if, netns_a=tx_ns, netns_b=rx_ns, mtu=mtu)
    pair = VethPair(tx_ns, rx_ns, tx_if, rx_if, f"{_SUBNET}.1", f"{_SUBNET}.2")
    run(["ip", "addr", "add", f"{pair.tx_ip}/24", "dev", tx_if], netns=tx_ns)
    run(["ip", "addr", "add", f"{pair.rx_ip}/24", "dev", rx_if], netns=rx_ns)
    return pair


def route_peers_via_gateway(pair: VethPair) -> None:
    """Reach each side's peer through a /32 route with the peer as its on-link gateway.

    Hosts in a fabric reach each other through a gateway (their leaf). Toward a directly
    connected peer with no gateway, Linux builds and RCU-frees a fresh route for every packet
    an ``IP_HDRINCL`` raw socket sends (``FLOWI_FLAG_KNOWN_NH`` makes the route uncacheable),
    ~11 % of the agent's sending core on this pair; a connected UDP socket (iperf3) keeps its
    route either way. The peer stays the next hop, so nothing else about the path changes;
    ``testbed/mininet/host_config.py`` routes the testbed's hosts the same way."""
    for netns, peer, ifname in (
        (pair.tx_ns, pair.rx_ip, pair.tx_if),
        (pair.rx_ns, pair.tx_ip, pair.rx_if),
    ):
        run(
            ["ip", "route", "replace", f"{peer}/32", "via", peer, "dev", ifname, "onlink"],
            netns=netns,
        )


def missing_tools() -> list[str]:
    """Tools the veth benches need that are not installed."""
    needed = ("ip", "ethtool", "iperf3", "nft", "taskset", "chrt", "nice", "tc")
    return [tool for tool in needed if shutil.which(tool) is None]


def veth_skip_reason() -> str | None:
    """Why the veth benches cannot run here (not root, tools missing), or None when they can."""
    if not is_root():
        return "needs root (network namespaces, raw sockets): sudo"
    if missing := missing_tools():
        return f"missing tools: {', '.join(missing)}"
    return None
