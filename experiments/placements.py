"""Where the failover experiment breaks the fabric: what a placement may break, what each
candidate carried, and which of them breaks.

A placement names the kind of element that fails; its candidates come from the topology and
the flows alone:

* ``local``: an uplink of a source leaf: the source leaf sees it go, so even a fabric that
  recomputes nothing prunes it at once.
* ``remote``: a downlink into a destination leaf from the switch (a spine) at its far end.
  The source leaf still sees all its uplinks up and keeps hashing onto that spine; under
  static routing the spine, whose last link toward the leaf is dead, drops that traffic.
* ``switch``: a spine with links into the destination leaves loses power (see
  ``testbed.session.Testbed.power_off``).
* ``nic``: a NIC of the (first) source host (a host with a NIC per plane).

The choice (:class:`CutChoice`) says which candidate breaks: one drawn with the run's seed
whatever the traffic (``random``: every contender of a seed meets the same fault, and whether
a one-path flow is hit is chance, as in a real fabric), or the one that carried the most
(``busiest``: always the single-path flow's own path).

What each candidate carried is read between two snapshots (:class:`Snapshot`), the run's
start and a probe just before the cut: switches' next-hop member counters or port tx
counters (``counters``), the host's own NIC counters for ``nic``. It decides a ``busiest``
cut and tells, for either choice, whose traffic the cut element carried (the flows'
exposure, ``experiments.failover.exposure``). The functions are pure; :class:`Cut` says what
was chosen.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from experiments.counters import CountersUnavailable, Forwarded, forwarded_between
from experiments.documents import Status
from topologies.model import Endpoint, Topology


class Placement(StrEnum):
    """What a failover run breaks (see the module's docstring)."""

    LOCAL = "local"
    REMOTE = "remote"
    SWITCH = "switch"
    NIC = "nic"


class CutChoice(StrEnum):
    """Which of a placement's candidates breaks (see the module's docstring)."""

    RANDOM = "random"
    BUSIEST = "busiest"


#: The counters ``nic`` is read from: the source host's own.
NIC_TX_COUNTERS = "host_nic_tx"


@dataclass(frozen=True)
class Cut:
    """What a placement chose: a link (``a`` and ``b`` as ``Testbed.fail`` takes them) or a
    switch (``switch``; ``a`` and ``b`` empty), the packets it carried between the run's start
    and the probe, and which counters told (both None for a drawn cut whose counters could
    not be read)."""

    placement: Placement
    a: str
    b: str
    packets: int | None
    counters: str | None
    switch: str | None = None

    @property
    def name(self) -> str:
        """``l1:3-s2`` for a link, the switch's name for a switch."""
        return self.switch if self.switch is not None else f"{self.a}-{self.b}"


@dataclass(frozen=True)
class Snapshot:
    """One reading of what the placements are chosen by: the controller's status, and the
    source host's NIC tx counters (NIC name -> packets; read for ``nic`` only)."""

    status: Status
    nics: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Carried:
    """What one candidate carried toward one scope between two snapshots: packets, and their
    bytes (None where the counters keep none, as a host's NIC counters do)."""

    packets: int
    byte_count: int | None


@dataclass(frozen=True)
class Loads:
    """What each candidate carried between two snapshots (its name -> scope -> what it
    carried), and which counters told. A scope is what the traffic is counted toward: the leaf
    a downlink leads into (``remote``), each leaf a spine's downlinks lead into (``switch``),
    the leaf an uplink leaves (``local``), the host a NIC belongs to (``nic``)."""

    carried: Mapping[str, Mapping[str, Carried]]
    counters: str

    def packets(self, name: str) -> int:
        """The packets the candidate ``name`` carried, all its scopes together."""
        return sum(carried.packets for carried in self.carried[name].values())


def leaves_of(topology: Topology, hosts: Iterable[str]) -> list[str]:
    """The switches the NICs of ``hosts`` are plugged into, in first-seen order."""
    leaves: list[str] = []
    for host in hosts:
        for nic in topology.host(host).nics:
            if nic.switch not in leaves:
                leaves.append(nic.switch)
    return leaves


def scope_of(topology: Topology, placement: Placement, flow: tuple[str, str]) -> tuple[str, ...]:
    """The scopes (see :class:`Loads`) a flow's data is counted toward at a placement: its
    destination's leaves (``remote``, ``switch``), its source's leaves (``local``) or its
    source host (``nic``)."""
    source, destination = flow
    if placement in (Placement.REMOTE, Placement.SWITCH):
        return tuple(leaves_of(topology, [destination]))
    if placement == Placement.LOCAL:
        return tuple(leaves_of(topology, [source]))
    return (source,)


def candidates(
    topology: Topology, placement: Placement, flows: Sequence[tuple[str, str]]
) -> tuple[Cut, ...]:
    """What ``placement`` may break for ``flows``, from the topology alone, in its order (a
    draw over them is the same on every run of a seed); their loads unread."""
    if placement == Placement.NIC:
        host = flows[0][0]
        return tuple(
            Cut(Placement.NIC, f"{host}:{nic.index}", nic.switch, None, None)
            for nic in topology.host(host).nics
        )
    links = _scoped_links(topology, placement, flows)
    if placement == Placement.SWITCH:
        spines = dict.fromkeys(switch for switch, _, _, _ in links)
        return tuple(Cut(Placement.SWITCH, "", "", None, None, switch=s) for s in spines)
    return tuple(
        Cut(placement, f"{switch}:{port}", peer, None, None) for switch, port, peer, _ in links
    )


def loads(
    topology: Topology,
    placement: Placement,
    flows: Sequence[tuple[str, str]],
    before: Snapshot,
    after: Snapshot,
) -> Loads:
    """What each of ``placement``'s candidates carried between two snapshots, per scope;
    CountersUnavailable if any of them could not be read (a choice or a share among the read
    ones could miss the busiest)."""
    if placement == Placement.NIC:
        return _nic_loads(topology, flows[0][0], before.nics, after.nics)
    carried: dict[str, dict[str, Carried]] = {}
    read: dict[str, Forwarded] = {}
    sources: set[str] = set()
    for switch, port, peer, scope in _scoped_links(topology, placement, flows):
        if switch not in read:
            read[switch] = forwarded_between(before.status, after.status, switch)
        forwarded = read[switch]
        sources.add(forwarded.source)
        name = switch if placement == Placement.SWITCH else f"{switch}:{port}-{peer}"
        byte_count = None if forwarded.byte_counts is None else forwarded.byte_counts.get(port, 0)
        scopes = carried.setdefault(name, {})
        earlier = scopes.get(scope, Carried(0, 0))
        scopes[scope] = Carried(
            earlier.packets + forwarded.packets.get(port, 0),
            None
            if byte_count is None or earlier.byte_count is None
            else earlier.byte_count + byte_count,
        )
    return Loads(carried, "+".join(sorted(sources)))


def busiest(options: Sequence[Cut], read: Loads) -> Cut:
    """The candidate that carried the most packets (the first of them on a tie)."""
    return max((loaded(cut, read) for cut in options), key=lambda cut: cut.packets or 0)


def drawn(options: Sequence[Cut], seed: int) -> Cut:
    """The candidate a seed draws, whatever the traffic: the same for every run of the seed."""
    return random.Random(seed).choice(list(options))


def loaded(cut: Cut, read: Loads) -> Cut:
    """``cut`` with the packets it carried and the counters that told."""
    return dataclasses.replace(cut, packets=read.packets(cut.name), counters=read.counters)


def _scoped_links(
    topology: Topology, placement: Placement, flows: Sequence[tuple[str, str]]
) -> list[tuple[str, int, str, str]]:
    """Every switch-to-switch link a link or switch placement may break, as (the switch that
    sends onto it, its port, the switch at the other end, the scope it counts toward):
    uplinks out of the source leaves, leaf by leaf (``local``), or downlinks into the
    destination leaves as the topology lists them (``remote``, ``switch``)."""
    if placement == Placement.LOCAL:
        leaves = leaves_of(topology, [source for source, _ in flows])
        scoped = [
            (leaf, near.port, far.node, leaf)
            for leaf in leaves
            for near, far in _link_ends(topology)
            if near.node == leaf
        ]
        where = "out of the sources'"
    else:
        leaves = leaves_of(topology, [destination for _, destination in flows])
        scoped = [
            (far.node, far.port, near.node, near.node)
            for near, far in _link_ends(topology)
            if near.node in leaves and far.node not in leaves
        ]
        where = "into the destinations'"
    if not scoped:
        raise ValueError(f"no switch-to-switch link leads {where} leaves")
    return scoped


def _link_ends(topology: Topology) -> list[tuple[Endpoint, Endpoint]]:
    """Each switch-to-switch link from both ends, (near, far), as the topology lists them."""
    return [ends for link in topology.links for ends in ((link.a, link.b), (link.b, link.a))]


def _nic_loads(
    topology: Topology, host: str, before: Mapping[str, int], after: Mapping[str, int]
) -> Loads:
    """What each NIC of ``host`` sent between two readings of its counters;
    CountersUnavailable when a NIC was not read."""
    nics = topology.host(host).nics
    missing = [nic.name for nic in nics if nic.name not in before or nic.name not in after]
    if missing:
        raise CountersUnavailable(f"{host}: NIC counters unavailable for {', '.join(missing)}")
    return Loads(
        {
            f"{host}:{nic.index}-{nic.switch}": {
                host: Carried(after[nic.name] - before[nic.name], None)
            }
            for nic in nics
        },
        NIC_TX_COUNTERS,
    )
