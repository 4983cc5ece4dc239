"""SRv6 uSID source routing: the shift, the last hop, foreign and malformed carriers, hop limit.

The switch under test owns uSID MY_USID in BLOCK; its neighbours 0x0002 and 0x0003 sit behind
ports 2 and 3. A carrier is Ether / IPv6(outer, next header 41 or 4) / the MRC packet.
"""

from __future__ import annotations

from ipaddress import IPv6Network

import finsy as fy
import ptf.testutils as tu
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from tests.ptf.base import SWITCH_MAC, MrcPtfTest, host_mac
from tests.ptf.packets import DST_V4, DST_V6, HOST_MAC, mrc_data, routed
from wire import srv6
from wire.constants import ECN_CE, ECN_ECT0, DscpClass

DROP_TTL_EXPIRED = 8
DROP_SRV6_FOREIGN_SID = 10
DROP_SRV6_BAD_NEXT = 11

BLOCK = IPv6Network("fcbb:bb00::/32")
OTHER_BLOCK = IPv6Network("fcbb:bb01::/32")
MY_USID = 0x0001
NEIGHBOURS = {0x0002: 2, 0x0003: 3}
LAST_HOP_PORT = 4
OUTER_SRC = "fd00:0:1::1"


def carrier(
    usids: list[int],
    *,
    version: int = 6,
    block: IPv6Network = BLOCK,
    hop_limit: int = 64,
    ecn: int = ECN_ECT0,
    inner_ttl: int = 64,
) -> Ether:
    """An MRC data packet of IP ``version`` inside an SRv6 carrier through ``usids``."""
    inner = Ether(bytes(mrc_data(SWITCH_MAC, version=version, ecn=ecn, ttl=inner_ttl)))
    outer = srv6.encapsulate(
        inner.payload, src=OUTER_SRC, block=block, usids=usids, hop_limit=hop_limit
    )
    return Ether(src=HOST_MAC, dst=SWITCH_MAC) / outer


class Srv6Test(MrcPtfTest):
    def setUp(self) -> None:
        super().setUp()
        block = int(BLOCK.network_address) >> 96
        self.insert(
            fy.P4TableEntry(
                "MrcIngress.srv6.my_usid",
                match=fy.P4TableMatch(block=block, usid=MY_USID),
                action=fy.P4TableAction("MrcIngress.srv6.usid_end"),
            )
        )
        for usid, port in NEIGHBOURS.items():
            self.insert(
                fy.P4TableEntry(
                    "MrcIngress.srv6.usid_next",
                    match=fy.P4TableMatch(block=block, usid=usid),
                    action=fy.P4TableAction(
                        "MrcIngress.srv6.usid_forward",
                        port=port,
                        smac=SWITCH_MAC,
                        dmac=host_mac(port),
                    ),
                )
            )
        self.route_to_port([f"{DST_V4}/32", f"{DST_V6}/128"], port=LAST_HOP_PORT, next_id=1)

    def assert_dropped_as(self, frame: Ether, reason: int) -> None:
        before = self.drop_reason_count(reason)
        tu.send_packet(self, 1, frame)
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drop_reason_count(reason) - before, 1)


def after_shift(sent: Ether, port: int) -> Ether:
    """What a transit switch sends: uSIDs shifted, outer hop limit - 1, MACs rewritten, the
    inner packet untouched."""
    out = Ether(bytes(sent))
    out[Ether].src = SWITCH_MAC
    out[Ether].dst = host_mac(port)
    outer = out[IPv6]
    outer.dst = str(srv6.shifted(outer.dst))
    outer.hlim -= 1
    return Ether(bytes(out))


class ShiftForwardsToTheNextUsid(Srv6Test):
    def runTest(self) -> None:
        for version in (6, 4):
            for next_usid, port in NEIGHBOURS.items():
                sent = carrier([MY_USID, next_usid, 0x0009], version=version)
                expected = after_shift(sent, port)
                self.assertEqual(srv6.parse_carrier(expected[IPv6].dst).usids, (next_usid, 0x0009))
                tu.send_packet(self, 1, sent)
                tu.verify_packet(self, expected, port)
        tu.verify_no_other_packets(self)


class TransitLeavesTheInnerHopLimitAlone(Srv6Test):
    def runTest(self) -> None:
        # An inner hop limit of 1 would be dropped if routed; in transit only the outer counts.
        sent = carrier([MY_USID, 0x0002], inner_ttl=1)
        tu.send_packet(self, 1, sent)
        tu.verify_packet(self, after_shift(sent, 2), 2)
        tu.verify_no_other_packets(self)


class LastHopDecapsulatesAndRoutesTheInnerPacket(Srv6Test):
    def runTest(self) -> None:
        for version in (6, 4):
            sent = carrier([MY_USID], version=version)
            inner = Ether(src=HOST_MAC, dst=SWITCH_MAC) / sent[IPv6].payload
            expected = routed(Ether(bytes(inner)), SWITCH_MAC, host_mac(LAST_HOP_PORT))
            self.assertEqual(expected.type, 0x86DD if version == 6 else 0x0800)
            tu.send_packet(self, 1, sent)
            tu.verify_packet(self, expected, LAST_HOP_PORT)
        tu.verify_no_other_packets(self)


class LastHopCarriesACongestionMarkOntoTheInnerHeader(Srv6Test):
    def runTest(self) -> None:
        for version in (6, 4):
            sent = carrier([MY_USID], version=version)
            sent[IPv6].tc = (sent[IPv6].tc & ~0x3) | ECN_CE
            tu.send_packet(self, 1, sent)
            got = self.collect([LAST_HOP_PORT])[LAST_HOP_PORT]
            self.assertEqual(len(got), 1)
            frame = Ether(got[0])
            ecn = frame[IPv6].tc & 0x3 if version == 6 else frame[IP].tos & 0x3
            self.assertEqual(ecn, ECN_CE)
            self.assertEqual(frame[UDP].dport, 4791)


class ForeignSidIsDroppedAndCounted(Srv6Test):
    def runTest(self) -> None:
        # Another switch's uSID, our uSID in another block, and a carrier with no uSID left.
        self.assert_dropped_as(carrier([0x0002, MY_USID]), DROP_SRV6_FOREIGN_SID)
        self.assert_dropped_as(carrier([MY_USID, 0x0002], block=OTHER_BLOCK), DROP_SRV6_FOREIGN_SID)
        empty = carrier([MY_USID])
        empty[IPv6].dst = str(BLOCK.network_address)
        self.assert_dropped_as(empty, DROP_SRV6_FOREIGN_SID)


class NextUsidNamingNoNeighbourIsDroppedAndCounted(Srv6Test):
    def runTest(self) -> None:
        self.assert_dropped_as(carrier([MY_USID, 0x0042]), DROP_SRV6_BAD_NEXT)


class OuterHopLimitExpiresTheCarrier(Srv6Test):
    def runTest(self) -> None:
        self.assert_dropped_as(carrier([MY_USID, 0x0002], hop_limit=1), DROP_TTL_EXPIRED)
        self.assert_dropped_as(carrier([MY_USID], hop_limit=1), DROP_TTL_EXPIRED)
        sent = carrier([MY_USID, 0x0002], hop_limit=2)
        tu.send_packet(self, 1, sent)
        tu.verify_packet(self, after_shift(sent, 2), 2)
        tu.verify_no_other_packets(self)


class TruncatedCarrierIsDroppedAsTooShort(Srv6Test):
    def runTest(self) -> None:
        whole = bytes(carrier([MY_USID, 0x0002]))
        before = self.drop_reason_count(0)
        tu.send_packet(self, 1, whole[: 14 + 40 + 20])
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drop_reason_count(0) - before, 1)


class TrimmedCarrierHasBothHeadersCutAndRemarked(Srv6Test):
    def runTest(self) -> None:
        from tests.ptf.tests.congestion import (
            MRC_DATA_HEADERS,
            QUEUE_DEPTH,
            RATE_PPS,
            SEND_PPS,
            TRIM_THRESHOLD,
            send_paced,
        )

        port = 2
        self.set_queue(port, RATE_PPS, QUEUE_DEPTH)
        self.set_trim(port, TRIM_THRESHOLD, host_facing=False)
        sent = [carrier([MY_USID, 0x0002, 0x0009]) for _ in range(200)]
        send_paced(self, sent, SEND_PPS)
        got = [Ether(raw) for raw in self.collect([port], timeout=3.0)[port]]
        self.assertEqual(len(got), len(sent))
        trimmed = [p for p in got if p[IPv6].tc >> 2 == DscpClass.TRIMMED]
        self.assertGreater(len(trimmed), len(sent) // 4)
        for p in trimmed:
            outer, inner = p[IPv6], p[IPv6].payload
            self.assertEqual(srv6.parse_carrier(outer.dst).usids, (0x0002, 0x0009))
            self.assertEqual(inner.tc >> 2, DscpClass.TRIMMED)
            self.assertEqual(inner.plen, 8 + MRC_DATA_HEADERS)
            self.assertEqual(outer.plen, 40 + 8 + MRC_DATA_HEADERS)
            self.assertEqual(len(bytes(outer)), 40 + 40 + 8 + MRC_DATA_HEADERS)
