"""A topology's fabric in simulated time: switches, links, hosts, failures and routing.

Every switch-to-switch link and every host NIC becomes two ``agent.sim.link.Link`` directions,
each the egress queue of the port it leaves (:func:`simulation.links.link_config`). Switches
hold what :func:`controller.intent.routed_intent` gives them, the same computation the
controller programs real switches with, under the same routing policy:

* at a cut, both ends lose carrier at once and skip their dead members (``watch_port``);
* ``static``: nothing else; ``reactive``: after ``reaction_s`` (the controller's cut to last
  write) every switch holds the intent computed without the cut link; ``converge:S``: after S
  seconds, the intent of the link state as it was S seconds earlier.

A host's endpoint plane i is its i-th NIC, as the agent's ``--plane`` list is in the testbed.
Hosts run MRC's endpoint, or with ``roce`` the RoCE baseline's: a flow is then striped over the
setup's QPs, QP i on plane i modulo the planes, each on the one path its source port hashes to.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from agent.core.config import MrcConfig
from agent.core.connection import ConnectionSpec
from agent.core.datagram import OutgoingDatagram
from agent.core.endpoint import Endpoint
from agent.core.memory import MemoryRegion
from agent.io.transport import RoceSetup
from agent.roce.endpoint import RoceEndpoint
from agent.roce.qp import RoceQpSpec
from agent.sim.host import SimHost
from agent.sim.link import Link, LinkCounters
from agent.sim.packet import SimPacket
from agent.sim.scheduler import Scheduler
from controller.intent import routed_intent
from controller.intent.model import FabricIntent, SwitchIntent
from controller.intent.policy import RoutingMode, RoutingPolicy
from simulation.links import link_config
from simulation.switch import SimSwitch
from topologies.model import LinkId, LinkParams, Topology
from topologies.paths import PathMode

#: ``reactive`` routing's delay from a cut to the controller's last write: the linux target's
#: measured median cut-to-last-write (``make bench-controller TARGET=linux``, idle machine).
DEFAULT_REACTION_S = 0.017
#: First PSN of every connection (any value works; fixed so runs repeat).
FIRST_PSN = 100


@dataclass(frozen=True)
class FabricStats:
    """What the fabric did, summed over its links and switches."""

    events: int
    offered: int
    delivered: int
    trimmed: int
    ecn_marked: int
    dropped_overflow: int
    dropped_down: int
    lost: int
    no_route: int


@dataclass(frozen=True)
class Connected:
    """One connection from a sender to a receiver, and the receiver's region it writes into."""

    sender: SimHost
    receiver: SimHost
    #: The sender's QPs and their peers, in stripe order (one for MRC).
    send_qps: tuple[int, ...]
    receive_qps: tuple[int, ...]
    region: MemoryRegion


class SimFabric:
    """The whole simulated network of one topology."""

    def __init__(
        self,
        topology: Topology,
        *,
        config: MrcConfig | None = None,
        roce: RoceSetup | None = None,
        policy: RoutingPolicy | None = None,
        path_mode: PathMode = PathMode.ECMP,
        seed: int = 0,
        loss: float = 0.0,
        reaction_s: float = DEFAULT_REACTION_S,
    ) -> None:
        if path_mode is not PathMode.ECMP:
            raise ValueError(f"the simulated fabric hashes only (ecmp), not {path_mode}")
        self.topology = topology
        self.policy = policy or RoutingPolicy()
        self.reaction_s = reaction_s
        self.scheduler = Scheduler()
        self.rng = random.Random(seed)
        self.switches: dict[str, SimSwitch] = {
            switch.name: SimSwitch(switch.name, self.rng.getrandbits(32))
            for switch in topology.switches
        }
        self.hosts: dict[str, SimHost] = {}
        self.down: set[LinkId] = set()
        self._links: dict[LinkId, tuple[Link, Link]] = {}
        #: Each host's NIC uplinks, indexed by the endpoint's plane (its position in the list).
        self._uplinks: dict[str, list[Link]] = {}
        self._addresses_by_plane: dict[int, list[bytes]] = {}
        self._intent: FabricIntent | None = None
        self.roce = roce
        dscp = topology.settings.dscp
        mrc = config or MrcConfig(dscp=dscp)
        for link in topology.links:
            forward = self._link(f"{link.a.node}:{link.a.port}>{link.b.node}", link.params, loss)
            backward = self._link(f"{link.b.node}:{link.b.port}>{link.a.node}", link.params, loss)
            forward.deliver = self.switches[link.b.node].receive
            backward.deliver = self.switches[link.a.node].receive
            self.switches[link.a.node].attach(link.a.port, forward)
            self.switches[link.b.node].attach(link.b.port, backward)
            self._links[link.id] = (forward, backward)
        for host in topology.hosts:
            addresses = [nic.ipv4.ip.packed for nic in host.nics]
            endpoint: Endpoint | RoceEndpoint
            if roce is None:
                endpoint = Endpoint(addresses, mrc, seed=self.rng.getrandbits(32))
            else:
                endpoint = RoceEndpoint(addresses, seed=self.rng.getrandbits(32))
            sim_host = SimHost(host.name, endpoint, self.scheduler, self._send_from)
            self.hosts[host.name] = sim_host
            uplinks = self._uplinks[host.name] = []
            for nic in host.nics:
                self._addresses_by_plane.setdefault(nic.plane, []).append(nic.ipv4.ip.packed)
                up = self._link(f"{host.name}.{nic.name}>{nic.switch}", nic.params, loss)
                down = self._link(
                    f"{nic.switch}:{nic.switch_port}>{host.name}", nic.params, loss, last_hop=True
                )
                up.deliver = self.switches[nic.switch].receive
                down.deliver = sim_host.receive
                self.switches[nic.switch].attach(nic.switch_port, down)
                uplinks.append(up)
                self._links[host.link(nic).id] = (up, down)
        self._install(frozenset())

    # --- building -------------------------------------------------------------------------

    def _link(self, name: str, params: LinkParams, loss: float, last_hop: bool = False) -> Link:
        config = link_config(params, self.topology.settings, loss=loss)
        return Link(
            name, config, self.scheduler, self.rng, self.topology.settings.dscp, last_hop=last_hop
        )

    def _send_from(self, host: SimHost, datagram: OutgoingDatagram) -> None:
        self._uplinks[host.name][datagram.plane].send(SimPacket(datagram))

    # --- routing --------------------------------------------------------------------------

    def _install(self, routed_down: Collection[LinkId]) -> None:
        """Every switch holds the intent of ``routed_down`` pruned at its own dead ports; a
        switch whose tables did not change is left alone."""
        intent = routed_intent(self.topology, routed_down, frozenset(self.down))
        previous = self._intent
        for switch in self.topology.switches:
            wanted = intent.switch(switch.name)
            if previous is not None and _same_forwarding(previous.switch(switch.name), wanted):
                continue
            addresses = self._addresses_by_plane.get(switch.plane, [])
            self.switches[switch.name].install(wanted, addresses)
        self._intent = intent

    def _link_changed(self) -> None:
        policy = self.policy
        if policy.mode is RoutingMode.STATIC:
            return
        if policy.mode is RoutingMode.REACTIVE:
            self.scheduler.after(self.reaction_s, lambda: self._install(frozenset(self.down)))
            return
        as_it_was = frozenset(self.down)
        self.scheduler.after(policy.delay_s, lambda: self._install(as_it_was))

    # --- failures -------------------------------------------------------------------------

    def fail(self, link: LinkId) -> None:
        """Cut ``link`` now: both directions lose what they hold, both ends lose carrier."""
        self._set_link(link, up=False)

    def restore(self, link: LinkId) -> None:
        """Bring ``link`` back now."""
        self._set_link(link, up=True)

    def fail_at(self, time: float, link: LinkId) -> None:
        """Schedule a cut of ``link`` at ``time``."""
        self._known(link)
        self.scheduler.at(time, lambda: self.fail(link))

    def restore_at(self, time: float, link: LinkId) -> None:
        """Schedule ``link``'s restoration at ``time``."""
        self._known(link)
        self.scheduler.at(time, lambda: self.restore(link))

    def _known(self, link: LinkId) -> tuple[Link, Link]:
        try:
            return self._links[link]
        except KeyError:
            raise ValueError(f"no link {link} in topology {self.topology.name!r}") from None

    def _set_link(self, link: LinkId, *, up: bool) -> None:
        directions = self._known(link)
        if (link not in self.down) == up:
            return
        for direction in directions:
            direction.repair() if up else direction.fail()
        if up:
            self.down.discard(link)
        else:
            self.down.add(link)
        for end in (link.a, link.b):
            switch = self.switches.get(end.node)
            if switch is not None:
                switch.set_carrier(end.port, up)
        self._link_changed()

    # --- hosts ----------------------------------------------------------------------------

    def connect(self, sender: str, receiver: str, region_size: int) -> Connected:
        """A connection ``sender`` -> ``receiver`` with a region of ``region_size`` bytes to
        write into, set up as the agents' side channel would."""
        tx, rx = self.hosts[sender], self.hosts[receiver]
        region = rx.endpoint.register_memory(bytearray(region_size))
        send_qps, receive_qps = self.pair(sender, receiver)
        return Connected(tx, rx, send_qps, receive_qps, region)

    def pair(self, a: str, b: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Connect hosts ``a`` and ``b`` (both ways): one MRC QP on each side, or the RoCE
        setup's QPs; ``a``'s QPs and ``b``'s, the i-th of each the two ends of one QP."""
        one, other = self.hosts[a].endpoint, self.hosts[b].endpoint
        if isinstance(one, RoceEndpoint) and isinstance(other, RoceEndpoint):
            assert self.roce is not None
            return _pair_roce(one, other, self.roce)
        assert isinstance(one, Endpoint) and isinstance(other, Endpoint)
        qp_a, qp_b = one.allocate_qp(), other.allocate_qp()
        one.connect(ConnectionSpec(qp_a, qp_b, other.local_addresses, FIRST_PSN, FIRST_PSN))
        other.connect(ConnectionSpec(qp_b, qp_a, one.local_addresses, FIRST_PSN, FIRST_PSN))
        return (qp_a,), (qp_b,)

    # --- accounting -----------------------------------------------------------------------

    def uplinks(self, host: str) -> Sequence[Link]:
        """The directions leaving ``host``'s NICs, by endpoint plane."""
        return self._uplinks[host]

    def links(self) -> Sequence[Link]:
        """Every link direction, switch links first."""
        return [direction for pair in self._links.values() for direction in pair]

    def stats(self) -> FabricStats:
        """Counters summed over the fabric."""
        total = LinkCounters()
        for link in self.links():
            total.add(link.counters)
        return FabricStats(
            events=self.scheduler.events_run,
            offered=total.offered,
            delivered=total.delivered,
            trimmed=total.trimmed,
            ecn_marked=total.ecn_marked,
            dropped_overflow=total.dropped_overflow,
            dropped_down=total.dropped_down,
            lost=total.lost,
            no_route=sum(switch.no_route for switch in self.switches.values()),
        )


def _same_forwarding(old: SwitchIntent, new: SwitchIntent) -> bool:
    same_routes = old.routes_v4 == new.routes_v4 and old.routes_v6 == new.routes_v6
    return same_routes and old.groups == new.groups


def _pair_roce(
    one: RoceEndpoint, other: RoceEndpoint, roce: RoceSetup
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The setup's QPs between two RoCE endpoints, QP i on plane i modulo the planes."""
    planes = min(len(one.local_addresses), len(other.local_addresses))
    qps_one: list[int] = []
    qps_other: list[int] = []
    for index in range(roce.qps):
        plane = index % planes
        qp_one, qp_other = one.allocate_qp(), other.allocate_qp()
        for end, local, remote, peer in (
            (one, qp_one, qp_other, other),
            (other, qp_other, qp_one, one),
        ):
            spec = RoceQpSpec(
                local,
                remote,
                peer.local_addresses[plane],
                FIRST_PSN,
                FIRST_PSN,
                roce.config,
                plane=plane,
            )
            end.connect(spec)
        qps_one.append(qp_one)
        qps_other.append(qp_other)
    return tuple(qps_one), tuple(qps_other)
