"""L3 forwarding: routes for IPv4 and IPv6, MAC rewrite, TTL, checksum, and the drops that count."""

from __future__ import annotations

import ptf.testutils as tu
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from tests.ptf.base import SWITCH_MAC, MrcPtfTest, host_mac
from tests.ptf.packets import DST_V4, DST_V6, HOST_MAC, mrc_data, mrc_nack, mrc_sack, routed

DROP_TTL_EXPIRED = 8
DROP_NO_ROUTE = 7
DROP_NOT_IP = 9


class RoutesForwardIpv4AndIpv6WithMacRewriteAndTtl(MrcPtfTest):
    def runTest(self) -> None:
        self.route_to_port([f"{DST_V4}/32", f"{DST_V6}/128"], port=2, next_id=1)
        for version in (4, 6):
            for pkt in (
                mrc_data(SWITCH_MAC, version=version, psn=7),
                mrc_sack(SWITCH_MAC, version=version, psn=7),
                mrc_nack(SWITCH_MAC, version=version, psn=7),
            ):
                sent = Ether(bytes(pkt))
                tu.send_packet(self, 1, sent)
                tu.verify_packet(self, routed(sent, SWITCH_MAC, host_mac(2)), 2)
        tu.verify_no_other_packets(self)


class LongestPrefixWins(MrcPtfTest):
    def runTest(self) -> None:
        self.route_to_port(["10.0.0.0/8"], port=3, next_id=1)
        self.route_to_port(["10.0.2.0/24"], port=4, next_id=2)
        sent = Ether(bytes(mrc_data(SWITCH_MAC)))
        tu.send_packet(self, 1, sent)
        tu.verify_packet(self, routed(sent, SWITCH_MAC, host_mac(4)), 4)
        other = Ether(bytes(mrc_data(SWITCH_MAC, dst="10.9.9.9")))
        tu.send_packet(self, 1, other)
        tu.verify_packet(self, routed(other, SWITCH_MAC, host_mac(3)), 3)
        tu.verify_no_other_packets(self)


class PortCountersCountRxAndTx(MrcPtfTest):
    def runTest(self) -> None:
        self.route_to_port([f"{DST_V4}/32"], port=2, next_id=1)
        rx0 = self.counter("MrcIngress.port_rx", 1)
        tx0 = self.counter("MrcEgress.port_tx", 2)
        for psn in range(10):
            tu.send_packet(self, 1, mrc_data(SWITCH_MAC, psn=psn, payload_len=64))
        got = self.collect([2])
        self.assertEqual(len(got[2]), 10)
        self.assertEqual(self.counter("MrcIngress.port_rx", 1) - rx0, 10)
        self.assertEqual(self.counter("MrcEgress.port_tx", 2) - tx0, 10)


class ExpiredTtlIsDroppedAndCounted(MrcPtfTest):
    def runTest(self) -> None:
        self.route_to_port([f"{DST_V4}/32", f"{DST_V6}/128"], port=2, next_id=1)
        before = self.drop_reason_count(DROP_TTL_EXPIRED)
        tu.send_packet(self, 1, mrc_data(SWITCH_MAC, ttl=1))
        tu.send_packet(self, 1, mrc_data(SWITCH_MAC, version=6, ttl=1))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drop_reason_count(DROP_TTL_EXPIRED) - before, 2)


class UnroutedAndNonIpAreDroppedAndCounted(MrcPtfTest):
    def runTest(self) -> None:
        no_route = self.drop_reason_count(DROP_NO_ROUTE)
        not_ip = self.drop_reason_count(DROP_NOT_IP)
        port_drops = self.counter("MrcIngress.port_drops", 1)
        tu.send_packet(self, 1, mrc_data(SWITCH_MAC))
        tu.send_packet(self, 1, Ether(dst=SWITCH_MAC, src=HOST_MAC, type=0x9000) / Raw(b"x" * 50))
        tu.verify_no_other_packets(self)
        self.assertEqual(self.drop_reason_count(DROP_NO_ROUTE) - no_route, 1)
        self.assertEqual(self.drop_reason_count(DROP_NOT_IP) - not_ip, 1)
        self.assertEqual(self.counter("MrcIngress.port_drops", 1) - port_drops, 2)


class NonMrcUdpIsRoutedUntouched(MrcPtfTest):
    def runTest(self) -> None:
        self.route_to_port([f"{DST_V4}/32", f"{DST_V6}/128"], port=5, next_id=1)
        for ip in (IP(src="10.0.1.1", dst=DST_V4), IPv6(src="fd00:1::1", dst=DST_V6)):
            frame = Ether(dst=SWITCH_MAC, src=HOST_MAC) / ip / UDP(sport=1, dport=53)
            sent = Ether(bytes(frame / Raw(b"q" * 40)))
            tu.send_packet(self, 1, sent)
            tu.verify_packet(self, routed(sent, SWITCH_MAC, host_mac(5)), 5)
        tu.verify_no_other_packets(self)
