"""Where the failover experiment breaks the fabric, chosen from what the flows used.

* ``local``: the source leaf's uplink that forwarded the most (today's cut): the source leaf
  sees it go, so even a fabric that recomputes nothing prunes it at once.
* ``remote``: the downlink toward the destination leaf of the switch (a spine) that forwarded
  the most toward it. The source leaf still sees all its uplinks up and keeps hashing onto
  that spine; under static routing the spine, whose last link toward the leaf is dead, drops
  that traffic. Chosen by the spines' counters, so a single-path or RoCE flow is hit too.
* ``switch``: the whole spine that forwarded the most toward the destination leaves loses
  power (see ``testbed.session.Testbed.power_off``).
* ``nic``: the source host's NIC that sent the most (a host with a NIC per plane).

Each choice reads what happened between two snapshots, the run's start and a probe just
before the cut: switches' next-hop member counters or port tx counters (``counters``), the
host's own NIC counters for ``nic``. The functions are pure; :class:`Cut` says what was chosen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from experiments.counters import CountersUnavailable, Forwarded, busiest_uplink, forwarded_between
from experiments.documents import Status
from topologies.model import Topology


class Placement(StrEnum):
    """What a failover run breaks (see the module's docstring)."""

    LOCAL = "local"
    REMOTE = "remote"
    SWITCH = "switch"
    NIC = "nic"


#: The counters ``nic`` is chosen by: the source host's own.
NIC_TX_COUNTERS = "host_nic_tx"


@dataclass(frozen=True)
class Cut:
    """What a placement chose: a link (``a`` and ``b`` as ``Testbed.fail`` takes them) or a
    switch (``switch``; ``a`` and ``b`` empty), the packets that told, and which counters."""

    placement: Placement
    a: str
    b: str
    packets: int
    counters: str
    switch: str | None = None

    @property
    def name(self) -> str:
        """``l1:3-s2`` for a link, the switch's name for a switch."""
        return self.switch if self.switch is not None else f"{self.a}-{self.b}"


def leaves_of(topology: Topology, hosts: Iterable[str]) -> list[str]:
    """The switches the NICs of ``hosts`` are plugged into, in first-seen order."""
    leaves: list[str] = []
    for host in hosts:
        for nic in topology.host(host).nics:
            if nic.switch not in leaves:
                leaves.append(nic.switch)
    return leaves


def local_uplink(topology: Topology, sources: Iterable[str], before: Status, after: Status) -> Cut:
    """The busiest uplink of the sources' leaves (with several leaves, the busiest of all)."""
    best = None
    for leaf in leaves_of(topology, sources):
        uplink = busiest_uplink(topology, leaf, before, after)
        if best is None or uplink.packets > best[1].packets:
            best = (leaf, uplink)
    if best is None:
        raise ValueError("the flows have no source leaf")
    leaf, uplink = best
    return Cut(Placement.LOCAL, f"{leaf}:{uplink.port}", uplink.peer, uplink.packets, uplink.source)


def downlink_loads(
    topology: Topology,
    destinations: Iterable[str],
    before: Status,
    after: Status,
) -> dict[tuple[str, int, str], tuple[int, str]]:
    """Every switch-to-switch link into a destination leaf, as (far switch, its port, leaf),
    with the packets the far switch forwarded onto it and which counters told;
    CountersUnavailable if any of those switches could not be read (a choice among the
    read ones could miss the busiest)."""
    leaves = set(leaves_of(topology, destinations))
    loads: dict[tuple[str, int, str], tuple[int, str]] = {}
    read: dict[str, Forwarded] = {}
    for link in topology.links:
        for near, far in ((link.a, link.b), (link.b, link.a)):
            if near.node not in leaves or far.node in leaves:
                continue
            if far.node not in read:
                read[far.node] = forwarded_between(before, after, far.node)
            forwarded = read[far.node]
            loads[(far.node, far.port, near.node)] = (
                forwarded.packets.get(far.port, 0),
                forwarded.source,
            )
    if not loads:
        raise ValueError("no switch-to-switch link leads into the destinations' leaves")
    return loads


def remote_downlink(
    topology: Topology,
    destinations: Iterable[str],
    before: Status,
    after: Status,
) -> Cut:
    """The downlink into a destination leaf that its far switch forwarded the most onto."""
    loads = downlink_loads(topology, destinations, before, after)
    (switch, port, leaf), (packets, source) = max(loads.items(), key=lambda item: item[1][0])
    return Cut(Placement.REMOTE, f"{switch}:{port}", leaf, packets, source)


def busiest_spine(
    topology: Topology,
    destinations: Iterable[str],
    before: Status,
    after: Status,
) -> Cut:
    """The switch that forwarded the most into the destinations' leaves, all its downlinks
    to them together."""
    totals: dict[str, tuple[int, str]] = {}
    for (switch, _, _), (packets, source) in downlink_loads(
        topology, destinations, before, after
    ).items():
        total = totals.get(switch, (0, source))[0]
        totals[switch] = (total + packets, source)
    switch, (packets, source) = max(totals.items(), key=lambda item: item[1][0])
    return Cut(Placement.SWITCH, "", "", packets, source, switch=switch)


def busiest_nic(
    topology: Topology, host: str, before: Mapping[str, int], after: Mapping[str, int]
) -> Cut:
    """The NIC of ``host`` that sent the most between two readings of its counters (NIC
    name -> packets); CountersUnavailable when a NIC was not read."""
    nics = topology.host(host).nics
    missing = [nic.name for nic in nics if nic.name not in before or nic.name not in after]
    if missing:
        raise CountersUnavailable(f"{host}: NIC counters unavailable for {', '.join(missing)}")
    nic = max(nics, key=lambda n: after[n.name] - before[n.name])
    return Cut(
        Placement.NIC,
        f"{host}:{nic.index}",
        nic.switch,
        after[nic.name] - before[nic.name],
        NIC_TX_COUNTERS,
    )
