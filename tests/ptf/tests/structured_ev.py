"""Structured EV: the switch's field of the entropy value names the uplink, exactly.

The field sits where the keyless ``ev_field`` table's default action says (a shift from the
EV's bit 0 and a mask; EV bits 31-16 are the UDP source port). Entries of ``uplinks`` map
(next-hop id, field value) to a port; a miss falls back to the EV-hashed group.
"""

from __future__ import annotations

import finsy as fy
import ptf.testutils as tu
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from tests.ptf.base import SWITCH_MAC, MrcPtfTest, host_mac
from tests.ptf.packets import DST_V4, DST_V6, mrc_data, routed

UPLINKS = [2, 3, 4, 5]
EV_BASE = 49152
NEXT_ID = 1


class StructuredEvTest(MrcPtfTest):
    def setUp(self) -> None:
        super().setUp()
        self.add_group(NEXT_ID, UPLINKS)
        self.add_route(f"{DST_V4}/32", NEXT_ID)
        self.add_route(f"{DST_V6}/128", NEXT_ID)

    def tearDown(self) -> None:
        try:
            # A default action is not deleted with the entries: put the switch back to hashing.
            self.sw.modify(
                [
                    fy.P4TableEntry(
                        "MrcIngress.structured_ev.ev_field",
                        action=fy.P4TableAction("NoAction"),
                        is_default_action=True,
                    )
                ]
            )
        finally:
            super().tearDown()

    def set_field(self, shift: int, mask: int) -> None:
        self.sw.modify(
            [
                fy.P4TableEntry(
                    "MrcIngress.structured_ev.ev_field",
                    action=fy.P4TableAction(
                        "MrcIngress.structured_ev.set_ev_field", shift=shift, mask=mask
                    ),
                    is_default_action=True,
                )
            ]
        )

    def add_uplink(self, value: int, port: int) -> None:
        self.insert(
            fy.P4TableEntry(
                "MrcIngress.structured_ev.uplinks",
                match=fy.P4TableMatch(next_id=NEXT_ID, ev_field=value),
                action=fy.P4TableAction(
                    "MrcIngress.structured_ev.ev_uplink",
                    port=port,
                    smac=SWITCH_MAC,
                    dmac=host_mac(port),
                ),
            )
        )

    def port_of(self, frame: Ether) -> int:
        tu.send_packet(self, 1, frame)
        got = self.collect([*UPLINKS, 1, 6, 7, 8], timeout=0.5)
        arrived = [(port, raw) for port, raws in got.items() for raw in raws]
        self.assertEqual(len(arrived), 1, f"one copy, not {[p for p, _ in arrived]}")
        port, raw = arrived[0]
        self.assertEqual(Ether(raw), routed(Ether(bytes(frame)), SWITCH_MAC, host_mac(port)))
        return port


class FieldValueNamesTheUplink(StructuredEvTest):
    def runTest(self) -> None:
        # Field: the source port's two low bits (EV bits 17-16).
        self.set_field(16, 0x3)
        for value, port in enumerate(UPLINKS):
            self.add_uplink(value, port)
        for version in (4, 6):
            for ev in range(EV_BASE, EV_BASE + 32):
                frame = Ether(bytes(mrc_data(SWITCH_MAC, version=version, ev=ev, payload_len=32)))
                self.assertEqual(self.port_of(frame), UPLINKS[ev & 0x3], f"EV port {ev}")


class FieldPositionIsTheTopologysChoice(StructuredEvTest):
    def runTest(self) -> None:
        # One bit, the source port's bit 3 (EV bit 19): bits outside it do not matter.
        self.set_field(19, 0x1)
        self.add_uplink(0, 2)
        self.add_uplink(1, 5)
        for ev in range(EV_BASE, EV_BASE + 32):
            frame = Ether(bytes(mrc_data(SWITCH_MAC, ev=ev, payload_len=32)))
            self.assertEqual(self.port_of(frame), 5 if ev & 0x8 else 2, f"EV port {ev}")


class FieldCanSitInTheFlowLabel(StructuredEvTest):
    def runTest(self) -> None:
        # Over IPv6 the EV's low 16 bits are the flow label's: a field there steers too.
        self.set_field(0, 0x3)
        for value, port in enumerate(UPLINKS):
            self.add_uplink(value, port)
        for label in range(16):
            frame = Ether(bytes(mrc_data(SWITCH_MAC, version=6, flow_label=label, payload_len=32)))
            self.assertEqual(frame[IPv6].fl, label)
            self.assertEqual(self.port_of(frame), UPLINKS[label & 0x3])


class MissFallsBackToTheHashedGroup(StructuredEvTest):
    def runTest(self) -> None:
        self.set_field(16, 0x3)
        self.add_uplink(0, 2)  # only value 0 is steered
        seen: dict[int, int] = {}
        for ev in range(EV_BASE, EV_BASE + 64):
            frame = Ether(bytes(mrc_data(SWITCH_MAC, ev=ev, payload_len=32)))
            port = self.port_of(frame)
            if ev & 0x3 == 0:
                self.assertEqual(port, 2)
            else:
                seen[ev] = port
        self.assertGreater(len(set(seen.values())), 1, "unsteered EVs are hashed over the group")
        # Hashing is per EV: the same EV lands where it did.
        for ev, port in list(seen.items())[:8]:
            frame = Ether(bytes(mrc_data(SWITCH_MAC, ev=ev, payload_len=32)))
            self.assertEqual(self.port_of(frame), port)


class UnconfiguredSwitchOnlyHashes(StructuredEvTest):
    def runTest(self) -> None:
        # Uplink entries without a field position do nothing: ECMP stays the default, and
        # every EV lands where hashing alone put it.
        frames = [
            Ether(bytes(mrc_data(SWITCH_MAC, ev=ev, payload_len=32)))
            for ev in range(EV_BASE, EV_BASE + 32)
        ]
        hashed = [self.port_of(frame) for frame in frames]
        self.assertGreater(len(set(hashed)), 1)
        target = next(port for port in UPLINKS if port != hashed[0])
        for value in range(4):
            self.add_uplink(value, target)
        self.assertEqual([self.port_of(frame) for frame in frames], hashed)
        # The same entries steer every EV once the field is set.
        self.set_field(16, 0x3)
        self.assertEqual({self.port_of(frame) for frame in frames}, {target})
