"""The lossless RoCE class beside MRC's trimming, on one congested BMv2 port.

Port 2 is slowed to RATE_PPS as the controller slows a link: its normal queue (MRC data) and the
lossless class's queue (standard RoCE data) both at the link's rate, the normal queue QUEUE_DEPTH
deep and the lossless one as deep as a topology makes it by default; ECN marking and trimming
on. Standard RoCE data and MRC data arrive interleaved, each at three times RATE_PPS, paced as
congestion.py paces (a loaded machine only sends slower, and each class still arrives at 1.5
times its queue's rate).

The lossless class is "no congestion drops; pause frames (PFC) not modelled": every RoCE data
packet arrives, whole, some ECN-marked for DCQCN, while MRC data beyond the trim threshold is
trimmed; the same load overflows a lossless queue left at BMv2's default depth, so the depth
is what keeps it lossless; and a backed-up lossless queue never makes MRC data trimmed (the
occupancy that trimming reads is the normal queue's alone).
"""

from __future__ import annotations

from collections.abc import Callable

from scapy.packet import Packet

from controller.southbound.queues import QueuePriority
from tests.ptf.base import BMV2_DEFAULT_QUEUE_DEPTH, SWITCH_MAC, MrcPtfTest
from tests.ptf.packets import DST_V4, mrc_data, roce_frame
from tests.ptf.tests.congestion import send_paced
from tests.ptf.tests.roce import opcode, psn, tos
from topologies.defaults import DEFAULT_SETTINGS
from wire.constants import ECN_CE, DscpClass, RoceDscp
from wire.constants import RoceOpcode as Op

PORT = 2
RATE_PPS = 50
QUEUE_DEPTH = 64
TRIM_THRESHOLD = 8
#: Frames of each transport; with both interleaved, each arrives at SEND_PPS / 2.
PER_TRANSPORT = 300
SEND_PPS = 300
PAYLOAD = 1024


def is_mrc(frame: bytes) -> bool:
    """An MRC frame: its BTH opcode is in MRC's vendor range (0xC0 and up)."""
    return opcode(frame) >= 0xC0


def interleaved(every: int, mrc_frames: int) -> list[Packet]:
    """PER_TRANSPORT RoCE data frames with an MRC data frame after every ``every``-th, up to
    ``mrc_frames`` of them; PSNs count each transport's frames from 0."""
    frames: list[Packet] = []
    sent_mrc = 0
    for n in range(PER_TRANSPORT):
        frames.append(roce_frame(SWITCH_MAC, Op.RC_RDMA_WRITE_ONLY, psn=n, payload_len=PAYLOAD))
        if n % every == every - 1 and sent_mrc < mrc_frames:
            frames.append(mrc_data(SWITCH_MAC, psn=sent_mrc, payload_len=PAYLOAD))
            sent_mrc += 1
    return frames


class LosslessClassTest(MrcPtfTest):
    def setUp(self) -> None:
        super().setUp()
        self.route_to_port([f"{DST_V4}/32"], PORT, next_id=1)
        self.set_queue(PORT, RATE_PPS, QUEUE_DEPTH, QueuePriority.NORMAL)
        self.set_lossless_depth(DEFAULT_SETTINGS.lossless_queue.depth)
        self.set_ecn(PORT, min_depth=2, max_depth=10)
        self.set_trim(PORT, TRIM_THRESHOLD, host_facing=False)

    def set_lossless_depth(self, depth: int) -> None:
        self.set_queue(PORT, RATE_PPS, depth, QueuePriority.LOSSLESS)

    def exchange(self, frames: list[Packet]) -> tuple[list[bytes], list[bytes]]:
        """Send ``frames`` paced; the RoCE and the MRC frames that left by PORT."""
        send_paced(self, frames, SEND_PPS)
        got = self.collect([PORT], timeout=3.0)[PORT]
        return [f for f in got if not is_mrc(f)], [f for f in got if is_mrc(f)]

    def counter_delta(self, name: str) -> Callable[[], int]:
        before = self.counter(name, PORT)
        return lambda: self.counter(name, PORT) - before


class LosslessRoceDataIsNeverDroppedWhileMrcDataIsTrimmed(LosslessClassTest):
    def runTest(self) -> None:
        trims = self.counter_delta("MrcIngress.trim.trims")
        marks = self.counter_delta("MrcEgress.ecn.ecn_marks")
        frames = interleaved(every=1, mrc_frames=PER_TRANSPORT)
        roce, mrc = self.exchange(frames)

        self.assertEqual(sorted(psn(f) for f in roce), list(range(PER_TRANSPORT)), "none lost")
        whole = len(bytes(frames[0]))
        self.assertTrue(all(len(f) == whole for f in roce), "none cut")
        self.assertTrue(all(tos(f) >> 2 == RoceDscp.DATA for f in roce), "DSCP kept")
        roce_ce = sum(1 for f in roce if tos(f) & 3 == ECN_CE)
        self.assertGreater(roce_ce, PER_TRANSPORT // 4, "marked as its queue built: DCQCN acts")

        trimmed_dscps = (DscpClass.TRIMMED, DscpClass.TRIMMED_LASTHOP)
        trimmed = [f for f in mrc if tos(f) >> 2 in trimmed_dscps]
        self.assertEqual(len(mrc), PER_TRANSPORT, "MRC data arrives whole or trimmed")
        self.assertGreater(len(trimmed), PER_TRANSPORT // 4, "MRC data past the threshold cut")
        self.assertEqual(trims(), len(trimmed))
        mrc_ce = sum(1 for f in mrc if tos(f) & 3 == ECN_CE)
        self.assertEqual(marks(), roce_ce + mrc_ce)


class TheSameLoadOverflowsALosslessQueueOfBmv2sDefaultDepth(LosslessClassTest):
    """The load above is congestion a shallow queue drops: what keeps RoCE data whole is the
    lossless class's depth, not a light load."""

    def runTest(self) -> None:
        self.set_lossless_depth(BMV2_DEFAULT_QUEUE_DEPTH)
        roce, _mrc = self.exchange(interleaved(every=1, mrc_frames=PER_TRANSPORT))
        self.assertLess(len(roce), PER_TRANSPORT, "a full queue dropped RoCE data at its tail")
        self.assertGreater(len(roce), BMV2_DEFAULT_QUEUE_DEPTH // 2)


class ABackedUpLosslessQueueNeverTrimsMrcData(LosslessClassTest):
    """RoCE data at five times the rate backs up the lossless queue while MRC data arrives at
    0.6 of its own queue's rate: no MRC packet is trimmed, as trimming reads only the normal
    queue's occupancy."""

    def runTest(self) -> None:
        trims = self.counter_delta("MrcIngress.trim.trims")
        mrc_frames = PER_TRANSPORT // 9
        roce, mrc = self.exchange(interleaved(every=9, mrc_frames=mrc_frames))
        self.assertEqual(len(roce), PER_TRANSPORT, "none lost")
        self.assertEqual(len(mrc), mrc_frames)
        self.assertTrue(all(tos(f) >> 2 == DscpClass.TRIMMABLE for f in mrc), "none trimmed")
        self.assertEqual(trims(), 0)
