"""An intent rendered for a Linux kernel: routes, neighbours and shapers, plus what has no
kernel rendering.

Pure. A group becomes the next hops of every route that points at it (the kernel has no shared
group object that plain routes use: with ``nexthop`` objects it does, but a route's multipath
next hops are what ``ignore_routes_with_linkdown`` is documented for, and they read back
plainly); a member becomes a synthetic gateway with a permanent neighbour entry
(:mod:`.names`); a port's queue rate and depth become a root ``tbf`` (:mod:`.tc`), and its ECN
thresholds a marking qdisc under it where the kernel offers one (:mod:`.ecn`). In the SRv6
path mode a neighbour's uSID locator is an ordinary route toward it, and the switch's own uSID
two seg6local routes (:mod:`.seg6`). Structured EV tables have no kernel rendering (the runtime
refuses that mode on this target).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Network

from controller.intent.model import (
    NextHopMember,
    PortIntent,
    Route,
    SwitchIntent,
    UsidNextHop,
)
from controller.southbound.linux.ecn import ECN_QDISC_PREFERENCE, choose_ecn_qdisc, ecn_marker
from controller.southbound.linux.names import gateway_v4, gateway_v6
from controller.southbound.linux.seg6 import local_usid_routes, usid_locator
from controller.southbound.linux.state import KernelRoute, KernelState, Neighbour, NextHop
from hostenv.tbf import TbfParameters, tbf_parameters
from wire.dscp import class_key


@dataclass(frozen=True)
class Rendering:
    """The kernel state an intent asks for, and the parts of it the kernel cannot hold."""

    state: KernelState
    #: One sentence per intent feature that has no kernel rendering and is left out.
    unsupported: tuple[str, ...]


def render(intent: SwitchIntent, *, ecn_qdiscs: Iterable[str] | None = ()) -> Rendering:
    """The kernel state for ``intent``. ``ecn_qdiscs`` names the ECN-capable qdiscs the kernel
    offers (``red``, ``codel``, ``fq_codel``; None: they could not be probed): the most
    faithful one marks every shaped ECN port; where none can, ECN is reported off, with why."""
    offered = None if ecn_qdiscs is None else frozenset(ecn_qdiscs)
    routes = {
        route.prefix: _route(route, intent) for route in (*intent.routes_v4, *intent.routes_v6)
    }
    for hop in intent.usid_next_hops:
        usid_route = _usid_route(hop, intent)
        routes[usid_route.prefix] = usid_route
    seg6local = {route.prefix: route for route in local_usid_routes(intent.local_usids)}
    neighbours = {}
    for member in intent.members:
        for neighbour in _neighbours(member):
            neighbours[neighbour.key] = neighbour
    shapers = {port.port: shaper for port in intent.ports if (shaper := _shaper(port)) is not None}
    markers = {
        port.port: marker
        for port in intent.ports
        if (marker := ecn_marker(port, offered or ())) is not None
    }
    return Rendering(
        KernelState(routes, neighbours, shapers, markers, seg6local), _unsupported(intent, offered)
    )


def _route(route: Route, intent: SwitchIntent) -> KernelRoute:
    group = intent.group(route.next_id)
    v4 = isinstance(route.prefix, IPv4Network)
    nexthops = tuple(
        sorted(
            (
                NextHop(
                    member.egress_port,
                    gateway_v4(member.member_index) if v4 else gateway_v6(member.member_index),
                )
                for member in group.members
            ),
            key=lambda nexthop: nexthop.port,
        )
    )
    return KernelRoute(route.prefix, nexthops)


def _usid_route(hop: UsidNextHop, intent: SwitchIntent) -> KernelRoute:
    """A carrier whose next uSID is a neighbour's goes to that neighbour: one next hop, the
    gateway of the member on the hop's port toward the neighbour's MAC."""
    for member in intent.members:
        if member.egress_port == hop.egress_port and member.dst_mac == hop.dst_mac:
            nexthop = NextHop(member.egress_port, gateway_v6(member.member_index))
            return KernelRoute(usid_locator(hop.block, hop.usid), (nexthop,))
    raise ValueError(
        f"{intent.switch}: uSID {hop.usid} leaves by port {hop.egress_port} toward "
        f"{hop.dst_mac}, which no member of the intent reaches"
    )


def _neighbours(member: NextHopMember) -> tuple[Neighbour, Neighbour]:
    mac = member.dst_mac.lower()
    return (
        Neighbour(member.egress_port, gateway_v4(member.member_index), mac),
        Neighbour(member.egress_port, gateway_v6(member.member_index), mac),
    )


def _shaper(port: PortIntent) -> TbfParameters | None:
    if port.queue_rate_pps <= 0:
        return None  # unlimited: a veth never queues, so there is no depth to bound either
    return tbf_parameters(port.queue_rate_pps, port.queue_depth)


def _unsupported(intent: SwitchIntent, ecn_qdiscs: frozenset[str] | None) -> tuple[str, ...]:
    notes = []
    notes += _ecn_off(intent, ecn_qdiscs)
    notes.append(
        "no packet trimming on the linux target: a full queue drops, and MRC recovers by "
        "SACK and timeout"
    )
    if any(
        port.high_priority_queue_rate_pps or port.high_priority_queue_depth for port in intent.ports
    ):
        notes.append(
            "no high-priority queue on the linux target (one tbf per port): control packets "
            "queue with data"
        )
    if any(port.lossless_queue_depth for port in intent.ports):
        notes.append(
            "no lossless RoCE class on the linux target (one tbf per port): RoCE data shares "
            "each port's one queue, and a full queue drops it at the tail"
        )
    if intent.dscp_rules:
        notes.append(_dscp_note(intent))
    notes.append(
        f"LLDP and the CPU port ({intent.cpu_port}) have no kernel rendering: links are "
        "watched by carrier (netlink link events)"
    )
    if intent.ev_field is not None or intent.ev_uplinks:
        notes.append(
            "structured EV tables have no kernel rendering: the kernel hashes every EV over "
            "its multipath routes"
        )
    return tuple(notes)


def _dscp_note(intent: SwitchIntent) -> str:
    """What the classes lose on a kernel switch, MRC's and the RoCE baseline's alike: the
    kernel forwards every UDP datagram by address (a standard RoCE opcode as any MRC one) and
    keeps its DSCP, but queues all classes together, and marks (where it can) any ECN-capable
    packet, i.e. the data of both transports, whose senders set ECT on data only."""
    classes = ", ".join(
        f"{class_key(rule.traffic_class)}={rule.dscp}" for rule in intent.dscp_rules
    )
    return (
        "DSCP classes have no kernel rendering (the kernel forwards by address only, DSCP "
        f"kept): {classes}; MRC control, trimmed headers, RoCE ACK/NAKs and RoCE CNPs share "
        "each port's one queue with data, and ECN marking, where the kernel marks, takes any "
        "ECN-capable packet (MRC and RoCE data alike)"
    )


def _ecn_off(intent: SwitchIntent, ecn_qdiscs: frozenset[str] | None) -> list[str]:
    """Where the intent asks for ECN marking and the kernel will not mark, and why: on every
    such port where the kernel has no marking qdisc, else on the unshaped ones."""
    ecn_ports = [port for port in intent.ports if port.ecn_enabled]
    if not ecn_ports:
        return []
    if ecn_qdiscs is None:
        reason = "the kernel's qdiscs could not be probed (the probe needs root)"
    elif choose_ecn_qdisc(ecn_qdiscs) is None:
        reason = f"this kernel has none of {', '.join(ECN_QDISC_PREFERENCE)}"
    else:
        unshaped = [port.port for port in ecn_ports if port.queue_rate_pps <= 0]
        if not unshaped:
            return []
        return [
            f"ECN marking is off on ports {unshaped}: an unshaped port (queue rate 0) builds "
            "no queue on a veth, so there is nothing to mark"
        ]
    return [f"ECN marking is off on ports {[port.port for port in ecn_ports]}: {reason}"]
