"""MRC-aware ECMP: the entropy value picks the member; same EV same member, EVs spread evenly."""

from __future__ import annotations

import subprocess
import time
from collections import Counter

import ptf.testutils as tu
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether

from tests.ptf.base import BMV2_LINK_POLL_S, SWITCH_MAC, MrcPtfTest
from tests.ptf.packets import DST_V4, DST_V6, mrc_data
from wire.frames import ev_of

N_EVS = 256
EV_BASE = 49152  # EVs are UDP source ports from the dynamic range
GROUP_PORTS = [2, 3, 4, 5]
FAIR_SHARE_LIMIT = 1.25


class EcmpTest(MrcPtfTest):
    def setUp(self) -> None:
        super().setUp()
        self.members = self.add_group(1, GROUP_PORTS)
        self.add_route(f"{DST_V4}/32", 1)
        self.add_route(f"{DST_V6}/128", 1)

    def spray(self, frames: list[Ether]) -> dict[tuple[int, int], int]:
        """Send frames; map (ip version, EV) to the port each arrived on."""
        for frame in frames:
            tu.send_packet(self, 1, frame)
        got = self.collect([*GROUP_PORTS, 1, 6, 7, 8], timeout=1.5)
        self.assertEqual(sum(len(v) for p, v in got.items() if p not in GROUP_PORTS), 0)
        landed: dict[tuple[int, int], int] = {}
        for port in GROUP_PORTS:
            for raw in got[port]:
                pkt = Ether(raw)
                version = 6 if pkt.type == 0x86DD else 4
                key = (version, pkt[UDP].sport if version == 4 else ev_of(pkt))
                self.assertNotIn(key, landed, f"{key} delivered twice")
                landed[key] = port
        self.assertEqual(len(landed), len(frames), "every frame delivered once")
        return landed

    def assert_balanced(self, landed: dict[tuple[int, int], int]) -> None:
        per_port = Counter(landed.values())
        fair = len(landed) / len(GROUP_PORTS)
        self.assertEqual(set(per_port), set(GROUP_PORTS), f"every member used: {per_port}")
        self.assertLessEqual(max(per_port.values()), FAIR_SHARE_LIMIT * fair, f"{per_port}")


def frames(version: int, evs: range, flow_label: int = 0) -> list[Ether]:
    return [
        mrc_data(SWITCH_MAC, version=version, ev=ev, psn=i, payload_len=64, flow_label=flow_label)
        for i, ev in enumerate(evs)
    ]


EVS = range(EV_BASE, EV_BASE + N_EVS)


class DistinctEvsSpreadEvenlyIpv4(EcmpTest):
    def runTest(self) -> None:
        before = {m: self.counter("MrcIngress.next.member_packets", m) for m in self.members}
        landed = self.spray(frames(4, EVS))
        self.assert_balanced(landed)
        # Per-member counters show the same spraying balance the ports saw.
        per_port = Counter(landed.values())
        for member, port in zip(self.members, GROUP_PORTS, strict=True):
            delta = self.counter("MrcIngress.next.member_packets", member) - before[member]
            self.assertEqual(delta, per_port[port])


class DistinctEvsSpreadEvenlyIpv6(EcmpTest):
    def runTest(self) -> None:
        self.assert_balanced(self.spray(frames(6, EVS)))


class Ipv6FlowLabelIsPartOfTheEv(EcmpTest):
    def runTest(self) -> None:
        same_port = [
            mrc_data(SWITCH_MAC, version=6, ev=EV_BASE, psn=i, payload_len=64, flow_label=label)
            for i, label in enumerate(range(N_EVS))
        ]
        self.assert_balanced(self.spray(same_port))


class SameEvAlwaysSameMember(EcmpTest):
    def runTest(self) -> None:
        first = self.spray(frames(4, EVS) + frames(6, EVS))
        # Interleave IPv4 and IPv6 and send again: no EV may move.
        mixed = [f for pair in zip(frames(4, EVS), frames(6, EVS), strict=True) for f in pair]
        second = self.spray(mixed)
        self.assertEqual(first, second)


class WatchPortSteersAroundADownMember(EcmpTest):
    """The host-side end of a member's veth goes down: BMv2 reads its port as down (carrier
    lost, on its 200 ms poll) and stops choosing that member, without the controller; once the
    link is back, it chooses the member again.

    The cut member is the runner's unwatched port (PTF's capture thread dies when its own
    interface goes down), so its share is read from the switch's tx counter. After each change
    the test sprays until the switch has caught up (at most ``CATCH_UP_S``, generous: a loaded
    machine may poll late), then checks one whole spray."""

    CATCH_UP_S = 15.0

    def setUp(self) -> None:
        MrcPtfTest.setUp(self)
        self.cut_port = int(tu.test_params_get()["unwatched_port"])
        self.members = self.add_group(1, [*GROUP_PORTS[:3], self.cut_port])
        self.add_route(f"{DST_V4}/32", 1)

    def set_link(self, up: bool) -> None:
        """Set the cut member's link, then spray until the switch uses that member (``up``) or
        not (down), failing after ``CATCH_UP_S``."""
        subprocess.run(
            ["ip", "link", "set", f"h{self.cut_port}", "up" if up else "down"], check=True
        )
        deadline = time.monotonic() + self.CATCH_UP_S
        time.sleep(BMV2_LINK_POLL_S)  # one poll: the earliest the switch can know
        while (self.send_and_count()[1] > 0) != up:
            if time.monotonic() > deadline:
                state = "up" if up else "down"
                self.fail(f"the switch did not follow the link {state} in {self.CATCH_UP_S} s")

    def send_and_count(self) -> tuple[Counter[int], int]:
        """Per-port arrivals on the watched members, and what left on the cut port."""
        tx0 = self.counter("MrcEgress.port_tx", self.cut_port)
        for frame in frames(4, EVS):
            tu.send_packet(self, 1, frame)
        got = self.collect(GROUP_PORTS[:3], timeout=1.5)
        seen = Counter({port: len(pkts) for port, pkts in got.items()})
        return seen, self.counter("MrcEgress.port_tx", self.cut_port) - tx0

    def runTest(self) -> None:
        seen, on_cut = self.send_and_count()
        self.assertGreater(on_cut, 0, "all four members in use while the link is up")
        self.assertEqual(sum(seen.values()) + on_cut, N_EVS)
        try:
            self.set_link(up=False)
            seen, on_cut = self.send_and_count()
            self.assertEqual(on_cut, 0, "nothing sent to the member whose link is down")
            self.assertEqual(sum(seen.values()), N_EVS, "its share went to the other members")
            self.assertEqual(len([p for p in seen if seen[p]]), 3)
        finally:
            self.set_link(up=True)
        seen, on_cut = self.send_and_count()
        self.assertGreater(on_cut, 0, "the member is used again once its link is back")
        self.assertEqual(sum(seen.values()) + on_cut, N_EVS)
