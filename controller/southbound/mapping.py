"""From a switch's intent to the mrc.p4 entities that implement it.

The one place that knows how intent concepts become P4 state:

* a member is an action-profile member running ``routing_hashed`` (port, MACs, counter index),
  and has an unwatched twin (same action, its own id);
* a group is an action-profile group plus the ``next.hashed`` entry that selects it by next-hop
  id (a route's ``next_id`` is its group's id). Every member but one sets ``watch_port``, so
  BMv2 stops hashing onto it as soon as its port's carrier goes (data-plane failover). The one,
  the group's *anchor* (its member of lowest index, :func:`anchor`), is the member's unwatched
  twin (:func:`p4_program.pinned_member_id`): BMv2 1.15 dies (SIGFPE, a division by the number
  of live members) when a packet reaches a group whose every member is down, and with an anchor
  no group ever has none. A one-member group is its anchor alone. When every port of a group is
  down, its packets go to the anchor's dead port and are dropped there, until the controller
  hears of the cut and prunes (``controller.intent.policy``: a group left with no live member is
  removed with its routes). The price: while only the anchor's port is down, the anchor's share
  is lost until the controller prunes it (tens of ms), rather than until BMv2's own link poll
  (up to 200 ms) - no slower in practice, and the controller alone must handle it when it runs
  without link discovery;
* a route is an LPM entry setting that next-hop id;
* a port is a ``trim_config`` entry and a ``port_ecn`` entry (thresholds, or marking off
  toward hosts); queue depth and rate are not P4 state (:mod:`controller.southbound.queues`);
* DSCP rules are ``dscp_classes`` entries, and the TRIMMED / TRIMMED_LASTHOP values also set
  the default action of the keyless ``trim_dscp`` table;
* structured EV is the default action of the keyless ``ev_field`` table (``set_ev_field``, or
  ``NoAction`` when the switch does not steer: always written, so leaving the mode undoes it)
  and an ``uplinks`` entry per (group, field value);
* SRv6 is a ``my_usid`` entry per local uSID and a ``usid_next`` entry per neighbour, matched
  on the outer destination's block (its top 32 bits) and a uSID.
"""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import IPv4Network, IPv6Network

from controller.intent import (
    DscpRule,
    EvFieldIntent,
    EvUplink,
    LocalUsid,
    NextHopGroup,
    NextHopMember,
    PortIntent,
    Route,
    UsidNextHop,
)
from controller.intent.model import SwitchIntent
from controller.southbound import p4_program as p4
from controller.southbound.records import (
    ActionCall,
    GroupMemberRef,
    GroupRecord,
    MemberRecord,
    Record,
    RecordSet,
    TableEntryRecord,
)
from wire.constants import DscpClass


def desired_records(intent: SwitchIntent) -> RecordSet:
    """Every P4 entity the switch must hold to implement ``intent``."""
    return RecordSet(_records(intent))


def mac_to_int(mac: str) -> int:
    """A colon-separated MAC as the integer P4Runtime carries."""
    octets = mac.split(":")
    if len(octets) != 6:
        raise ValueError(f"malformed MAC address {mac!r}")
    return int("".join(octets), 16)


def member_record(member: NextHopMember) -> MemberRecord:
    """The action-profile member of one next hop."""
    return MemberRecord(
        p4.HASHED_SELECTOR,
        p4.member_id(member.member_index),
        ActionCall.of(
            p4.ROUTING_HASHED,
            port=member.egress_port,
            smac=mac_to_int(member.src_mac),
            dmac=mac_to_int(member.dst_mac),
            member_index=member.member_index,
        ),
    )


def pinned_member_record(member: NextHopMember) -> MemberRecord:
    """The unwatched twin of a member, a group's anchor (see the module docstring)."""
    record = member_record(member)
    return MemberRecord(record.profile, p4.pinned_member_id(member.member_index), record.action)


def is_pinned(group: NextHopGroup) -> bool:
    """Whether the group has a single member, which then watches no port."""
    return len(group.members) == 1


def anchor(group: NextHopGroup) -> NextHopMember:
    """The member a group holds as its unwatched twin (see the module docstring): the one of
    lowest member index, so the choice is stable while that member stays in the group."""
    return min(group.members, key=lambda member: member.member_index)


def group_records(group: NextHopGroup) -> tuple[GroupRecord, TableEntryRecord]:
    """The action-profile group of a next-hop group, and the entry that selects it."""
    fixed = anchor(group)
    refs = [GroupMemberRef(p4.pinned_member_id(fixed.member_index), 1, None)]
    refs += [
        GroupMemberRef(p4.member_id(member.member_index), 1, member.watch_port)
        for member in group.members
        if member.member_index != fixed.member_index
    ]
    record = GroupRecord.of(p4.HASHED_SELECTOR, group.group_id, refs)
    selector = TableEntryRecord(
        p4.NEXT_HASHED, (("next_id", group.group_id),), group_id=group.group_id
    )
    return record, selector


def route_record(route: Route) -> TableEntryRecord:
    """The LPM entry of one route."""
    prefix = route.prefix
    if isinstance(prefix, IPv4Network):
        table, field = p4.ROUTES_V4, "ipv4_dst"
    elif isinstance(prefix, IPv6Network):
        table, field = p4.ROUTES_V6, "ipv6_dst"
    else:  # pragma: no cover - Route only holds the two network types
        raise TypeError(f"unsupported prefix {prefix!r}")
    value = (int(prefix.network_address), prefix.prefixlen)
    return TableEntryRecord(
        table, ((field, value),), ActionCall.of(p4.SET_NEXT_ID, next_id=route.next_id)
    )


def port_records(port: PortIntent) -> tuple[TableEntryRecord, ...]:
    """The trimming (unless the port never trims: no entry, no trimming) and ECN entries of
    one port."""
    ecn_action = (
        ActionCall.of(
            p4.SET_ECN_THRESHOLDS,
            min_qdepth=port.ecn_min_threshold,
            max_qdepth=port.ecn_max_threshold,
        )
        if port.ecn_enabled
        else ActionCall.of(p4.ECN_DISABLED)
    )
    ecn = TableEntryRecord(p4.PORT_ECN, (("egress_port", port.port),), ecn_action)
    if port.trim_threshold is None:
        return (ecn,)
    trim = TableEntryRecord(
        p4.TRIM_CONFIG,
        (("egress_port", port.port),),
        ActionCall.of(
            p4.SET_TRIM_CONFIG,
            threshold=port.trim_threshold,
            host_facing=int(port.host_facing),
        ),
    )
    return (trim, ecn)


def dscp_record(rule: DscpRule) -> TableEntryRecord:
    """The classification entry of one DSCP value."""
    return TableEntryRecord(
        p4.DSCP_CLASSES,
        (("dscp", rule.dscp),),
        ActionCall.of(p4.SET_CLASS, mrc_class=p4.P4_CLASS_OF[rule.traffic_class]),
    )


def trim_dscp_record(rules: tuple[DscpRule, ...]) -> TableEntryRecord | None:
    """The default action of ``trim_dscp`` (what a trimmed header is re-marked with), or None
    when the rules do not name both trimmed classes."""
    by_class = {rule.traffic_class: rule.dscp for rule in rules}
    trimmed = by_class.get(DscpClass.TRIMMED)
    lasthop = by_class.get(DscpClass.TRIMMED_LASTHOP)
    if trimmed is None or lasthop is None:
        return None
    return TableEntryRecord(
        p4.TRIM_DSCP,
        (),
        ActionCall.of(p4.SET_TRIM_DSCP, trimmed=trimmed, trimmed_lasthop=lasthop),
        is_default=True,
    )


def ev_field_record(field: EvFieldIntent | None) -> TableEntryRecord:
    """The default action of ``ev_field``: where the switch reads its field, or nothing."""
    action = (
        ActionCall.of(p4.NO_ACTION)
        if field is None
        else ActionCall.of(p4.SET_EV_FIELD, shift=field.shift, mask=field.mask)
    )
    return TableEntryRecord(p4.EV_FIELD, (), action, is_default=True)


def ev_uplink_record(uplink: EvUplink) -> TableEntryRecord:
    """The exact uplink of one (group, EV field value)."""
    return TableEntryRecord(
        p4.EV_UPLINKS,
        (("ev_field", uplink.field_value), ("next_id", uplink.next_id)),
        ActionCall.of(
            p4.EV_UPLINK,
            port=uplink.egress_port,
            smac=mac_to_int(uplink.src_mac),
            dmac=mac_to_int(uplink.dst_mac),
        ),
    )


def usid_block_value(block: IPv6Network) -> int:
    """The top 32 bits of a /32 uSID block: what ``my_usid`` and ``usid_next`` match."""
    if block.prefixlen != 32:
        raise ValueError(f"a uSID block is a /32, not {block}")
    return int(block.network_address) >> 96


def local_usid_record(local: LocalUsid) -> TableEntryRecord:
    """The entry that makes a carrier's active uSID this switch's."""
    return TableEntryRecord(
        p4.MY_USID,
        (("block", usid_block_value(local.block)), ("usid", local.usid)),
        ActionCall.of(p4.USID_END),
    )


def usid_next_record(hop: UsidNextHop) -> TableEntryRecord:
    """The entry that sends a carrier toward the neighbour its next uSID names."""
    return TableEntryRecord(
        p4.USID_NEXT,
        (("block", usid_block_value(hop.block)), ("usid", hop.usid)),
        ActionCall.of(
            p4.USID_FORWARD,
            port=hop.egress_port,
            smac=mac_to_int(hop.src_mac),
            dmac=mac_to_int(hop.dst_mac),
        ),
    )


def _records(intent: SwitchIntent) -> Iterator[Record]:
    # Every member has its twin, used or not: a failover that moves a group's anchor is then a
    # group modify alone, with no member to insert or delete first.
    for member in intent.members:
        yield member_record(member)
        yield pinned_member_record(member)
    for group in intent.groups:
        yield from group_records(group)
    for route in (*intent.routes_v4, *intent.routes_v6):
        yield route_record(route)
    for port in intent.ports:
        yield from port_records(port)
    for rule in intent.dscp_rules:
        yield dscp_record(rule)
    default = trim_dscp_record(intent.dscp_rules)
    if default is not None:
        yield default
    yield ev_field_record(intent.ev_field)
    for uplink in intent.ev_uplinks:
        yield ev_uplink_record(uplink)
    for local in intent.local_usids:
        yield local_usid_record(local)
    for hop in intent.usid_next_hops:
        yield usid_next_record(hop)
