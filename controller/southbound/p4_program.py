"""The P4Runtime names and numbers of ``p4src/mrc.p4`` that the P4Runtime southbound writes.

Every name is pinned in the P4 source with an absolute ``@name``, so these strings only change
when the program's interface does; the unit tests check each of them against the compiled P4Info.
"""

from __future__ import annotations

from p4src import artifact
from wire.constants import DscpClass, RoceDscp
from wire.dscp import TrafficClass

#: The compiled artifacts the controller pushes when a switch lacks them.
P4INFO_PATH = artifact("mrc.p4info.txtpb")
P4BLOB_PATH = artifact("mrc.json")

#: ``CPU_PORT`` in p4src/include/defines.p4: compiled in, so a topology must agree with it.
COMPILED_CPU_PORT = 255

# Tables, actions and the action selector.
ROUTES_V4 = "MrcIngress.routing.routes_v4"
ROUTES_V6 = "MrcIngress.routing.routes_v6"
SET_NEXT_ID = "MrcIngress.routing.set_next_id"
NEXT_HASHED = "MrcIngress.next.hashed"
HASHED_SELECTOR = "MrcIngress.next.hashed_selector"
ROUTING_HASHED = "MrcIngress.next.routing_hashed"
TRIM_CONFIG = "MrcIngress.trim.trim_config"
SET_TRIM_CONFIG = "MrcIngress.trim.set_trim_config"
TRIM_DSCP = "MrcIngress.trim.trim_dscp"
SET_TRIM_DSCP = "MrcIngress.trim.set_trim_dscp"
PORT_ECN = "MrcEgress.ecn.port_ecn"
SET_ECN_THRESHOLDS = "MrcEgress.ecn.set_ecn_thresholds"
ECN_DISABLED = "MrcEgress.ecn.ecn_disabled"
DSCP_CLASSES = "MrcIngress.classify.dscp_classes"
SET_CLASS = "MrcIngress.classify.set_class"
EV_FIELD = "MrcIngress.structured_ev.ev_field"
SET_EV_FIELD = "MrcIngress.structured_ev.set_ev_field"
EV_UPLINKS = "MrcIngress.structured_ev.uplinks"
EV_UPLINK = "MrcIngress.structured_ev.ev_uplink"
MY_USID = "MrcIngress.srv6.my_usid"
USID_END = "MrcIngress.srv6.usid_end"
USID_NEXT = "MrcIngress.srv6.usid_next"
USID_FORWARD = "MrcIngress.srv6.usid_forward"
#: The action of a keyless table that does nothing (ev_field's default: no steering).
NO_ACTION = "NoAction"

#: Tables the controller owns entirely: what a read-back finds there and the intent lacks is
#: deleted. (trim_dscp is keyless: only its default entry is written.)
MANAGED_TABLES = (
    ROUTES_V4,
    ROUTES_V6,
    NEXT_HASHED,
    TRIM_CONFIG,
    PORT_ECN,
    DSCP_CLASSES,
    EV_UPLINKS,
    MY_USID,
    USID_NEXT,
)
#: Keyless tables whose default action the controller sets.
MANAGED_DEFAULT_TABLES = (TRIM_DSCP, EV_FIELD)

# Counters (indexed by port, or by member index for member_packets).
PORT_RX = "MrcIngress.port_rx"
PORT_TX = "MrcEgress.port_tx"
PORT_DROPS = "MrcIngress.port_drops"
TRIMS = "MrcIngress.trim.trims"
ECN_MARKS = "MrcEgress.ecn.ecn_marks"
MEMBER_PACKETS = "MrcIngress.next.member_packets"

# Packet I/O metadata.
PACKET_IN_PORT = "ingress_port"
PACKET_OUT_PORT = "egress_port"
PACKET_OUT_PAD = "_pad"

#: Internal class numbers of p4src/include/defines.p4 (CLASS_*), by traffic class.
P4_CLASS_OF: dict[TrafficClass, int] = {
    DscpClass.TRIMMABLE: 1,
    DscpClass.TRIMMABLE_RETX: 2,
    DscpClass.NO_TRIM: 3,
    DscpClass.TRIMMED: 4,
    DscpClass.TRIMMED_LASTHOP: 5,
    DscpClass.CONTROL: 6,
    RoceDscp.DATA: 7,
    RoceDscp.ACK: 8,
    RoceDscp.CNP: 9,
}


def member_id(member_index: int) -> int:
    """The action-profile member id of an intent member.

    ``member_index`` starts at 0; member ids start at 1 so that no entity uses id 0, which
    several P4Runtime servers treat as "unset".
    """
    return member_index + 1


#: Added to a member id for the unwatched twin of that member (see :func:`pinned_member_id`).
PINNED_MEMBER_ID_BASE = 1 << 16


def pinned_member_id(member_index: int) -> int:
    """The id of the unwatched twin of an intent member, each group's anchor.

    Every group holds one member that watches no port (``mapping.anchor``): BMv2's selector
    (PI 1.15) divides by the number of live members and dies with SIGFPE when a packet reaches a
    group whose every member is down. The twin is a member of its own, not the watched member
    with its ``watch_port`` cleared, because PI cannot later re-watch a member in place (its
    watch-port enforcer re-activates an already active member and fails); a group whose anchor
    changes swaps one twin for another, and the old anchor's watched member, in one modify.
    """
    return PINNED_MEMBER_ID_BASE + member_id(member_index)
