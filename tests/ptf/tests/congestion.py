"""Congestion: RED-like ECN marking and packet trimming on a slow BMv2 egress queue.

Each test slows port 2's normal-priority queue to RATE_PPS over Thrift and sends paced arrivals
above that rate (paced, not line-rate: BMv2's ingress sees the queue one dequeue late, so a burst
into an idle queue overflows before any decision can react; docs/bmv2.md).

No outcome rests on the sender keeping time. ``send_paced`` never makes up for a late send with
a burst, so a loaded machine only sends slower; SEND_PPS is six times RATE_PPS, so the queue
still builds at half the intended rate; and a test that expects no loss without trimming gives
the queue room for every frame it sends, so no bunching of arrivals can overflow it.
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import ptf.testutils as tu
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from tests.ptf.base import SWITCH_MAC, MrcPtfTest
from tests.ptf.packets import DST_V4, DST_V6, mrc_data, mrc_sack
from wire.constants import (
    BTH_LEN,
    ECN_CE,
    METH_LEN,
    RETH_LEN,
    ROCEV2_UDP_PORT,
    DscpClass,
    Opcode,
)

PORT = 2
RATE_PPS = 50
QUEUE_DEPTH = 64
SEND_PPS = 300
TRIM_THRESHOLD = 8
MRC_DATA_HEADERS = BTH_LEN + METH_LEN + RETH_LEN


def send_paced(test: MrcPtfTest, frames: list[Packet], pps: int) -> None:
    """Send ``frames`` into port 1 at most ``pps`` a second: each send at least 1/pps after
    the one before, however late that one was (never a catch-up burst)."""
    interval = 1.0 / pps
    next_at = time.monotonic()
    for frame in frames:
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        tu.send_packet(test, 1, frame)
        next_at = max(next_at, time.monotonic()) + interval


def tos_of(pkt: Packet) -> int:
    return pkt[IP].tos if IP in pkt else pkt[IPv6].tc


class CongestionTest(MrcPtfTest):
    def setUp(self) -> None:
        super().setUp()
        self.set_queue(PORT, RATE_PPS, QUEUE_DEPTH)

    def hold_every_frame(self, frames: list[Packet]) -> None:
        """Deepen the queue to hold all of ``frames`` at once: none can be tail-dropped, however
        their arrivals bunch."""
        self.set_queue(PORT, RATE_PPS, max(QUEUE_DEPTH, len(frames)))

    def received(self, timeout: float = 2.0) -> list[Packet]:
        got = self.collect([PORT], timeout=timeout)
        return [Ether(raw) for raw in got[PORT]]


class EctPacketsAreMarkedUnderLoadOthersNever(CongestionTest):
    def runTest(self) -> None:
        self.route_to_port([f"{DST_V4}/32"], PORT, next_id=1)
        self.set_ecn(PORT, min_depth=2, max_depth=10)
        marks0 = self.counter("MrcEgress.ecn.ecn_marks", PORT)
        frames: list[Packet] = []
        for psn in range(100):
            ecn = 0 if psn % 4 == 3 else 2  # every fourth data packet is not ECN-capable
            frames.append(mrc_data(SWITCH_MAC, psn=psn, ecn=ecn, payload_len=256))
            if psn % 10 == 5:
                frames.append(mrc_sack(SWITCH_MAC, psn=psn, ecn=2))
        self.hold_every_frame(frames)
        send_paced(self, frames, SEND_PPS)
        pkts = self.received()
        self.assertEqual(len(pkts), len(frames), "nothing dropped: the queue holds them all")
        data = [p for p in pkts if p["MrcBTH"].opcode != Opcode.SACK]
        control = [p for p in pkts if p["MrcBTH"].opcode == Opcode.SACK]
        ect = [p for p in data if p["MrcBTH"].psn % 4 != 3]
        not_ect = [p for p in data if p["MrcBTH"].psn % 4 == 3]
        ce_ect = sum(1 for p in ect if tos_of(p) & 3 == ECN_CE)
        self.assertGreater(ce_ect, len(ect) // 2, "most ECT packets marked once the queue builds")
        self.assertTrue(all(tos_of(p) & 3 == 0 for p in not_ect), "non-ECT never marked")
        self.assertTrue(all(tos_of(p) & 3 == 2 for p in control), "control never marked")
        self.assertEqual(self.counter("MrcEgress.ecn.ecn_marks", PORT) - marks0, ce_ect)


class NoMarkingWhereMarkingIsOff(CongestionTest):
    """MRC turns marking off toward hosts: the controller writes ecn_disabled for such ports."""

    def runTest(self) -> None:
        import finsy as fy

        self.route_to_port([f"{DST_V4}/32"], PORT, next_id=1)
        self.insert(
            fy.P4TableEntry(
                "MrcEgress.ecn.port_ecn",
                match=fy.P4TableMatch(egress_port=PORT),
                action=fy.P4TableAction("MrcEgress.ecn.ecn_disabled"),
            )
        )
        frames = [mrc_data(SWITCH_MAC, psn=psn, payload_len=256) for psn in range(60)]
        self.hold_every_frame(frames)
        send_paced(self, frames, SEND_PPS)
        pkts = self.received()
        self.assertEqual(len(pkts), 60)
        self.assertTrue(all(tos_of(p) & 3 == 2 for p in pkts))


class TrimmingTest(CongestionTest):
    host_facing = False

    def run_trim(self, version: int) -> tuple[list[Packet], list[Packet]]:
        dst = f"{DST_V4}/32" if version == 4 else f"{DST_V6}/128"
        self.route_to_port([dst], PORT, next_id=1)
        self.set_trim(PORT, TRIM_THRESHOLD, host_facing=self.host_facing)
        trims0 = self.counter("MrcIngress.trim.trims", PORT)
        n = 200
        frames = [
            mrc_data(SWITCH_MAC, version=version, psn=psn, payload_len=1024) for psn in range(n)
        ]
        send_paced(self, frames, SEND_PPS)
        pkts = self.received(timeout=3.0)
        self.arrivals = pkts
        trimmed_dscps = (DscpClass.TRIMMED, DscpClass.TRIMMED_LASTHOP)
        trimmed = [p for p in pkts if tos_of(p) >> 2 in trimmed_dscps]
        full = [p for p in pkts if tos_of(p) >> 2 == DscpClass.TRIMMABLE]
        self.assertEqual(len(trimmed) + len(full), len(pkts))
        self.assertEqual(len(pkts), n, f"none lost: {len(full)} full + {len(trimmed)} trimmed")
        self.assertGreater(len(trimmed), n // 4)
        self.assertGreater(len(full), RATE_PPS // 4)
        self.assertEqual(self.counter("MrcIngress.trim.trims", PORT) - trims0, len(trimmed))
        return full, trimmed

    def check_trimmed_headers(self, trimmed: list[Packet], version: int) -> None:
        want_dscp = DscpClass.TRIMMED_LASTHOP if self.host_facing else DscpClass.TRIMMED
        for p in trimmed:
            self.assertEqual(tos_of(p) >> 2, want_dscp)
            udp = p[UDP]
            self.assertEqual(udp.len, 8 + MRC_DATA_HEADERS)
            self.assertEqual(udp.chksum, 0)
            if version == 4:
                self.assertEqual(p[IP].len, 20 + 8 + MRC_DATA_HEADERS)
                raw_ip = bytes(p[IP])[:20]
                self.assertEqual(_ipv4_checksum(raw_ip), 0, "IPv4 header checksum valid")
            else:
                self.assertEqual(p[IPv6].plen, 8 + MRC_DATA_HEADERS)
            self.assertEqual(len(bytes(p[UDP])), 8 + MRC_DATA_HEADERS, "payload and ICRC cut")
            self.assertEqual(p["MrcRETH"].dma_length, 1024, "RETH intact")


def _ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack("!10H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class TrimmedHeadersIpv4(TrimmingTest):
    def runTest(self) -> None:
        _full, trimmed = self.run_trim(4)
        self.check_trimmed_headers(trimmed, 4)


class TrimmedHeadersIpv6(TrimmingTest):
    def runTest(self) -> None:
        _full, trimmed = self.run_trim(6)
        self.check_trimmed_headers(trimmed, 6)


class TrimmedLastHopDscpTowardHosts(TrimmingTest):
    host_facing = True

    def runTest(self) -> None:
        _full, trimmed = self.run_trim(4)
        self.check_trimmed_headers(trimmed, 4)


class TrimmedHeadersOvertakeQueuedData(TrimmingTest):
    def runTest(self) -> None:
        _full, trimmed = self.run_trim(4)
        # A trimmed header rides the high-priority queue: it arrives before full packets that
        # were sent earlier but still sat in the slow queue.
        trimmed_ids = {id(p) for p in trimmed}
        overtaken = 0
        for i, pkt in enumerate(self.arrivals):
            if id(pkt) in trimmed_ids:
                psn = pkt["MrcBTH"].psn
                overtaken += sum(
                    1
                    for later in self.arrivals[i + 1 :]
                    if id(later) not in trimmed_ids and later["MrcBTH"].psn < psn
                )
        self.assertGreater(overtaken, 0, "trimmed headers overtake queued full packets")


class ControlPacketsAreNeverTrimmedAndOvertakeData(CongestionTest):
    def runTest(self) -> None:
        self.route_to_port([f"{DST_V4}/32"], PORT, next_id=1)
        self.set_trim(PORT, TRIM_THRESHOLD, host_facing=False)
        frames: list[Packet] = []
        for psn in range(120):
            frames.append(mrc_data(SWITCH_MAC, psn=psn, dscp=DscpClass.NO_TRIM, payload_len=512))
            if psn % 20 == 19:
                frames.append(mrc_sack(SWITCH_MAC, psn=psn))
        send_paced(self, frames, SEND_PPS)
        pkts = self.received(timeout=3.0)
        sacks = [i for i, p in enumerate(pkts) if p["MrcBTH"].opcode == Opcode.SACK]
        data = [p for p in pkts if p["MrcBTH"].opcode != Opcode.SACK]
        self.assertEqual(len(sacks), 6, "every control packet delivered")
        self.assertTrue(all(tos_of(p) >> 2 == DscpClass.NO_TRIM for p in data), "NO_TRIM kept")
        self.assertTrue(all(len(p["MrcRETH"].payload) >= 512 for p in data), "no data trimmed")
        # The last SACK (sent after data PSN 119) arrives before the queued tail of the data.
        self.assertLess(sacks[-1], len(pkts) - 1)


class LinuxReceiverAcceptsTrimmedHeaders(TrimmingTest):
    """A Linux UDP socket takes trimmed IPv4 packets: lengths fixed, UDP checksum zero."""

    def runTest(self) -> None:
        import subprocess

        ifname = f"h{PORT}"
        mac = Path(f"/sys/class/net/{ifname}/address").read_text().strip()
        subprocess.run(["ip", "addr", "add", f"{DST_V4}/24", "dev", ifname], check=True)
        subprocess.run(
            [
                "sysctl",
                "-qw",
                f"net.ipv4.conf.{ifname}.rp_filter=0",
                "net.ipv4.conf.all.rp_filter=0",
            ],
            check=False,
        )
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.bind((DST_V4, ROCEV2_UDP_PORT))
            sock.settimeout(0.2)
            self.route_to_port([f"{DST_V4}/32"], PORT, next_id=1, dmac=mac)
            self.set_trim(PORT, TRIM_THRESHOLD, host_facing=True)
            n = 150
            frames = [mrc_data(SWITCH_MAC, psn=psn, payload_len=1024) for psn in range(n)]
            send_paced(self, frames, SEND_PPS)
            sizes: list[int] = []
            deadline = time.monotonic() + 10  # generous: it ends once all have arrived
            while time.monotonic() < deadline and len(sizes) < n:
                try:
                    sizes.append(len(sock.recv(4096)))
                except TimeoutError:
                    continue
            trimmed = sum(1 for s in sizes if s == MRC_DATA_HEADERS)
            self.assertGreater(trimmed, 0, f"datagram sizes seen: {sorted(set(sizes))}")
            self.assertEqual(len(sizes), n, "every packet, full or trimmed, reached the socket")
        finally:
            sock.close()
            subprocess.run(["ip", "addr", "del", f"{DST_V4}/24", "dev", ifname], check=False)
