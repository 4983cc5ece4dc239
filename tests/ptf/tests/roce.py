"""Standard RoCEv2 through mrc.p4: the RC writes, ACK/NAK and CNP are forwarded and ECMP-hashed
like MRC traffic, classified by DSCP (data, ACK/NAK, CNP: ``RoceDscp``); RoCE data rides the
lossless class's queue, is ECN-marked under load and never trimmed (with another DSCP, a full
queue drops it at the tail); ACK/NAKs and CNPs ride the high-priority queue and are never marked.
The lossless class itself, beside MRC's trimming, is tests/ptf/tests/lossless.py's.

RoCE frames are built and read as bytes here (``roce_frame``, ``bth_offset``), not with
``wire.layers``' RoCE layers, so that the switch is checked against a layout of its own.
"""

from __future__ import annotations

from collections import Counter

import ptf.testutils as tu

from controller.southbound.queues import QueuePriority
from tests.ptf.base import SWITCH_MAC, MrcPtfTest, host_mac
from tests.ptf.packets import DST_V4, DST_V6, bth_offset, roce_frame, routed
from tests.ptf.tests.congestion import send_paced
from wire.constants import ECN_CE, ECN_ECT0, ECN_NOT_ECT, AethSyndrome, DscpClass, RoceDscp
from wire.constants import RoceOpcode as Op

DROP_PARSER_BAD_OPCODE = 4
GROUP_PORTS = [2, 3, 4, 5]
N_FLOWS = 256
SPORT_BASE = 49152
FAIR_SHARE_LIMIT = 1.25
PORT = 2
RATE_PPS = 50
QUEUE_DEPTH = 64
SEND_PPS = 300
TRIM_THRESHOLD = 8


def tos(frame: bytes) -> int:
    """The IPv4 TOS or IPv6 traffic-class byte."""
    if int.from_bytes(frame[12:14], "big") == 0x86DD:
        return ((frame[14] & 0x0F) << 4) | (frame[15] >> 4)
    return frame[15]


def opcode(frame: bytes) -> int:
    return frame[bth_offset(frame)]


def psn(frame: bytes) -> int:
    start = bth_offset(frame) + 9
    return int.from_bytes(frame[start : start + 3], "big")


def syndrome(frame: bytes) -> int:
    """The AETH syndrome of an ACK/NAK (the AETH follows the 12-byte BTH)."""
    return frame[bth_offset(frame) + 12]


def sport(frame: bytes) -> int:
    start = bth_offset(frame) - 8
    return int.from_bytes(frame[start : start + 2], "big")


class RoceOpcodesAreForwardedUnchanged(MrcPtfTest):
    """Every RC write opcode, ACK, NAK and CNP, over IPv4 and IPv6, leaves routed (MACs
    rewritten, TTL - 1) with headers, payload, DSCP and ICRC as they came; nothing is counted as
    an unknown opcode."""

    def runTest(self) -> None:
        self.route_to_port([f"{DST_V4}/32", f"{DST_V6}/128"], port=2, next_id=1)
        before = self.counter("MrcIngress.drop_reasons", DROP_PARSER_BAD_OPCODE)
        for version in (4, 6):
            for op in Op:
                frame = roce_frame(SWITCH_MAC, op, version=version, payload_len=64)
                tu.send_packet(self, 1, frame)
                tu.verify_packet(self, routed(frame, SWITCH_MAC, host_mac(2)), 2)
            nak = roce_frame(
                SWITCH_MAC,
                Op.RC_ACKNOWLEDGE,
                version=version,
                syndrome=AethSyndrome.NAK_PSN_SEQUENCE_ERROR,
            )
            tu.send_packet(self, 1, nak)
            tu.verify_packet(self, routed(nak, SWITCH_MAC, host_mac(2)), 2)
        tu.verify_no_other_packets(self)
        after = self.counter("MrcIngress.drop_reasons", DROP_PARSER_BAD_OPCODE)
        self.assertEqual(after, before)


class RoceEcmpTest(MrcPtfTest):
    def setUp(self) -> None:
        super().setUp()
        self.add_group(1, GROUP_PORTS)
        self.add_route(f"{DST_V4}/32", 1)
        self.add_route(f"{DST_V6}/128", 1)

    def send_and_map(self, frames: list[bytes]) -> dict[tuple[int, int], int]:
        """Send ``frames``; (UDP source port, PSN) of each to the port it left by."""
        for frame in frames:
            tu.send_packet(self, 1, frame)
        got = self.collect([*GROUP_PORTS, 1, 6, 7, 8], timeout=1.5)
        self.assertEqual(sum(len(v) for p, v in got.items() if p not in GROUP_PORTS), 0)
        landed: dict[tuple[int, int], int] = {}
        for port in GROUP_PORTS:
            for raw in got[port]:
                key = (sport(raw), psn(raw))
                self.assertNotIn(key, landed, f"{key} delivered twice")
                landed[key] = port
        self.assertEqual(len(landed), len(frames), "every frame delivered once")
        return landed


class RoceFlowsSpreadByFiveTuple(RoceEcmpTest):
    """Flows (one UDP source port each, as a QP has) spread evenly over the group; every packet
    of a flow, whatever its opcode, takes the same member, and again on a second send."""

    def runTest(self) -> None:
        for version in (4, 6):
            sports = range(SPORT_BASE, SPORT_BASE + N_FLOWS)
            frames = [
                bytes(roce_frame(SWITCH_MAC, Op.RC_RDMA_WRITE_ONLY, version=version, sport=s))
                for s in sports
            ]
            landed = self.send_and_map(frames)
            per_port = Counter(landed.values())
            fair = N_FLOWS / len(GROUP_PORTS)
            self.assertEqual(set(per_port), set(GROUP_PORTS), f"every member used: {per_port}")
            self.assertLessEqual(max(per_port.values()), FAIR_SHARE_LIMIT * fair, f"{per_port}")
            first = {s: port for (s, _), port in landed.items()}
            # One QP's whole exchange, on a few flows: each packet on its flow's member.
            exchange = [Op.RC_RDMA_WRITE_FIRST, Op.RC_RDMA_WRITE_MIDDLE, Op.RC_RDMA_WRITE_LAST]
            exchange += [Op.RC_RDMA_WRITE_LAST_IMM, Op.RC_RDMA_WRITE_ONLY_IMM]
            exchange += [Op.RC_ACKNOWLEDGE, Op.CNP]
            again = [
                bytes(roce_frame(SWITCH_MAC, op, version=version, sport=s, psn=1 + i))
                for s in sports[:16]
                for i, op in enumerate(exchange)
            ]
            for (s, _), port in self.send_and_map(again).items():
                self.assertEqual(port, first[s], f"flow {s} moved")


class RoceCongestionTest(MrcPtfTest):
    """Port 2 slowed to RATE_PPS: its normal queue and the lossless class's, as the controller
    gives both the link's rate."""

    def setUp(self) -> None:
        super().setUp()
        self.route_to_port([f"{DST_V4}/32"], PORT, next_id=1)
        self.set_queues(QUEUE_DEPTH)

    def set_queues(self, depth: int) -> None:
        for prio in (QueuePriority.NORMAL, QueuePriority.LOSSLESS):
            self.set_queue(PORT, RATE_PPS, depth, prio)

    def received(self, timeout: float = 3.0) -> list[bytes]:
        return self.collect([PORT], timeout=timeout)[PORT]


class RoceDataIsMarkedUnderLoadAckAndCnpNever(RoceCongestionTest):
    def runTest(self) -> None:
        self.set_ecn(PORT, min_depth=2, max_depth=10)
        marks0 = self.counter("MrcEgress.ecn.ecn_marks", PORT)
        frames = []
        for n in range(100):
            ecn = ECN_NOT_ECT if n % 4 == 3 else ECN_ECT0  # every fourth not ECN-capable
            frames.append(roce_frame(SWITCH_MAC, Op.RC_RDMA_WRITE_ONLY, psn=n, ecn=ecn))
            if n % 10 == 5:  # ECT(0) on purpose: their class, not their bits, spares them
                frames.append(roce_frame(SWITCH_MAC, Op.RC_ACKNOWLEDGE, psn=n, ecn=ECN_ECT0))
                frames.append(roce_frame(SWITCH_MAC, Op.CNP, psn=n, ecn=ECN_ECT0))
        self.set_queues(len(frames))  # room for all: none is tail-dropped
        send_paced(self, frames, SEND_PPS)
        pkts = self.received()
        self.assertEqual(len(pkts), len(frames), "nothing dropped: the queue holds them all")
        data = [p for p in pkts if opcode(p) == Op.RC_RDMA_WRITE_ONLY]
        ect = [p for p in data if psn(p) % 4 != 3]
        not_ect = [p for p in data if psn(p) % 4 == 3]
        others = [p for p in pkts if opcode(p) in (Op.RC_ACKNOWLEDGE, Op.CNP)]
        ce = sum(1 for p in ect if tos(p) & 3 == ECN_CE)
        self.assertGreater(ce, len(ect) // 2, "most ECT RoCE data marked once the queue builds")
        self.assertTrue(all(tos(p) & 3 == ECN_NOT_ECT for p in not_ect), "non-ECT never marked")
        self.assertEqual(len(others), 20)
        self.assertTrue(all(tos(p) & 3 == ECN_ECT0 for p in others), "ACK and CNP never marked")
        self.assertEqual(self.counter("MrcEgress.ecn.ecn_marks", PORT) - marks0, ce)


class RoceDataOutsideItsClassIsNeverTrimmedButDroppedAtTheTail(RoceCongestionTest):
    """On a trimming port whose normal queue overflows, RoCE data sent with MRC's trimmable DSCP
    (so outside the lossless class) arrives whole or not at all: it has no METH to keep."""

    def runTest(self) -> None:
        self.set_trim(PORT, TRIM_THRESHOLD, host_facing=False)
        dscp = DscpClass.TRIMMABLE
        trims0 = self.counter("MrcIngress.trim.trims", PORT)
        n = 200
        frames = [
            roce_frame(SWITCH_MAC, Op.RC_RDMA_WRITE_ONLY, psn=i, dscp=dscp, payload_len=1024)
            for i in range(n)
        ]
        send_paced(self, frames, SEND_PPS)
        pkts = self.received()
        self.assertLess(len(pkts), n, "the queue overflowed: some were dropped")
        self.assertGreater(len(pkts), QUEUE_DEPTH // 2)
        self.assertTrue(all(len(p) == len(bytes(frames[0])) for p in pkts), "none cut")
        self.assertTrue(all(tos(p) >> 2 == dscp for p in pkts), "DSCP kept")
        self.assertEqual(self.counter("MrcIngress.trim.trims", PORT) - trims0, 0)


class AcksNaksAndCnpsOvertakeQueuedData(RoceCongestionTest):
    """With the lossless queue backed up, every ACK, NAK and CNP rides the high-priority queue:
    the last of each kind (sent after data PSN 119) leaves ahead of data sent before it."""

    def runTest(self) -> None:
        frames = []
        for n in range(120):
            frames.append(roce_frame(SWITCH_MAC, Op.RC_RDMA_WRITE_ONLY, psn=n, payload_len=512))
            if n % 20 == 19:
                frames.append(roce_frame(SWITCH_MAC, Op.CNP, psn=n))
                frames.append(roce_frame(SWITCH_MAC, Op.RC_ACKNOWLEDGE, psn=n))
                frames.append(
                    roce_frame(
                        SWITCH_MAC,
                        Op.RC_ACKNOWLEDGE,
                        psn=n,
                        syndrome=AethSyndrome.NAK_PSN_SEQUENCE_ERROR,
                    )
                )
        self.set_queues(len(frames))
        send_paced(self, frames, SEND_PPS)
        pkts = self.received()
        self.assertEqual(len(pkts), len(frames), "nothing dropped: the queue holds them all")
        self.assertTrue(all(tos(p) >> 2 == RoceDscp.CNP for p in pkts if opcode(p) == Op.CNP))
        acks = [p for p in pkts if opcode(p) == Op.RC_ACKNOWLEDGE]
        self.assertTrue(all(tos(p) >> 2 == RoceDscp.ACK for p in acks))
        for kind, is_kind in (
            ("CNP", lambda p: opcode(p) == Op.CNP),
            ("ACK", lambda p: opcode(p) == Op.RC_ACKNOWLEDGE and syndrome(p) == AethSyndrome.ACK),
            (
                "NAK",
                lambda p: (
                    opcode(p) == Op.RC_ACKNOWLEDGE
                    and syndrome(p) == AethSyndrome.NAK_PSN_SEQUENCE_ERROR
                ),
            ),
        ):
            at = [i for i, p in enumerate(pkts) if is_kind(p)]
            self.assertEqual(len(at), 6, f"every {kind} delivered")
            last = at[-1]
            overtaken = [psn(p) for p in pkts[last + 1 :] if opcode(p) == Op.RC_RDMA_WRITE_ONLY]
            self.assertTrue(overtaken, f"the last {kind} overtook no queued data")
            self.assertTrue(all(n < 120 for n in overtaken))
