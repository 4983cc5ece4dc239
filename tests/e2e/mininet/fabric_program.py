"""A stand-in for the controller, just enough to forward pings: push ``mrc.json`` to every
switch and write the routes, members and groups of ``controller.intent``.

Entities are mapped to P4 the way ``controller.southbound.mapping`` maps them: one
action-profile member per next-hop member (``routing_hashed``), one group per next-hop group
with ``watch_port`` set on every member of a multi-member group, a one-member group holding the
member's unwatched twin (``pinned_member_id``), the ``hashed`` table pointing a next id at its
group, and LPM routes setting the next id. Changes are written as intent diffs, in the order
``controller.intent.diff`` documents as safe. The controller issue replaces all of this.

Two BMv2/PI behaviours measured here shape how it is used:

* a packet that reaches a group whose members are all deactivated by ``watch_port`` kills
  ``simple_switch_grpc`` (SIGFPE, exit status -8). The intent gives every spine a one-member
  group per leaf and every leaf a one-member group per host; those watch no port (their
  unwatched twin member), so a cut drops their packets at the dead port instead;
* reprogramming groups right after a cut, before BMv2 has polled the link down and PI's
  watch-port enforcer has acted, now and then also ended with the spine on the cut link dead
  (SIGFPE) on a loaded machine; the tests wait for BMv2 to report the port down first
  (``TestbedNetwork.link_state``);
* removing a member from a group that carries ``watch_port`` fails in PI (see
  :func:`shrink_steps`).
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
from controller.southbound.mapping import is_pinned
from controller.southbound.p4_program import pinned_member_id
from tests.e2e.mininet.environment import P4_BUILD
from tools.p4rt_sync import SyncSwitch
from topologies import LinkId

SELECTOR = "MrcIngress.next.hashed_selector"
MEMBER_COUNTER = "MrcIngress.next.member_packets"


def member_entity(member: NextHopMember, *, pinned: bool = False) -> fy.P4ActionProfileMember:
    """The member of one next hop, or (``pinned``) its unwatched twin for one-member groups."""
    return fy.P4ActionProfileMember(
        SELECTOR,
        member_id=pinned_member_id(member.member_index) if pinned else _member_id(member),
        action=fy.P4TableAction(
            "MrcIngress.next.routing_hashed",
            port=member.egress_port,
            smac=member.src_mac,
            dmac=member.dst_mac,
            member_index=member.member_index,
        ),
    )


def member_refs(group: NextHopGroup) -> list[tuple[int, int | None]]:
    """(member id, watched port) of each member of the group: a one-member group holds the
    unwatched twin, so a cut never leaves a group with every member down."""
    if is_pinned(group):
        return [(pinned_member_id(group.members[0].member_index), None)]
    return [(_member_id(m), m.watch_port) for m in group.members]


def pinned_members(intent: SwitchIntent | None) -> dict[int, NextHopMember]:
    """The members whose unwatched twin some one-member group of ``intent`` holds."""
    if intent is None:
        return {}
    return {g.members[0].member_index: g.members[0] for g in intent.groups if is_pinned(g)}


def group_entity(group: NextHopGroup, unwatched: Collection[int] = ()) -> fy.P4ActionProfileGroup:
    """The group, with ``watch_port`` on its watched members except the ids in ``unwatched``."""
    members = [
        fy.P4Member(member_id, weight=1 if watch is None or member_id in unwatched else (1, watch))
        for member_id, watch in member_refs(group)
    ]
    return fy.P4ActionProfileGroup(SELECTOR, group_id=group.group_id, members=members)


def shrink_steps(old: NextHopGroup, new: NextHopGroup) -> list[fy.P4ActionProfileGroup]:
    """The group modifies that take ``old`` to ``new`` on PI/BMv2.

    PI (as built here) fails a modify that removes a member carrying a ``watch_port``
    (UNKNOWN "Unexpected error in RPC handling", the member being removed all the same).
    Clearing the leaving members' ``watch_port`` in a first modify, then removing them,
    succeeds.
    """
    kept = {member_id for member_id, _ in member_refs(new)}
    leaving = [m for m, watch in member_refs(old) if m not in kept and watch is not None]
    if not leaving:
        return [group_entity(new)]
    return [group_entity(old, unwatched=leaving), group_entity(new)]


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
        held = self.installed.get(new.switch)
        diff = diff_switch(held, new)
        sw = self._connection(new.switch)
        held_pins, new_pins = pinned_members(held), pinned_members(new)
        _write(sw.insert, [member_entity(m) for m in diff.members.inserts])
        _write(sw.modify, [member_entity(m) for m in diff.members.modifies])
        _write(
            sw.insert,
            [member_entity(m, pinned=True) for i, m in new_pins.items() if i not in held_pins],
        )
        _write(
            sw.modify,
            [
                member_entity(m, pinned=True)
                for i, m in new_pins.items()
                if i in held_pins and held_pins[i] != m
            ],
        )
        _write(sw.insert, [group_entity(g) for g in diff.groups.inserts])
        _write(sw.insert, [next_entry(g) for g in diff.groups.inserts])
        old_groups = {g.group_id: g for g in (self.installed.get(new.switch) or new).groups}
        for group in diff.groups.modifies:
            for step in shrink_steps(old_groups[group.group_id], group):
                sw.modify([step])
        for table in (diff.routes_v4, diff.routes_v6):
            _write(sw.insert, [route_entry(r) for r in table.inserts])
            _write(sw.modify, [route_entry(r) for r in table.modifies])
            _write(sw.delete, [route_entry(r) for r in table.deletes])
        _write(sw.delete, [next_entry(g) for g in diff.groups.deletes])
        _write(sw.delete, [group_entity(g) for g in diff.groups.deletes])
        _write(
            sw.delete,
            [member_entity(m, pinned=True) for i, m in held_pins.items() if i not in new_pins],
        )
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
