"""Where an EV goes: the flow an EV stands for, the walk from the sender's NIC to the
receiver's asking each switch, the kernel's answer read from ``ip route get``, and BMv2's
choice recomputed from its tables (routes, next hop, group members by handle, live ports)
and its selector's CRC-32."""

from __future__ import annotations

import json
from ipaddress import ip_address

import pytest

from testbed.live.paths import (
    Bmv2NextHops,
    CarrierNextHops,
    Flow,
    KernelNextHops,
    PathUnknown,
    dump_commands,
    parse_tables,
    selector_hash,
    walk,
)
from tests.unit.testbed.live.fake_sources import FakeNextHops
from topologies import load_topology


def test_an_ev_is_the_source_port_and_on_ipv6_the_flow_labels_low_bits():
    v4 = Flow.of_ev("10.0.1.1", "10.0.2.2", 0xC0015678)
    assert (v4.source_port, v4.flow_label, v4.destination_port) == (0xC001, 0, 4791)
    v6 = Flow.of_ev("fd00::1", "fd00::2", 0xC0015678)
    assert (v6.source_port, v6.flow_label) == (0xC001, 0x5678)
    with pytest.raises(ValueError, match="address family"):
        Flow.of_ev("10.0.1.1", "fd00::2", 1)


def _bmv2_crc32(data: bytes) -> int:
    """BMv2's crc32 (src/bm_sim/calculations.cpp): polynomial 0x04C11DB7 fed MSB first with
    each byte reflected, the remainder reflected, initial and final XOR 0xFFFFFFFF."""

    def reflect(value: int, bits: int) -> int:
        return int(f"{value:0{bits}b}"[::-1], 2)

    remainder = 0xFFFFFFFF
    for byte in data:
        remainder ^= reflect(byte, 8) << 24
        for _ in range(8):
            top = remainder & 0x80000000
            remainder = (remainder << 1) & 0xFFFFFFFF
            if top:
                remainder ^= 0x04C11DB7
    return reflect(remainder, 32) ^ 0xFFFFFFFF


def test_the_selector_hashes_both_addresses_as_128_bits_then_the_ev():
    v4 = Flow.of_ev("10.0.1.1", "10.0.2.2", 0xC0010000)
    fields = bytes(12) + bytes([10, 0, 1, 1]) + bytes(12) + bytes([10, 0, 2, 2])
    assert selector_hash(v4) == _bmv2_crc32(fields + bytes([0xC0, 0x01, 0, 0]))
    v6 = Flow.of_ev("fd00::1", "fd00::2", 0xC0015678)
    fields = ip_address("fd00::1").packed + ip_address("fd00::2").packed
    assert selector_hash(v6) == _bmv2_crc32(fields + bytes([0xC0, 0x01, 0x56, 0x78]))


# What simple_switch_CLI printed for dump_commands() on l1 of the leaf-spine preset run on
# bmv2 with the controller (hosts on ports 1 and 2, spines on 3 to 6), trimmed to fewer
# routes and members, trailing blanks dropped. The port list is from just after l1:4 was
# cut, the tables from before the controller took port 4's member (handle 6) out of group 2.
# Every next hop is a group, a lone member its anchor; each member index has two members,
# the watched one and its unwatched twin (handles 4 and 5 for index 2, group 2's anchor).
# BMv2 names a key by the field it reads, not by its P4Info name.
CLI_OUTPUT = """\
Obtaining JSON from switch...
Done
Control utility for runtime P4 table manipulation
RuntimeCmd:   port #       iface name       status  extra info
==================================================
    1         mn197b-l1-1         UP
    2         mn197b-l1-2         UP
    3         mn197b-l1-3         UP
    4         mn197b-l1-4        DOWN
    5         mn197b-l1-5         UP
    6         mn197b-l1-6         UP
RuntimeCmd: ==========
TABLE ENTRIES
**********
Dumping entry 0x0
Match key:
* ipv4.dst_addr       : LPM       0a000101/32
Action entry: MrcIngress.routing.set_next_id - 01
**********
Dumping entry 0x1
Match key:
* ipv4.dst_addr       : LPM       0a000102/32
Action entry: MrcIngress.routing.set_next_id - 02
**********
Dumping entry 0x2
Match key:
* ipv4.dst_addr       : LPM       0a000200/24
Action entry: MrcIngress.routing.set_next_id - 03
==========
Dumping default entry
Action entry: NoAction -
==========
RuntimeCmd: ==========
TABLE ENTRIES
**********
Dumping entry 0x2
Match key:
* ipv6.dst_addr       : LPM       fd000000000200000000000000000000/64
Action entry: MrcIngress.routing.set_next_id - 03
==========
Dumping default entry
Action entry: NoAction -
==========
RuntimeCmd: ==========
TABLE ENTRIES
**********
Dumping entry 0x0
Match key:
* scalars.local_metadata_t.next_id: EXACT     0001
Index: group(0)
**********
Dumping entry 0x1
Match key:
* scalars.local_metadata_t.next_id: EXACT     0002
Index: group(1)
**********
Dumping entry 0x2
Match key:
* scalars.local_metadata_t.next_id: EXACT     0003
Index: group(2)
==========
MEMBERS
**********
Dumping member 1
Action entry: MrcIngress.next.routing_hashed - 01, 020000010001, 021000010000, 00
**********
Dumping member 3
Action entry: MrcIngress.next.routing_hashed - 02, 020000010002, 021000020000, 01
**********
Dumping member 4
Action entry: MrcIngress.next.routing_hashed - 03, 020000010003, 020000030001, 02
**********
Dumping member 5
Action entry: MrcIngress.next.routing_hashed - 03, 020000010003, 020000030001, 02
**********
Dumping member 6
Action entry: MrcIngress.next.routing_hashed - 04, 020000010004, 020000040001, 03
**********
Dumping member 8
Action entry: MrcIngress.next.routing_hashed - 05, 020000010005, 020000050001, 04
**********
Dumping member 10
Action entry: MrcIngress.next.routing_hashed - 06, 020000010006, 020000060001, 05
==========
GROUPS
**********
Dumping group 0
Members: [1]
**********
Dumping group 1
Members: [3]
**********
Dumping group 2
Members: [5, 6, 8, 10]
==========
Dumping default entry
EMPTY
==========
RuntimeCmd:
"""


def test_bmv2_tables_are_read_from_the_clis_dumps():
    tables = parse_tables(CLI_OUTPUT)
    assert tables.ports_up == {1: True, 2: True, 3: True, 4: False, 5: True, 6: True}
    assert [(str(network), next_id) for network, next_id in tables.routes] == [
        ("fd00:0:2::/64", 3),
        ("10.0.1.1/32", 1),
        ("10.0.1.2/32", 2),
        ("10.0.2.0/24", 3),
    ]
    assert tables.next_ids == {1: ("group", 0), 2: ("group", 1), 3: ("group", 2)}
    assert {h: (m.port, m.member_index) for h, m in tables.members.items()} == {
        1: (1, 0),
        3: (2, 1),
        4: (3, 2),
        5: (3, 2),
        6: (4, 3),
        8: (5, 4),
        10: (6, 5),
    }
    assert tables.groups == {0: [1], 1: [3], 2: [5, 6, 8, 10]}


def _flows_by_choice(tables, count: int) -> dict[int, list[Flow]]:
    chosen: dict[int, list[Flow]] = {}
    for port in range(49152, 49152 + 400):
        flow = Flow.of_ev("10.0.1.2", "10.0.2.2", port << 16)
        chosen.setdefault(selector_hash(flow) % count, []).append(flow)
    return chosen


def test_bmv2_picks_the_hash_modulo_the_live_members_in_handle_order():
    tables = parse_tables(CLI_OUTPUT)
    assert tables.egress_port(Flow.of_ev("10.0.2.2", "10.0.1.1", 0)) == 1  # a lone anchor
    # Port 4 is down: its member (handle 6) is out; handles 5, 8 and 10 remain, in that order.
    for index, flows in _flows_by_choice(tables, 3).items():
        assert {tables.egress_port(flow) for flow in flows} == {(3, 5, 6)[index]}
    tables.ports_up[4] = True
    for index, flows in _flows_by_choice(tables, 4).items():
        assert {tables.egress_port(flow) for flow in flows} == {(3, 4, 5, 6)[index]}


def test_a_groups_anchor_stays_live_with_its_port_down():
    tables = parse_tables(CLI_OUTPUT)
    tables.ports_up = {3: False, 4: False, 5: False, 6: False}
    # Member index 2 (handle 5, port 3) is the anchor: it watches no port.
    flows = [Flow.of_ev("10.0.1.2", "10.0.2.2", port << 16) for port in range(49152, 49252)]
    assert {tables.egress_port(flow) for flow in flows} == {3}


def test_bmv2_without_a_route_or_a_member_cannot_say():
    tables = parse_tables(CLI_OUTPUT)
    with pytest.raises(PathUnknown, match=r"no route to 192\.0\.2\.1"):
        tables.egress_port(Flow.of_ev("10.0.1.2", "192.0.2.1", 0))
    tables.groups[2] = [5, 9]
    with pytest.raises(PathUnknown, match="member 9"):
        tables.egress_port(Flow.of_ev("10.0.1.2", "10.0.2.2", 0))


def test_bmv2_tables_are_read_once_per_period_per_switch():
    now = [0.0]
    calls: list[tuple[list[str], int]] = []

    def cli(commands: list[str], port: int) -> str:
        calls.append((commands, port))
        return CLI_OUTPUT

    hops = Bmv2NextHops({"l1": 9090}, run_cli=cli, clock=lambda: now[0])
    flow = Flow.of_ev("10.0.2.2", "10.0.1.1", 0)
    assert hops.egress_port("l1", 3, flow) == 1
    now[0] = 1.0
    assert hops.egress_port("l1", 4, flow) == 1
    assert calls == [(dump_commands(), 9090)]
    now[0] = 2.5
    hops.egress_port("l1", 3, flow)
    assert len(calls) == 2
    with pytest.raises(PathUnknown, match="no Thrift port"):
        hops.egress_port("s9", 1, flow)

    # A route to a next hop the switch no longer has: it changed between two dumps.
    changing = iter([CLI_OUTPUT.replace("Index: group(0)", "Index: group(9)"), CLI_OUTPUT])
    racing = Bmv2NextHops({"l1": 9090}, run_cli=lambda commands, port: next(changing))
    assert racing.egress_port("l1", 3, flow) == 1

    def failing(commands: list[str], port: int) -> str:
        raise RuntimeError("Could not connect to thrift client")

    with pytest.raises(PathUnknown, match="cannot be read: Could not connect"):
        Bmv2NextHops({"l1": 9090}, run_cli=failing).egress_port("l1", 1, flow)


def test_the_kernel_is_asked_in_the_switchs_namespace_with_the_packets_fields():
    asked: list[list[str]] = []

    def ip(argv: list[str]) -> str:
        asked.append(argv)
        return json.dumps([{"type": "unicast", "dst": "10.0.2.2", "dev": "swp4"}])

    hops = KernelNextHops("mn42", run=ip)
    assert hops.egress_port("l1", 1, Flow.of_ev("10.0.1.1", "10.0.2.2", 0xC0010000)) == 4
    assert asked == [
        ["-n", "mn42-l1", "-j", "-4", "route", "get", "10.0.2.2", "from", "10.0.1.1", "iif",
         "swp1", "ipproto", "udp", "sport", str(0xC001), "dport", "4791"],
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ([{"type": "unreachable", "dst": "10.0.2.2"}], "unreachable"),
        ([{"type": "unicast", "dev": "eth0"}], "not a switch port"),
        ([], "no route"),
        ("not json", "no JSON"),
    ],
)
def test_a_kernel_answer_that_names_no_switch_port_is_no_path(answer, reason):
    text = answer if isinstance(answer, str) else json.dumps(answer)
    hops = KernelNextHops("mn42", run=lambda argv: text)
    with pytest.raises(PathUnknown, match=reason):
        hops.egress_port("l1", 1, Flow.of_ev("10.0.1.1", "10.0.2.2", 0))


def test_a_walk_goes_from_the_senders_nic_to_the_receivers_through_each_choice():
    topology = load_topology("leaf-spine")
    hops = FakeNextHops(topology)
    paths = {}
    for port in range(49152, 49160):
        path = walk(topology, Flow.of_ev("10.0.1.1", "10.0.2.2", port << 16), hops)
        assert path.error is None
        assert path.nodes[0] == "h1" and path.nodes[1] == "l1"
        assert path.nodes[3:] == ("l2", "h4")
        assert path.links[0] == ("h1:0<->l1:1", "h1:0")
        assert path.links[-1] == ("h4:0<->l2:2", "l2:2")
        paths[port] = path.nodes[2]
    assert set(paths.values()) == {"s1", "s2", "s3", "s4"}  # the ports spread over spines
    assert hops.asked[:3] == [("l1", 1), ("s1", 1), ("l2", 3)]
    within = walk(topology, Flow.of_ev("10.0.1.1", "10.0.1.2", 0), hops)
    assert within.nodes == ("h1", "l1", "h2")


def test_a_walk_says_where_it_stops_short():
    topology = load_topology("leaf-spine")
    blind = walk(
        topology,
        Flow.of_ev("10.0.1.1", "10.0.2.2", 0),
        FakeNextHops(topology, blind=frozenset({"l2"})),
    )
    assert blind.nodes[-1] == "l2" and blind.error == "l2: its tables cannot be read"
    assert blind.to_json()["ok"] is False
    unknown = walk(topology, Flow.of_ev("10.9.9.9", "10.0.2.2", 0), FakeNextHops(topology))
    assert unknown.error == "no host NIC has the address 10.9.9.9"

    class Looping:
        def egress_port(self, switch: str, in_port: int, flow: Flow) -> int:
            return 3  # l1 -> s1 -> l1 (s1's port 3 is unused: the first answer that fails)

    looped = walk(topology, Flow.of_ev("10.0.1.1", "10.0.2.2", 0), Looping())
    assert looped.error == "s1 sends it out of unused port 3"

    class Bouncing:
        def egress_port(self, switch: str, in_port: int, flow: Flow) -> int:
            return 3 if switch == "l1" else 1  # l1:3 -> s1:1 -> back to l1:3

    bounced = walk(topology, Flow.of_ev("10.0.1.1", "10.0.2.2", 0), Bouncing())
    assert bounced.error is not None and "a loop" in bounced.error

    class Misdelivering:
        def egress_port(self, switch: str, in_port: int, flow: Flow) -> int:
            return 2  # l1 hands it to h2

    wrong = walk(topology, Flow.of_ev("10.0.1.1", "10.0.2.2", 0), Misdelivering())
    assert wrong.error == "delivered to h2:0 instead"


STRUCTURED_OUTPUT = """\
RuntimeCmd: ==========
TABLE ENTRIES
==========
Dumping default entry
Action entry: MrcIngress.structured_ev.set_ev_field - 10, 03
==========
RuntimeCmd: ==========
TABLE ENTRIES
**********
Dumping entry 0x0
Match key:
* scalars.local_metadata_t.next_id: EXACT     0003
* scalars.structured_ev_field     : EXACT     0000
Action entry: MrcIngress.structured_ev.ev_uplink - 03, 020000010003, 020000030001
**********
Dumping entry 0x1
Match key:
* scalars.local_metadata_t.next_id: EXACT     0003
* scalars.structured_ev_field     : EXACT     0001
Action entry: MrcIngress.structured_ev.ev_uplink - 04, 020000010004, 020000040001
**********
Dumping entry 0x2
Match key:
* scalars.local_metadata_t.next_id: EXACT     0003
* scalars.structured_ev_field     : EXACT     0002
Action entry: MrcIngress.structured_ev.ev_uplink - 05, 020000010005, 020000050001
**********
Dumping entry 0x3
Match key:
* scalars.local_metadata_t.next_id: EXACT     0003
* scalars.structured_ev_field     : EXACT     0003
Action entry: MrcIngress.structured_ev.ev_uplink - 06, 020000010006, 020000060001
==========
Dumping default entry
Action entry: NoAction -
==========
RuntimeCmd:
"""


def test_in_structured_mode_the_ev_field_picks_the_uplink_before_any_hash():
    """The dumps of a leaf in structured mode (EV bits 17-16 name the spine): the field's
    uplink is taken even with its port down (the switch does not check), and a next hop
    without uplink entries is hashed as before."""
    plain = parse_tables(CLI_OUTPUT)
    assert plain.ev_field is None and plain.uplinks == {}
    tables = parse_tables(CLI_OUTPUT + STRUCTURED_OUTPUT)
    assert tables.ev_field == (16, 3)
    assert tables.uplinks == {(3, 0): 3, (3, 1): 4, (3, 2): 5, (3, 3): 6}
    for value, port in enumerate((3, 4, 5, 6)):
        flows = [
            Flow.of_ev("10.0.1.2", "10.0.2.2", (0xC000 | high << 2 | value) << 16)
            for high in range(50)
        ]
        assert {tables.egress_port(flow) for flow in flows} == {port}
    assert tables.egress_port(Flow.of_ev("10.0.2.2", "10.0.1.1", 0xC0010000)) == 1
    assert any("structured_ev.uplinks" in command for command in dump_commands())


def test_in_srv6_mode_an_evs_path_is_its_carriers_both_ways() -> None:
    topology = load_topology("leaf-spine")
    hops = CarrierNextHops(topology)
    h1, h3 = (topology.host(name).nics[0].ipv6.ip for name in ("h1", "h3"))
    for field, spine in enumerate(("s1", "s2", "s3", "s4")):
        ev = (0xC000 | field) << 16
        there = walk(topology, Flow.of_ev(str(h1), str(h3), ev), hops)
        assert there.error is None and there.nodes == ("h1", "l1", spine, "l2", "h3")
        back = walk(topology, Flow.of_ev(str(h3), str(h1), ev), hops)
        assert back.error is None and back.nodes[2] == spine


def test_in_srv6_mode_a_flow_off_the_topology_has_no_path() -> None:
    topology = load_topology("leaf-spine")
    h1 = topology.host("h1").nics[0].ipv6.ip
    shown = walk(
        topology, Flow.of_ev(str(h1), "2001:db8::9", 0xC0000000), CarrierNextHops(topology)
    )
    assert shown.error is not None and "no carrier" in shown.error
