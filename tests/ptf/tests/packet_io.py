"""Packet I/O with the controller: LLDP punted as packet-in, packet-out sent where it says."""

from __future__ import annotations

import ptf.testutils as tu
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from tests.ptf.base import MrcPtfTest

LLDP_MULTICAST = "01:80:c2:00:00:0e"


class LldpGoesToTheControllerWithItsIngressPort(MrcPtfTest):
    def runTest(self) -> None:
        self.sw.start_packet_in()
        probe = Ether(dst=LLDP_MULTICAST, src="00:00:00:00:00:33", type=0x88CC) / Raw(b"p" * 46)
        tu.send_packet(self, 3, probe)
        pkt_in = self.sw.next_packet_in(timeout=5)
        self.assertIsNotNone(pkt_in)
        assert pkt_in is not None
        self.assertEqual(pkt_in["ingress_port"], 3)
        self.assertEqual(bytes(pkt_in.payload), bytes(probe))
        tu.verify_no_other_packets(self)


class PacketOutLeavesOnTheNamedPort(MrcPtfTest):
    def runTest(self) -> None:
        frame = Ether(dst=LLDP_MULTICAST, src="00:00:00:00:aa:01", type=0x88CC) / Raw(b"o" * 46)
        self.sw.packet_out(bytes(frame), egress_port=4)
        tu.verify_packet(self, frame, 4)
        tu.verify_no_other_packets(self)
