"""A stand-in for the controller, just enough to forward pings: push ``mrc.json`` to every
switch and write the routes, members and groups of ``controller.intent``.

Entities are mapped to P4 the way ``tests/ptf/base.py`` writes them: one action-profile member
per next-hop member (``routing_hashed``), one group per next-hop group with ``watch_port`` set
on every member, the ``hashed`` table pointing a next id at its group, and LPM routes setting
the next id. Changes are written as intent diffs, in the order ``controller.intent.diff``
documents as safe. The controller issue replaces all of this.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Collection, Iterable
from typing import Any

import finsy as fy

from controller.intent import (
    NextHopGroup,
    NextHopMember,
    Route,
    SwitchIntent,
    compute_intent,
    diff_switch,
)
from tests.e2e.mininet.environment import P4_BUILD
from tools.p4rt_sync import SyncSwitch
from topologies import LinkId

SELECTOR = "MrcIngress.next.hashed_selector"
MEMBER_COUNTER = "MrcIngress.next.member_packets"


def member_entity(member: NextHopMember) -> fy.P4ActionProfileMember:
    return fy.P4ActionProfileMember(
        SELECTOR,
        member_id=_member_id(member),
        action=fy.P4TableAction(
            "MrcIngress.next.routing_hashed",
            port=member.egress_port,
            smac=member.src_mac,
            dmac=member.dst_mac,
            member_index=member.member_index,
        ),
    )


def group_entity(group: NextHopGroup) -> fy.P4ActionProfileGroup:
    members = [fy.P4Member(_member_id(m), weight=(1, m.watch_port)) for m in group.members]
    return fy.P4ActionProfileGroup(SELECTOR, group_id=group.group_id, members=members)


def next_entry(group: NextHopGroup) -> fy.P4TableEntry:
    return fy.P4TableEntry(
        "MrcIngress.next.hashed",
        match=fy.P4TableMatch(next_id=group.group_id),
        action=fy.P4IndirectAction(group_id=group.group_id),
    )


def route_entry(route: Route) -> fy.P4TableEntry:
    if isinstance(route.prefix, ipaddress.IPv4Network):
        table, field = "MrcIngress.routing.routes_v4", "ipv4_dst"
    else:
        table, field = "MrcIngress.routing.routes_v6", "ipv6_dst"
    return fy.P4TableEntry(
        table,
        match=fy.P4TableMatch({field: str(route.prefix)}),
        action=fy.P4TableAction("MrcIngress.routing.set_next_id", next_id=route.next_id),
    )


def _member_id(member: NextHopMember) -> int:
    return member.member_index + 1


class FabricProgrammer:
    """P4Runtime connections to every switch of a running network, and what each holds."""

    def __init__(self, network: Any) -> None:
        self.network = network
        self.connections: dict[str, SyncSwitch] = {}
        self.installed: dict[str, SwitchIntent | None] = {}

    def program(self, down: Collection[LinkId] = frozenset()) -> None:
        """Bring every switch to the intent for the links in ``down`` being down."""
        intent = compute_intent(self.network.topology, down)
        for switch_intent in intent.switches:
            self._apply(switch_intent)

    def reprogram(self, switch: str, down: Collection[LinkId] = frozenset()) -> None:
        """After a restart: reconnect (which pushes the pipeline again) and install it all."""
        stale = self.connections.pop(switch, None)
        if stale is not None:
            _close_quietly(stale)
        self.installed[switch] = None
        self._apply(compute_intent(self.network.topology, down).switch(switch))

    def counter(self, switch: str, name: str, index: int) -> int:
        """Packets counted in one counter cell."""
        return self._connection(switch).counter(name, index)[0]

    def close(self) -> None:
        for connection in self.connections.values():
            _close_quietly(connection)
        self.connections.clear()

    def _connection(self, switch: str) -> SyncSwitch:
        if switch not in self.connections:
            device = self.network.topology.switch(switch)
            self.connections[switch] = SyncSwitch(
                self.network.grpc_address(switch),
                P4_BUILD / "mrc.p4info.txtpb",
                P4_BUILD / "mrc.json",
                device_id=device.device_id,
            )
        return self.connections[switch]

    def _apply(self, new: SwitchIntent) -> None:
        diff = diff_switch(self.installed.get(new.switch), new)
        sw = self._connection(new.switch)
        _write(sw.insert, [member_entity(m) for m in diff.members.inserts])
        _write(sw.modify, [member_entity(m) for m in diff.members.modifies])
        _write(sw.insert, [group_entity(g) for g in diff.groups.inserts])
        _write(sw.insert, [next_entry(g) for g in diff.groups.inserts])
        _write(sw.modify, [group_entity(g) for g in diff.groups.modifies])
        for table in (diff.routes_v4, diff.routes_v6):
            _write(sw.insert, [route_entry(r) for r in table.inserts])
            _write(sw.modify, [route_entry(r) for r in table.modifies])
            _write(sw.delete, [route_entry(r) for r in table.deletes])
        _write(sw.delete, [next_entry(g) for g in diff.groups.deletes])
        _write(sw.delete, [group_entity(g) for g in diff.groups.deletes])
        _write(sw.delete, [member_entity(m) for m in diff.members.deletes])
        self.installed[new.switch] = new


def _write(call: Any, entities: Iterable[Any]) -> None:
    batch = list(entities)
    if batch:
        call(batch)


def _close_quietly(connection: SyncSwitch) -> None:
    # A connection to a killed switch may fail to close cleanly; it is dropped either way.
    with contextlib.suppress(Exception):
        connection.close()
